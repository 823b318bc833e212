"""Protects `hrbench plan`: delta-method trial counts and a simulated check that agrees with them."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import TINY_STUDY


def _plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "plan", *args], capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})


def test_plan_from_sim_truth_agrees_with_simulation_within_20_percent():
    result = _plan(str(TINY_STUDY), "--half-width", "0.3", "--sims", "3000")
    assert result.returncode == 0, result.stderr
    low, high = map(float, re.search(r"half-width ratio ([\d.]+)–([\d.]+)", result.stdout).groups())
    assert 0.8 <= low <= high <= 1.2
    assert "inputs: sim truth" in result.stdout
    m_i = int(re.search(r"m_i = (\d+), m_0 = (\d+)", result.stdout).group(1))
    assert m_i > 10  # the tiny study's declared 10 trials per stage cannot reach ±0.3


def test_plan_with_stated_values_needs_both():
    result = _plan(str(TINY_STUDY), "--q", "0.9", "--p-obs", "0.5")
    assert result.returncode == 0  # sim agents still use their truth; stated values are a fallback
    bad = _plan("does-not-exist.yaml")
    assert bad.returncode == 1 and "study file not found" in bad.stderr + bad.stdout
