"""Protects the harness on the docker backend: natural and checkpoint trials, state repair, the shell."""

from __future__ import annotations

import pytest

from hrbench.agents.oracle import OracleAgent
from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.envs.docker import DockerBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
from tests.docker.conftest import hrbench_containers

pytestmark = pytest.mark.slow  # podman, image builds, containers


class ShellOracle(OracleAgent):
    """The oracle, typing into the persistent shell (as llm and command agents do)."""

    uses_shell = True


def _spec(kind: str, stage: str | None = None, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent="sim", condition="baseline", protocol="p", task="tiny-chain",
                     kind=kind, stage=stage, trial_index=index)


def test_defects_lower_later_stages_unless_repaired_on_docker(backend: DockerBackend, tmp_path):
    task = load_task(TINY_TASK)
    always_defect = SimParams(skill=1.0, defect_rate=1.0, defect_penalty=50.0)
    budget = CheckpointProtocol().budget
    own = run_natural_trial(_spec("natural"), task, SimAgent(always_defect), backend, CONDITIONS["baseline"],
                            budget, 1, trajectory_dir=tmp_path)
    assert own.stages_passed == 1 and own.stopped_stage == "double" and own.exit_reason == "failed"
    repaired = run_natural_trial(_spec("natural", index=1), task, SimAgent(always_defect), backend,
                                 CONDITIONS["state_repair"], budget, 1, trajectory_dir=tmp_path)
    assert repaired.passed and repaired.stages_passed == 3
    checkpoint = run_checkpoint_trial(_spec("checkpoint", "report"), task, SimAgent(always_defect), backend,
                                      CheckpointProtocol(), 1, trajectory_dir=tmp_path)
    assert checkpoint.passed and checkpoint.exit_reason == "passed"
    assert hrbench_containers(backend) == []


def test_a_shell_agent_passes_every_stage_across_verifications(backend: DockerBackend, tmp_path):
    task = load_task(TINY_TASK)
    record = run_natural_trial(_spec("natural", index=2), task, ShellOracle(), backend, CONDITIONS["baseline"],
                               CheckpointProtocol().budget, 1, trajectory_dir=tmp_path)
    assert record.passed and record.stages_passed == 3, record.error
    assert hrbench_containers(backend) == []
