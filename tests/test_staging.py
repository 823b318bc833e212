"""A stage's tests and solution are staged once per content and bound read-only (hrbench/envs/local/staging.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend
from hrbench.envs.local.confine import privileged
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

PROBE = ("mkdir -p /logs/verifier\n"
         "echo \"inode $(stat -c %i /tests/test.sh) marker $(cat /tests/marker.txt)\"\n"
         "touch /tests/planted 2>&1 | tail -n 1; echo data > /tests/marker.txt 2>/dev/null || echo 'marker: refused'\n"
         "echo 1 > /logs/verifier/reward.txt\n")


def _line(output: str, word: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(word))


@pytest.fixture
def probe(tmp_path: Path):
    """(environment, stage whose tests are `tests/`, that folder) over tiny-chain's first stage."""
    task = load_task(TINY_TASK)
    env = LocalBackend(tmp_path / "cache").start(task, 0)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(PROBE)
    (tests / "marker.txt").write_text("first\n")
    yield env, task.stage("make").model_copy(update={"tests": tests}), tests
    env.close()


def test_a_stages_tests_are_staged_once_bound_read_only_and_staged_again_when_they_change(probe):
    env, stage, tests = probe
    first, second = env.verify(stage), env.verify(stage)
    assert first.passed and second.passed, first.output
    # the same staged copy both times (one inode), and the verifier can change nothing in it
    assert _line(first.output, "inode") == _line(second.output, "inode") == _line(first.output, "inode")
    assert "marker first" in first.output and "Read-only file system" in first.output, first.output
    assert "marker: refused" in first.output
    # the task's tests edited on disk (same size, likely within the same mtime tick): a new staging
    (tests / "marker.txt").write_text("later\n")
    third = env.verify(stage)
    assert "marker later" in third.output, third.output
    assert _line(third.output, "inode") != _line(first.output, "inode")


@pytest.mark.skipif(not privileged(), reason="the staged copy is root's only when hrbench runs as root")
def test_a_staged_copy_is_the_harnesss_whatever_the_sources_modes(probe):
    env, stage, tests = probe
    os.chmod(tests / "marker.txt", 0o666)  # a world-writable source file
    os.chmod(tests, 0o777)
    assert env.verify(stage).passed
    from hrbench.envs.local import _TESTS

    staged = [folder for folder in _TESTS._folders.values() if (folder / "marker.txt").exists()
              and (folder / "test.sh").read_text() == PROBE]
    assert staged
    for folder in staged:
        for path in [folder, *folder.rglob("*")]:
            info = path.lstat()
            assert info.st_uid == 0 and not info.st_mode & 0o022, (path, stat.filemode(info.st_mode))


def test_each_solution_script_gets_its_own_staged_copy(tmp_path: Path):
    task = load_task(TINY_TASK)
    stage = task.stage("make")
    env = LocalBackend(tmp_path / "cache").start(task, 0)
    try:
        show = "echo \"inode $(stat -c %i /solution/solve.sh) says {}\"; touch /solution/x 2>&1 | tail -n 1\n"
        a1, b, a2 = (env.run_solution(stage, show.format(word)) for word in ("alpha", "beta", "alpha"))
        assert "says alpha" in a1.output and "says beta" in b.output and "says alpha" in a2.output
        assert _line(a1.output, "inode") == _line(a2.output, "inode") != _line(b.output, "inode")
        assert "Read-only file system" in a1.output, a1.output
        assert env.run_solution(stage).exit_code == 0  # the task's own solve.sh, staged under its own key
    finally:
        env.close()
