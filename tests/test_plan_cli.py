"""Protects `hrbench plan`: delta-method trial counts and a simulated check that agrees with them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_STUDY

DEMO_STUDY = Path(__file__).resolve().parents[1] / "hrbench" / "studies" / "demo.yaml"


def _plan(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "plan", *args], capture_output=True, text=True,
                          timeout=timeout, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})


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


def test_the_claims_plan_predicts_the_cluster_t_width_from_spread_and_trial_variance():
    """Closed forms: one family of 5 tasks with no spread has df 4 and t_4 · √Στ; spread adds n σ²."""
    import numpy as np
    from scipy import stats

    from hrbench.stats.planning import calibrated_range_warnings, predicted_half_width

    tau = np.full(5, 0.01)
    flat = predicted_half_width(np.zeros(5), tau, np.zeros(5, int), 0.95)
    assert flat.df == pytest.approx(4) and flat.half_width == pytest.approx(stats.t.ppf(0.975, 4) * np.sqrt(0.05))
    x = np.array([-0.2, -0.1, 0.0, 0.1, 0.2])
    spread = predicted_half_width(x, tau, np.zeros(5, int), 0.95)
    assert spread.between == pytest.approx(5 * np.var(x, ddof=1))
    # What a study prints averages t_ν̂·√v̂ over the estimated variance: near t_ν·√V (one family: ν̂ = ν).
    assert 0.8 * flat.half_width < flat.expected_half_width < 1.3 * flat.half_width
    # At the declared trials the target is met when it equals the predicted half-width; halving the trial
    # part (twice the trials) is what a smaller target costs when the tasks' spread is 0.
    assert flat.trials_needed(flat.half_width, 0.95, 10) == 10
    assert flat.trials_needed(flat.half_width / np.sqrt(2), 0.95, 10) == 20
    assert spread.trials_needed(0.01, 0.95, 10) is None  # the spread alone is wider than ±0.01
    assert calibrated_range_warnings(20, 20, {"a": 5, "b": 7}) == []
    warned = calibrated_range_warnings(4, 4, {"a": 5, "b": 3})
    assert len(warned) == 2 and "m_i = 4" in warned[0] and "(b)" in warned[1]


@pytest.mark.slow
def test_plan_on_the_demo_prints_every_claim_with_its_simulation_check_and_the_range_warning():
    """Issue 25's acceptance for `hrbench plan` on the demo (m = 4, below the calibrated range): every claim's
    half-width at the declared design and at the number of tasks that reaches the target, each predicted with
    its simulation check beside it."""
    # ~75 s of CPU: 60 studies per claim at the declared tasks and 60 at the tasks it needs (up to 140); at 40 the
    # fragile agent's headline (P_obs ≈ 0.07 at m_0 = 4, the poorest trial variance) read 1.26
    result = _plan(str(DEMO_STUDY), "--sims", "500", "--claim-sims", "60", "--half-width", "0.6", timeout=1200)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Claims at the declared design" in out and "99.5% tasks-sampled half-widths" in out
    assert "ΔΓ(context_reset) shared" in out and "ΔΓ(compaction)" in out and "Γ(baseline)" in out
    rows = re.findall(r"│\s+([\d.]+) │\s+[\d.]+ │\s+[—\d.]+ │\s+(\d+|> \d+) │\s+([—\d.]+) │\s+([—\d.]+) │\s+([—\d.]+) │"
                      r"\s+(?:\d+|unreachable) │", out)
    assert len(rows) == 21  # 3 agents × (4 conditions + 3 contrasts)
    ratios = [float(r[0]) for r in rows]
    headline = ratios[:4] + ratios[7:11] + ratios[14:18]
    assert all(0.8 <= r <= 1.25 for r in headline), headline
    # the tasks each claim needs for ±0.6 at m = 4: the declared 25 where they suffice, more for the degrading
    # agents (same family mix: multiples of 5), each with its simulated/predicted ratio at that size
    tasks = [int(r[1]) for r in rows]
    assert min(tasks) == 25 and max(tasks) > 25 and all(t % 5 == 0 for t in tasks), tasks
    for _, _, predicted, simulated, ratio in rows:
        assert float(predicted) <= 0.6 and 0.8 <= float(ratio) <= 1.25, (predicted, simulated, ratio)
    assert "warning: below the calibrated range: m_i = 4, m_0 = 4" in out
    assert "at 99.5% per task" in out
