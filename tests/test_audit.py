"""Protects the verifier audit: discriminating verifiers pass, broken ones fail with a clear reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK


def test_fixture_task_passes_every_audit_check(tmp_path: Path):
    rows = audit_task(load_task(TINY_TASK), LocalBackend(tmp_path))
    assert [r.ok for r in rows] == [True, True, True]
    assert all(r.reference_reward == 1 and r.nothing_reward == 0 and r.key_removed_reward == 0 for r in rows)
    assert all(r.forged_reward == 0 and r.edited_inputs_reward == 0 for r in rows)


def test_verifier_that_passes_without_work_is_caught(tiny_task_copy: Path, tmp_path: Path):
    (tiny_task_copy / "steps" / "report" / "tests" / "test.sh").write_text(
        "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    rows = {r.stage: r for r in audit_task(load_task(tiny_task_copy), LocalBackend(tmp_path))}
    assert not rows["report"].ok
    assert "doing nothing scores 1, not 0" in rows["report"].problem
    assert "key step still passes" in rows["report"].problem
    assert rows["make"].ok and rows["double"].ok


def test_tamper_check_names_each_cause(tiny_task_copy: Path, tmp_path: Path):
    """One audit, two broken stages: `make` trusts the workspace's seed.txt (tamper c), `double`
    runs the agent's script directly (tamper a/b)."""
    (tiny_task_copy / "steps" / "make" / "tests" / "test.sh").write_text(
        "mkdir -p /logs/verifier\n"
        'if [ "$(cat /app/a.txt 2>/dev/null)" = "$(( $(cat /app/seed.txt) + 1 ))" ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n")
    (tiny_task_copy / "steps" / "double" / "instruction.md").write_text(
        "Write /app/double.sh that prints twice the number in a.txt, and run it into /app/b.txt.\n")
    (tiny_task_copy / "steps" / "double" / "solution" / "solve.sh").write_text(
        "printf 'echo $(( $(cat /app/a.txt) * 2 ))\\n' > double.sh\n# hrbench:key-begin\nbash double.sh > b.txt\n"
        "# hrbench:key-end\n")
    (tiny_task_copy / "steps" / "double" / "tests" / "test.sh").write_text(
        "source /tests/checks.sh\nexpect_eq b \"$(cat /app/b.txt 2>/dev/null)\" 8 int\n"
        "expect_eq script \"$(bash /app/double.sh)\" 8 int\nfinish\n")
    rows = {r.stage: r for r in audit_task(load_task(tiny_task_copy), LocalBackend(tmp_path))}
    make, double = rows["make"], rows["double"]
    assert make.reference_reward == 1 and make.nothing_reward == 0 and make.forged_reward == 0
    assert not make.ok and make.edited_inputs_reward == 1
    assert "tamper (c): after editing the original inputs (seed.txt)" in make.problem
    assert "computes expected answers from workspace files" in make.problem and "verifier output:" in make.problem
    assert double.reference_reward == 1 and double.nothing_reward == 0 and double.key_removed_reward == 0
    assert not double.ok and double.forged_reward is not None
    assert "the verifier ran agent code directly (/app/double.sh)" in double.problem
    assert rows["report"].ok


def test_key_step_that_does_not_matter_is_caught(tiny_task_copy: Path, tmp_path: Path):
    (tiny_task_copy / "steps" / "double" / "solution" / "solve.sh").write_text(
        "echo $(( $(cat a.txt) * 2 )) > b.txt\n# hrbench:key-begin\ntrue\n# hrbench:key-end\n")
    rows = {r.stage: r for r in audit_task(load_task(tiny_task_copy), LocalBackend(tmp_path))}
    assert not rows["double"].ok and "removing the key step still passes" in rows["double"].problem


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "tasks", "audit", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_audit_fails_on_a_broken_task_with_the_reason(tiny_task_copy: Path):
    (tiny_task_copy / "steps" / "make" / "solution" / "solve.sh").write_text(
        "# hrbench:key-begin\necho 0 > a.txt\n# hrbench:key-end\n")
    result = _cli(str(tiny_task_copy))
    assert result.returncode == 1
    assert "FAIL tiny-chain" in result.stdout and "reference solution scores 0" in result.stdout


# Slow (~66 s: every built-in stage's reference, nothing, key-step and tamper runs); the slow pass
# of scripts/test.sh, and so CI, still runs it.
@pytest.mark.slow
@pytest.mark.parametrize("_", [None])
def test_cli_audit_passes_on_every_builtin_task(_):
    result = _cli()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all tasks pass the verifier audit" in result.stdout
    assert result.stdout.count("ok ") >= 8
