"""Protects the local sandbox's isolation: the agent sees its workspace and nothing it must not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, LocalEnvironment
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(tmp_path: Path):
    backend = LocalBackend(tmp_path / "cache")
    environment = backend.start(load_task(TINY_TASK), 1)
    yield environment
    environment.close()


def test_agent_cannot_find_any_solution_or_stage_test(env: LocalEnvironment):
    result = env.exec("find / -xdev \\( -name solve.sh -o -name test.sh -o -name checks.sh \\) 2>/dev/null; "
                      "ls /tests /logs 2>&1; echo done", 30)
    assert "solve.sh" not in result.output and "test.sh" not in result.output
    assert "No such file or directory" in result.output and result.output.strip().endswith("done")
    registry_probe = env.exec(f"cat {TINY_TASK}/steps/double/solution/solve.sh 2>&1", 10)
    assert registry_probe.exit_code != 0 and "No such file" in registry_probe.output


def test_agent_workspace_holds_the_checkpoint_state_only(env: LocalEnvironment):
    result = env.exec("pwd; ls -A", 10)
    # the persisted paths outside WORKDIR (/output, /logs/artifacts) live beside it, not in it
    assert result.output.split() == ["/app", "a.txt", "seed.txt"]


def test_agent_cannot_reach_the_network(env: LocalEnvironment):
    probe = """python3 - <<'PY'
import os, socket
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3); print("CONNECTED")
except OSError as e:
    print("BLOCKED", e)
try:
    socket.getaddrinfo("pypi.org", 443); print("RESOLVED")
except OSError as e:
    print("NORESOLVE", e)
print("LINKS", sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [])
PY"""
    result = env.exec(probe, 30)
    assert "BLOCKED" in result.output and "CONNECTED" not in result.output
    assert "NORESOLVE" in result.output and "RESOLVED\n" not in result.output


def test_agent_cannot_write_outside_its_workspace(env: LocalEnvironment, tmp_path: Path):
    marker = tmp_path / "escape.txt"
    result = env.exec(f"touch /usr/escape 2>&1; touch /etc/escape 2>&1; echo x > {marker} 2>&1; "
                      "touch /tmp/ok && echo tmp-ok; touch /app/ok && echo app-ok", 10)
    assert result.output.count("Read-only file system") >= 2
    assert not marker.exists() and not Path("/usr/escape").exists()
    assert "tmp-ok" in result.output and "app-ok" in result.output
    assert (env.workspace / "ok").exists()


def test_command_timeout_kills_the_command(env: LocalEnvironment):
    result = env.exec("sleep 30", 1.0)
    assert result.timed_out and result.duration_s < 10


def test_memory_limit_stops_a_hungry_process(tmp_path: Path):
    env = LocalBackend(tmp_path / "cache", memory_mb=128).start(load_task(TINY_TASK), 0)
    try:
        result = env.exec("python3 -c \"x = bytearray(512 * 1024 * 1024); print('allocated')\" 2>&1", 30)
        assert "allocated" not in result.output and "MemoryError" in result.output
    finally:
        env.close()


# A harness that is its container's PID 1 (a trial step pod without an init): the processes orphaned below it
# come to it, and it reaps only the children it started.
_PID_1_HARNESS = """
import ctypes, os, sys
from pathlib import Path
from hrbench.envs.local import LocalBackend, SandboxLimits
from hrbench.tasks.loader import load_task
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
env = LocalBackend(Path(sys.argv[1]), limits=SandboxLimits(max_pids=16)).start(load_task(sys.argv[2]), 0)
try:
    codes = [env.exec("true", 10).exit_code for _ in range(40)]
    print(codes.count(0), os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT))  # None: no child left to reap
finally:
    env.close()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the trial's process bound is a pids cgroup as root")
