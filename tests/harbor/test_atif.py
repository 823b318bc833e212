"""Protects the trajectory format (issue 24): what a trial writes validates against Harbor's ATIF models
(the `atif` package) at the version hrbench declares."""

from __future__ import annotations

from pathlib import Path

import pytest
from atif import Trajectory

from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import ATIF_VERSION, read_trajectory
from hrbench.harness.trials import run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK


def test_a_trials_trajectory_is_valid_atif_at_the_declared_version(tmp_path: Path):
    spec = TrialSpec(prereg_sha256="0" * 64, agent="sim", condition="baseline", protocol="natural-full-own",
                     task="tiny-chain", kind="natural", stage=None, trial_index=0)
    defects = SimParams(skill=1.0, defect_rate=1.0, defect_penalty=50.0)  # looks, acts, fails a later stage
    record = run_natural_trial(spec, load_task(TINY_TASK), SimAgent(defects), LocalBackend(tmp_path / "cache"),
                               CONDITIONS["baseline"], CheckpointProtocol().budget, 1,
                               trajectory_dir=tmp_path / "trajectories")
    doc = read_trajectory(tmp_path / record.trajectory_path)
    trajectory = Trajectory.model_validate(doc)
    assert trajectory.schema_version == ATIF_VERSION == "ATIF-v1.8"
    assert {s.source for s in trajectory.steps} >= {"user", "agent"}
    assert any(s.tool_calls for s in trajectory.steps) and any(s.observation for s in trajectory.steps)
    broken = {**doc, "steps": [{**doc["steps"][0], "step_id": 2}, *doc["steps"][1:]]}
    with pytest.raises(ValueError):  # the models are strict: a renumbered step is refused
        Trajectory.model_validate(broken)
