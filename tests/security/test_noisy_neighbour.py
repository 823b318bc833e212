"""Protects other trials from a trial's CPU hunger: a fork bomb and 8 busy loops in one trial beside a
normal verification in another. The noisy trial is held to its CPU quota (throttled), its fork bomb to
its process bound, and the normal verifier gives the same outcome as on a quiet machine, well within
its timeout."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, SandboxLimits, bwrap_available
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")

LIMITS = SandboxLimits(memory_mb=256, max_pids=64, tmp_mb=32, shm_mb=8, workspace_mb=64, cpus=1.0)
TIMEOUT_S = 30
NOISE = ("for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; "
         "bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 60\n")


def _verify_once(backend: LocalBackend, task) -> tuple[bool, float]:
    env = backend.start(task, 0)
    try:
        env.exec("echo 4 > a.txt", 10)
        verdict = env.verify(task.stages[0])
        assert verdict.error is None, verdict
        return verdict.passed, verdict.duration_s
    finally:
        env.close()


def test_a_fork_bomb_and_busy_loops_leave_another_trials_verifier_its_share(tmp_path: Path):
    registry = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, registry)
    test = registry / "steps" / "make" / "tests" / "test.sh"  # a verifier with some CPU work of its own
    test.write_text(test.read_text().replace("mkdir -p /logs/verifier\n",
                                             "mkdir -p /logs/verifier\npython3 -c 'sum(i * i for i in range(2_000_000))'\n"))
    toml = registry / "task.toml"
    toml.write_text(toml.read_text() + f"\n[verifier]\ntimeout_sec = {TIMEOUT_S}\n")
    task = load_task(registry)
    backend = LocalBackend(tmp_path / "cache", limits=LIMITS)
    quiet = _verify_once(backend, task)

    noisy = backend.start(task, 0)
    noise = threading.Thread(target=noisy.exec, args=(NOISE, 20), daemon=True)
    try:
        noise.start()
        deadline = time.monotonic() + 60  # a loaded machine starts the bomb slowly
        while len(noisy.cgroup.pids()) < LIMITS.max_pids - 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # until the bomb meets its process bound (the loops spin meanwhile)
        assert len(noisy.cgroup.pids()) >= LIMITS.max_pids - 2
        quota = _cpu_quota(noisy)
        loud = _verify_once(backend, task)
    finally:
        noisy.close()
        noise.join()
    print(f"verifier alone {quiet[1]:.2f} s, beside the noisy trial {loud[1]:.2f} s (timeout {TIMEOUT_S} s); "
          f"noisy trial's cpu group: {quota}")
    assert loud[0] == quiet[0] is True and loud[1] < TIMEOUT_S / 2
    # the mechanism: every process of the noisy trial is in its cpu group, capped at LIMITS.cpus cores
    assert quota["members"] >= LIMITS.max_pids - 2 and quota["cores"] == LIMITS.cpus, quota


def _cpu_quota(env) -> dict[str, float]:
    group = env.cgroup.dirs["cpu"]
    if (group / "cpu.cfs_quota_us").exists():  # cgroup v1
        cores = int((group / "cpu.cfs_quota_us").read_text()) / int((group / "cpu.cfs_period_us").read_text())
    else:
        quota, period = (group / "cpu.max").read_text().split()
        cores = int(quota) / int(period)
    return {"members": len((group / "cgroup.procs").read_text().split()), "cores": cores}
