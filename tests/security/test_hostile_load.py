"""Protects the harness against hostile output: a 200 MB agent reply, a verifier printing 1 GB and a
command writing 2 GB into /tmp each end with a recorded exit reason, and the harness's own peak
memory (VmHWM of the process running the trial) stays under PEAK_RSS_MB."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEAK_RSS_MB = 300


def _run(case: str, tmp_path: Path) -> dict:
    import subprocess

    out = tmp_path / f"{case}.json"
    proc = subprocess.run([sys.executable, "-m", "tests.security.hostile_trial", case, str(out)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    print(f"{case}: exit_reason={result['exit_reason']} peak RSS {result['peak_rss_kb'] / 1024:.0f} MB")
    assert result["peak_rss_kb"] < PEAK_RSS_MB * 1024, result
    return result


@pytest.mark.slow
def test_a_200mb_reply_ends_the_trial_as_limit_exceeded_in_bounded_memory(tmp_path: Path):
    result = _run("reply_200mb", tmp_path)
    assert result["exit_reason"] == "limit_exceeded" and "passed 1048576 bytes" in result["error"]


@pytest.mark.slow
def test_a_verifier_printing_1gb_is_read_head_and_tail_with_its_size_recorded(tmp_path: Path):
    result = _run("verifier_1gb", tmp_path)
    assert result["exit_reason"] == "passed" and result["passed"]  # the oracle solved it; the flood is harmless
    verified = [s for s in result["steps"] if "verifier_output_bytes" in s.get("extra", {})][-1]
    assert verified["extra"]["verifier_output_bytes"] >= 1_000_000_000


@pytest.mark.slow
def test_a_command_writing_2gb_into_tmp_hits_the_tmpfs_bound(tmp_path: Path):
    result = _run("tmp_2gb", tmp_path)
    assert result["exit_reason"] == "failed"  # the agent solved nothing; its flood ended in ENOSPC
    seen = json.dumps(result["steps"])
    assert "No space left on device" in seen and "rc=1" in seen
