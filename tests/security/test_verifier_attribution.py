"""Protects the line between `failed` and `verifier_error` (docs/security.md, "Whose failure"): a
verifier kept from giving a reward by what the agent left (a full workspace, code that exhausts the
verifier's memory) scores the stage 0 as the agent's failure, with a detail saying why; a verifier
that gives no reward on a sane workspace stays a `verifier_error`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hrbench.envs.confine import SandboxLimits
from hrbench.envs.local import LocalBackend, bwrap_available
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")
LIMITS = SandboxLimits(memory_mb=96, max_pids=64, tmp_mb=16, shm_mb=8, workspace_mb=16)
HOG = "python3 -c 'b = bytearray(60 << 20); import time; time.sleep(5)'"


def _verify(tmp_path: Path, before_reward: str, agent_command: str):
    registry = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, registry)
    test = registry / "steps" / "make" / "tests" / "test.sh"
    test.write_text(test.read_text().replace("mkdir -p /logs/verifier\n", f"mkdir -p /logs/verifier\n{before_reward}\n"))
    task = load_task(registry)
    env = LocalBackend(tmp_path / "cache", limits=LIMITS).start(task, 0)
    try:
        env.exec(agent_command, 20)
        return env.verify(task.stages[0])
    finally:
        env.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="a sized workspace needs root")
def test_a_workspace_the_agent_filled_is_the_agents_failure(tmp_path: Path):
    verdict = _verify(tmp_path, "echo scratch > /app/.verifier-scratch || exit 3",
                      "for i in $(seq 40); do head -c 1048576 /dev/zero > fill-$i || break; done")
    assert verdict.error is None and verdict.reward == 0 and not verdict.passed
    assert (verdict.agent_fault or "").startswith("the agent left its workspace full (16 MB)"), verdict


def test_agent_code_that_exhausts_the_verifiers_memory_is_the_agents_failure(tmp_path: Path):
    # three hogs, each under the per-process bound, together past the verifier's memory cgroup
    verdict = _verify(tmp_path, "bash /app/check.sh || exit 3",
                      f"cat > check.sh <<'EOF'\n{HOG} & {HOG} & {HOG} &\n"
                      "for job in $(jobs -p); do wait $job || exit 1; done\nEOF\n")
    assert verdict.error is None and verdict.reward == 0
    assert "met its memory bound (96 MB)" in (verdict.agent_fault or ""), verdict


def test_a_verifier_that_gives_no_reward_on_a_sane_workspace_is_a_verifier_error(tmp_path: Path):
    verdict = _verify(tmp_path, "exit 3  # a broken verifier: the task's fault, not the agent's", "echo 4 > a.txt")
    assert verdict.error is not None and verdict.agent_fault is None, verdict
