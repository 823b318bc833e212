"""Protects the homogeneous null H_s and study planning (delta method vs simulation)."""

import pytest

from hrbench.stats import horizon_below, horizon_table, min_detectable_gamma, plan_trials, simulate_half_width
from hrbench.stats.planning import delta_se_planned


@pytest.mark.parametrize("p, s, h", [(0.9, 0.5, 7), (0.99, 0.5, 69), (0.5, 0.25, 2), (0.8, 0.5, 4)])
def test_first_horizon_below_s(p, s, h):
    assert horizon_below(p, s) == h
    assert p**h <= s + 1e-12 and p ** (h - 1) > s


def test_horizon_table_rows():
    rows = horizon_table([0.9, 0.95], [0.5, 0.1])
    assert {(r["p"], r["s"]): r["horizon"] for r in rows}[(0.9, 0.5)] == 7
    assert len(rows) == 4


def test_plan_meets_target_half_width_with_fewest_trials():
    q, p_obs = [0.9, 0.8, 0.9, 0.85], 0.3
    plan = plan_trials(q, p_obs, half_width=0.25, ratio=2.0)
    assert plan.m0 == 2 * plan.m_stage and plan.half_width_delta <= 0.25
    assert 1.96 * delta_se_planned(q, p_obs, plan.m_stage - 1, 2 * (plan.m_stage - 1)) > 0.25


def test_simulated_half_width_agrees_with_delta_method_within_20_percent():
    plan = plan_trials([0.9, 0.8, 0.9, 0.85], 0.3, half_width=0.3)
    check = simulate_half_width(plan.q, plan.p_obs, plan.m_stage, plan.m0, n_sims=3000, seed=1)
    assert 0.8 <= check.ratio_to_delta <= 1.2


def test_min_detectable_gamma_is_power_shifted_delta_se():
    se = delta_se_planned([0.9, 0.8], 0.5, 100, 100)
    assert min_detectable_gamma([0.9, 0.8], 0.5, 100, 100) == pytest.approx((1.959964 + 0.841621) * se, rel=1e-5)
