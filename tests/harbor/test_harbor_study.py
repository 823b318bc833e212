"""Harbor tasks in whole trials and studies (issue 11): the reference agents replay solve.sh as Harbor's oracle
does, and the artifacts a verification collects are saved with the trial record."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hrbench.agents.base import Action
from hrbench.agents.oracle import OracleAgent
from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import artifacts_folder, run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.stores import StudyStores
from hrbench.tasks.harbor import ARTIFACTS_MANIFEST, _copy_at_most, save_artifacts
from hrbench.tasks.loader import load_task

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harbor"

STUDY = """\
name: harbor-helpers
description: oracle and a sim agent on a Harbor task whose solve.sh sources a sibling helper
tasks:
  registry: {registry}
agents:
  - id: reference
    kind: oracle
  - id: skilled
    kind: sim
    sim: {{skill: 1.0}}
checkpoint:
  budget: {{max_turns: 3, timeout_sec: 60, command_timeout_sec: 20}}
trials: {{checkpoint: 1, natural: 2}}
bootstrap: {{n_boot: 100, seed: 1}}
concurrency: 2
"""


def _spec(agent: str, task: str, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent=agent, condition="baseline", protocol="natural-full-own",
                     task=task, kind="natural", stage=None, trial_index=index)


@pytest.mark.slow  # `hrbench run` in full: audit, trials, estimates, report (~1 min alone, minutes under load)
def test_a_study_of_oracle_and_sim_on_a_task_with_solution_helpers_runs_end_to_end(tmp_path: Path):
    # greeter's solve.sh finds helpers.sh through BASH_SOURCE and runs /solution/emit.py: typed into a
    # shell (`bash -s`, no /solution) it fails, so every trial below passing shows the replay is Harbor's
    registry = tmp_path / "registry"
    shutil.copytree(FIXTURES / "greeter", registry / "greeter")
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.format(registry=registry))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(study), "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stores = StudyStores(out)  # the tables as the suite's store holds them (local or S3)
    trials = pd.concat([stores.read_all(t) for t in ("checkpoint_trials", "baseline/natural_trials")])
    assert set(trials["agent"]) == {"reference", "skilled"} and len(trials) == 2 * (1 + 2)
    assert trials["passed"].all() and set(trials["exit_reason"]) == {"passed"}, trials["error"].dropna().tolist()
    oracle = trials[trials["agent"] == "reference"]
    for outcomes in oracle["stage_outcomes_json"]:
        assert [o["reward"] for o in json.loads(outcomes)] == [1.0]
    audit = stores.tables.read("verifier_audit", ())
    assert audit["reference_reward"].tolist() == [1.0]


@pytest.mark.parametrize("agent", [OracleAgent(), SimAgent(SimParams(skill=1.0))], ids=["oracle", "sim"])
def test_reference_agents_replay_solve_sh_with_its_sibling_helpers(tmp_path: Path, agent):
    task = load_task(FIXTURES / "greeter")
    backend = LocalBackend(tmp_path / "cache")
    env = backend.start(task, 0)
    try:  # the control: typed into a shell, greeter's solve.sh cannot find its helpers
        typed = env.exec(task.stages[0].solution_script(), 30)
        assert typed.exit_code != 0 and "helpers.sh" in typed.output
    finally:
        env.close()
    record = run_natural_trial(_spec(agent.name, task.name), task, agent, backend, CONDITIONS["baseline"],
                               CheckpointProtocol().budget, 1, trajectory_dir=tmp_path / "trajectories")
    assert record.passed and record.exit_reason == "passed", record.error
    assert json.loads(record.stage_outcomes_json)[0]["reward"] == 1.0


def test_the_sim_agent_fails_by_replaying_the_solution_without_its_key_step(tmp_path: Path):
    # a sim that always fails runs `true` as solve.sh (no key step marked): the real verifier scores it 0
    task = load_task(FIXTURES / "greeter")
    record = run_natural_trial(_spec("hopeless", task.name), task, SimAgent(SimParams(skill=1e-9)),
                               LocalBackend(tmp_path / "cache"), CONDITIONS["baseline"], CheckpointProtocol().budget,
                               1, trajectory_dir=tmp_path / "trajectories")
    assert not record.passed and record.exit_reason == "failed"
    assert json.loads(record.stage_outcomes_json)[0]["reward"] == 0.0


def test_artifacts_are_saved_beside_the_trajectory_and_recorded_in_the_row(tmp_path: Path):
    task = load_task(FIXTURES / "ledger")
    record = run_natural_trial(_spec("oracle", task.name), task, OracleAgent(), LocalBackend(tmp_path / "cache"),
                               CONDITIONS["baseline"], CheckpointProtocol().budget, 1,
                               trajectory_dir=tmp_path / "trajectories")
    assert record.passed, record.error
    saved = json.loads(record.artifacts_json)
    folder = artifacts_folder(tmp_path / "trajectories", record.trial_key)
    assert folder.parent == (tmp_path / record.trajectory_path).parent  # beside the trajectory
    # each stage's verification saves its own copy: /logs/artifacts (persisted across stages) and the task's
    assert sorted(saved) == ["close", "open"]
    assert [Path(p).relative_to(folder.relative_to(tmp_path)).as_posix() for p in saved["open"]] == \
        ["open/files/logs/artifacts/open.log", "open/files/app/ledger.txt"]
    assert (tmp_path / saved["open"][0]).read_text() == "opened with 100\n"
    assert (tmp_path / saved["close"][-1]).read_text() == "EUR 100\nclosed\n"
    extra = read_trajectory(tmp_path / record.trajectory_path)["extra"]
    assert [e["saved"] for e in extra["artifacts"]["open"]] == saved["open"]
    assert {e["status"] for e in extra["artifacts"]["open"]} == {"saved"}


def test_artifacts_are_bounded_and_never_follow_symlinks(tmp_path: Path):
    src = tmp_path / "sandbox" / "logs" / "artifacts"
    src.mkdir(parents=True)
    (src / "a-big.bin").write_bytes(b"x" * 3000)
    (src / "b-small.txt").write_text("kept\n")
    (src / "c-link").symlink_to("/etc/passwd")
    os.mkfifo(src / "d-fifo")  # a copy would block: it is skipped, never opened
    entries = save_artifacts([("/logs/artifacts", src)], tmp_path / "saved", limit_bytes=1000)
    status = {e.path.rsplit("/", 1)[1]: e.status for e in entries}
    assert status == {"a-big.bin": "over_limit", "b-small.txt": "saved", "c-link": "symlink", "d-fifo": "not_a_file"}
    kept = sorted(p.relative_to(tmp_path / "saved").as_posix() for p in (tmp_path / "saved").rglob("*")
                  if p.is_file() or p.is_symlink())
    assert kept == ["files/logs/artifacts/b-small.txt", ARTIFACTS_MANIFEST]
    manifest = json.loads((tmp_path / "saved" / ARTIFACTS_MANIFEST).read_text())
    assert [e["status"] for e in manifest] == ["over_limit", "saved", "symlink", "not_a_file"]


def test_a_file_growing_past_the_limit_is_cut_at_it():
    # the limit bounds what is copied, not only what stat() said (a size that changes under the copy)
    out = io.BytesIO()
    assert _copy_at_most(io.BytesIO(b"y" * 5000), out, 1000) == 1000 and len(out.getvalue()) == 1000


class _SecondPartOnly(OracleAgent):
    """Does nothing in the first part, runs the reference solution in every later one."""

    name = "second-only"

    def act(self, observation):
        if observation.stage_index == 0:
            return Action(task_complete=True)
        return super().act(observation)


@pytest.mark.parametrize("strategy, gate, stages_run, harbor_reward", [
    ("mean", "min_reward = 0.0", 2, 0.25),  # the gate is met by reward 0: the rollout goes on; (0 + 0.5) / 2
    ("final", "min_reward = 0.0", 2, 0.5),  # the last stage's: cumulative, one of its two parts done
    ("mean", "", 1, 0.0),  # no gate: hrbench stops at the first failure
])
def test_min_reward_and_the_reward_strategy_in_a_natural_rollout(tmp_path: Path, strategy: str, gate: str,
                                                                  stages_run: int, harbor_reward: float):
    task_dir = tmp_path / "cumulative"
    shutil.copytree(FIXTURES / "cumulative", task_dir)
    toml = (task_dir / "task.toml").read_text().replace('"mean"', f'"{strategy}"')
    (task_dir / "task.toml").write_text(toml.replace('name = "one"\n', f'name = "one"\n{gate}\n'))
    task = load_task(task_dir)
    record = run_natural_trial(_spec("second-only", task.name), task, _SecondPartOnly(),
                               LocalBackend(tmp_path / "cache"), CONDITIONS["baseline"], CheckpointProtocol().budget,
                               1, trajectory_dir=tmp_path / "trajectories")
    outcomes = json.loads(record.stage_outcomes_json)
    assert len(outcomes) == stages_run and record.harbor_reward == harbor_reward
    # the estimand's view is unchanged by the gate: no stage passed, the chain stopped at the first part
    assert (record.passed, record.stages_passed, record.stopped_stage) == (False, 0, "one")
    assert outcomes[0]["met_min_reward"] is (True if gate else None)
