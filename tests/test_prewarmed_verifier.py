"""A stage's verifier sandbox is made while the agent works and held before its command (bwrap's
--block-fd): it judges the workspace as the agent left it, runs nothing before it is released, and
is ended without ever running when the trial ends unverified or its directory is replaced."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, LocalEnvironment, bwrap_available, prepare_trial_dir
from hrbench.envs.local.confine import area_tempdir
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")


def _programs(env: LocalEnvironment) -> set[str]:
    """What the verifier's processes are running (their names), once the launcher has put them in its
    cgroup and exec'd bwrap."""
    deadline = time.monotonic() + 5
    while True:
        names = set()
        for pid in env.verifier_cgroup.pids():
            try:
                names.add(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
        if names and not any(n.startswith(("launch", "python")) for n in names) or time.monotonic() > deadline:
            return names
        time.sleep(0.01)


def test_a_stages_verifier_is_held_before_its_command_and_judges_what_the_agent_left(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    solved, unsolved = backend.start(task, 0), backend.start(task, 0)
    try:
        time.sleep(0.3)  # time enough for an unheld verifier to have started its command
        for env in (solved, unsolved):
            assert _programs(env) == {"bwrap"}, _programs(env)  # made, held before `bash /tests/test.sh`
        solved.exec("echo $(( $(cat seed.txt) + 1 )) > a.txt", 10)  # after the verifier's sandbox was made
        stage = task.stages[0]
        assert solved.verify(stage).passed
        assert not unsolved.verify(stage).passed
        assert not solved.verifier_cgroup.pids() and not unsolved.verifier_cgroup.pids()
    finally:
        solved.close()
        unsolved.close()


def _marking_task(tmp_path: Path):
    """tiny-chain whose first verifier leaves a mark in the workspace when it runs."""
    copy = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, copy)
    (copy / "steps" / "make" / "tests" / "test.sh").write_text(
        "#!/bin/bash\ntouch /app/verifier-ran\necho 1 > /logs/verifier/reward.txt\n")
    return load_task(copy)


def test_a_held_verifier_never_runs_when_the_trial_ends_or_its_directory_is_replaced(tmp_path: Path):
    task = _marking_task(tmp_path)
    stage = task.stages[0]
    root = area_tempdir("prewarm-test")
    try:
        prepare_trial_dir(root, task)
        env = LocalEnvironment(task, root, owns_workspace=False)
        env.begin_stage(stage)
        assert _programs(env) == {"bwrap"}
        env.close()  # unverified: the held sandbox is ended, never released
        time.sleep(0.3)
        assert not (root / "work" / "verifier-ran").exists()

        backend = LocalBackend(tmp_path / "cache")
        trial = backend.start(task, 0)
        try:
            held = trial._warm
            assert held is not None
            backend.restore(trial, 0)  # state repair replaces the directories its binds hold
            time.sleep(0.3)
            assert not (trial.workspace / "verifier-ran").exists() and held.proc.poll() is not None
            assert trial.verify(stage).passed and (trial.workspace / "verifier-ran").exists()
        finally:
            trial.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
