"""Protects the verifier mechanics of the local backend: no agent process survives into a
verification, /logs starts empty, the reward is read only once the verifier's whole process tree
is dead (and never through a symlink), its output is read head and tail, and agent code can be run
by a verifier in a nested bwrap without /logs."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from hrbench.envs.local import VERIFIER_OUTPUT_LIMIT, LocalBackend, LocalEnvironment
from hrbench.harness.terminal import ShellTerminal
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK


@pytest.fixture
def env(tmp_path: Path):
    environment = LocalBackend(tmp_path / "cache").start(load_task(TINY_TASK), 0)
    yield environment
    environment.close()


def _verify_with(env: LocalEnvironment, tmp_path: Path, script: str):
    """Verify stage `make` with `script` as its test.sh."""
    tests = tmp_path / f"tests-{secrets.token_hex(3)}"
    tests.mkdir()
    (tests / "test.sh").write_text(script)
    stage = env.task.stage("make")
    return env.verify(stage.model_copy(update={"tests": tests}))


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def test_agent_processes_are_gone_before_the_verifier_runs_and_the_next_part_gets_a_fresh_shell(env, tmp_path):
    nonce = secrets.token_hex(6)
    terminal = ShellTerminal(env)
    terminal.run(f"(setsid nohup bash -c 'while true; do date +%s%N > /app/beat; sleep 0.05; done' {nonce} "
                 ">/dev/null 2>&1 &); export KEPT=1; echo planted", 5, 5)
    assert "planted" in terminal.read()
    time.sleep(0.3)
    assert _alive_with(nonce), "the background writer did not start"
    _verify_with(env, tmp_path, "echo 0 > /logs/verifier/reward.txt\n")
    assert not _alive_with(nonce)
    beat = (env.workspace / "beat").read_text()
    time.sleep(0.3)
    assert (env.workspace / "beat").read_text() == beat  # nothing writes the workspace any more
    terminal.run("echo next-part KEPT=${KEPT:-unset}", 5, 5)
    text = terminal.read()
    assert "next-part KEPT=unset" in text and "exited" not in text  # a new shell, opened without a word
    terminal.close()


def test_the_reward_is_read_after_the_verifiers_whole_process_tree_is_dead(env, tmp_path):
    nonce = secrets.token_hex(6)
    result = _verify_with(env, tmp_path, f"""
echo 0 > /logs/verifier/reward.txt
(setsid nohup bash -c 'sleep 0.5; echo 1 > /logs/verifier/reward.txt' {nonce} >/dev/null 2>&1 &)
python3 -c "import os, time
if os.fork() == 0:
    os.setsid(); time.sleep(0.5); open('/logs/verifier/reward.json', 'w').write('{{\\"a\\": 1}}')" {nonce}
""")
    time.sleep(0.8)
    assert result.reward == 0.0 and not _alive_with(nonce)


def test_logs_start_empty_and_a_symlinked_reward_is_not_followed(env, tmp_path):
    host_one = tmp_path / "one.txt"
    host_one.write_text("1")
    first = _verify_with(env, tmp_path, "ls -A /logs/verifier | wc -l; touch /logs/verifier/left-behind; "
                                        "echo 1 > /logs/verifier/reward.txt\n")
    assert first.reward == 1.0 and first.output.strip() == "0"
    second = _verify_with(env, tmp_path, f"ls -A /logs/verifier | wc -l; ln -s {host_one} /logs/verifier/reward.txt\n")
    assert second.output.strip() == "0" and second.reward == 0.0
    host_dir = tmp_path / "elsewhere"
    host_dir.mkdir()
    (host_dir / "reward.txt").write_text("1")
    third = _verify_with(env, tmp_path, f"rmdir /logs/verifier; ln -s {host_dir} /logs/verifier\n")
    assert third.reward == 0.0  # the reward folder itself replaced by a symlink to a host directory


def test_verifier_output_is_kept_head_and_tail_with_its_size(env, tmp_path):
    result = _verify_with(env, tmp_path, "echo first-line; head -c 5000000 /dev/zero | tr '\\0' x; echo; "
                                         "echo last-line; echo 1 > /logs/verifier/reward.txt\n")
    assert result.passed and result.output_bytes > 5_000_000
    assert len(result.output) < VERIFIER_OUTPUT_LIMIT + 200 and "output truncated" in result.output
    assert result.output.startswith("first-line") and result.output.rstrip().endswith("last-line")


def test_a_verifier_can_run_agent_code_in_a_nested_bwrap_without_logs(env, tmp_path):
    (env.workspace / "agent_code.sh").write_text("echo RAN-NESTED; echo 1 > /logs/verifier/reward.txt && echo FORGED\n")
    result = _verify_with(env, tmp_path, """
out=$(bwrap --ro-bind / / --tmpfs /logs --dev /dev --proc /proc --unshare-pid --die-with-parent \\
      bash /app/agent_code.sh 2>&1); echo "nested: rc=$? $out"
ls -A /logs/verifier | wc -l
[ -z "$(ls -A /logs/verifier)" ] && echo 1 > /logs/verifier/reward.txt
""")
    assert "nested: rc=1 RAN-NESTED" in result.output and "FORGED" not in result.output, result.output
    assert result.reward == 1.0, result.output  # the nested run could not touch the real /logs