def test_a_sandbox_leaves_no_process_for_its_host_to_reap(tmp_path: Path):
    # more sandboxes in one trial than its process bound: each must be gone, not left to whoever reaps orphans
    out = subprocess.run([sys.executable, "-c", _PID_1_HARNESS, str(tmp_path / "cache"), str(TINY_TASK)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["40", "None"], out


def test_verifier_sees_tests_but_they_are_gone_afterwards(env: LocalEnvironment):
    stage = load_task(TINY_TASK).stage("double")
    assert env.verify(stage).reward == 0.0  # nothing done yet
    env.exec(stage.solution_script(), 10)
    assert env.verify(stage).passed
    after = env.exec("ls /tests 2>&1; ls -A /app", 10)
    assert "No such file" in after.output and "test.sh" not in after.output


def test_checkpoint_snapshot_is_built_once_and_copied_per_trial(tmp_path: Path):
    backend = LocalBackend(tmp_path / "cache")
    task = load_task(TINY_TASK)
    first = backend.checkpoint_state(task, 2)
    stamp = first.stat().st_mtime_ns
    env_a, env_b = backend.start(task, 2), backend.start(task, 2)
    try:
        env_a.exec("echo changed > b.txt", 10)
        assert (env_b.workspace / "b.txt").read_text().strip() == "8"
        assert backend.checkpoint_state(task, 2).stat().st_mtime_ns == stamp
        assert (first / "work" / "b.txt").read_text().strip() == "8"
    finally:
        env_a.close()
        env_b.close()


def test_host_secrets_are_hidden(env: LocalEnvironment):
    assert Path("/etc/shadow").exists()
    result = env.exec("cat /etc/shadow /etc/gshadow 2>&1; echo end", 10)
    assert "root:" not in result.output and result.output.strip().endswith("end")


def test_agent_modules_in_the_workspace_cannot_hijack_a_verifier(tmp_path: Path):
    task = load_task(TINY_TASK)
    env = LocalBackend(tmp_path / "cache").start(task, 0)
    try:
        stage = task.stage("make")
        tests = tmp_path / "tests"
        tests.mkdir()
        # PYTHONSAFEPATH comes from hrbench's check library (checks.sh), which protects its users; a verifier
        # that imports from WORKDIR on purpose (Harbor's `python -m pytest`) does not source it
        (tests / "test.sh").write_text(
            "source /tests/checks.sh\n"
            "mkdir -p /logs/verifier\npython3 -c 'import json; print(json.dumps(0))' > /logs/verifier/reward.txt\n")
        (env.workspace / "json.py").write_text("dumps = lambda value: 1\n")  # the agent's forgery
        assert env.verify(stage.model_copy(update={"tests": tests})).reward == 0.0
    finally:
        env.close()


@pytest.mark.parametrize("content, reward", [("1", 1.0), ("0.5", 0.5), ("7", 7.0), ("-3", -3.0)])
def test_reward_file_values_are_read_verbatim(tmp_path: Path, content: str, reward: float):
    from hrbench.envs.base import read_rewards

    (tmp_path / "reward.txt").write_text(content)
    assert read_rewards(tmp_path) == {"reward": reward}


@pytest.mark.parametrize("content", ["nan", "inf", "yes", ""])
def test_unusable_reward_files_are_verifier_errors(tmp_path: Path, content: str):
    from hrbench.envs.base import read_rewards
    from hrbench.tasks.harbor import RewardError

    (tmp_path / "reward.txt").write_text(content)
    with pytest.raises(RewardError):
        read_rewards(tmp_path)


def test_reward_json_sub_rewards_are_kept_unclamped(tmp_path: Path):
    from hrbench.envs.base import read_rewards

    (tmp_path / "reward.json").write_text('{"a": 5, "b": 0}')
    assert read_rewards(tmp_path) == {"a": 5.0, "b": 0.0}


def test_the_sandbox_runs_unprivileged_with_the_stated_rlimits(tmp_path: Path):
    from hrbench.envs.local.confine import SANDBOX_UID, SandboxLimits, privileged

    limits = SandboxLimits(memory_mb=300, cpu_sec=77, workspace_mb=50)
    env = LocalBackend(tmp_path / "cache", limits=limits).start(load_task(TINY_TASK), 0)
    try:
        out = env.exec("id -u; grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u; "
                       "ulimit -t; ulimit -f; ulimit -v; stat -c %u /app", 10).output.split()
    finally:
        env.close()
    uid = SANDBOX_UID if privileged() else os.geteuid()
    # bash reports -f and -v in KiB
    assert out == [str(uid), "0000000000000000", "77", str(50 * 1024), str(300 * 1024), str(uid)]
