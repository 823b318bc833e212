"""Protects the LHTB dense-reward formulas (review §2.2–§2.4, §5, §6) on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hrbench.stats import dense
from hrbench.stats.intervals import jeffreys_interval, wilson_interval


def test_binary_and_episode_rewards():
    assert dense.binary_reward([True, False, True]).tolist() == [1.0, 0.0, 1.0]
    assert dense.episode_reward([True, False, True, True]) == 0.75
    assert dense.episode_reward([[1, 0], [1, 1]]).tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="at least one episode"):
        dense.episode_reward([])


def test_continuous_reward_decays_linearly_to_zero_and_missing_values_score_zero():
    # y = 10, eps = 2: |0| -> 1, |0.5| -> 0.75, |1.5| -> 0.25, |2| -> 0, |5| -> 0, NaN -> 0
    r = dense.continuous_reward([10, 10.5, 8.5, 12, 15, math.nan], 10, 2)
    assert r.tolist() == pytest.approx([1.0, 0.75, 0.25, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        dense.continuous_reward([1], [1], 0)


def test_task_reward_is_the_weighted_mean_and_equal_weights_the_plain_mean():
    assert dense.task_reward([1, 0, 0.5]) == pytest.approx(0.5)
    # (1*1 + 0*1 + 0.5*2) / 4 = 0.5; putting weight on the last subtask: (1 + 0 + 0.5*6)/8 = 0.5
    assert dense.task_reward([1, 0, 0.5], [1, 1, 2]) == pytest.approx(0.5)
    assert dense.task_reward([1, 1, 0], [1, 1, 6]) == pytest.approx(0.25)
    assert dense.task_reward([[1, 1, 0], [0, 0, 1]], [1, 1, 2]).tolist() == pytest.approx([0.5, 0.5])


@pytest.mark.parametrize("r, w, match", [([1.2], None, r"in \[0, 1\]"), ([0.5, 0.5], [1, -1], "non-negative"),
                                         ([0.5], [0], "positive sum"), ([0.5, 1], [1], "2 non-negative")])
def test_task_reward_refuses_bad_inputs(r, w, match):
    with pytest.raises(ValueError, match=match):
        dense.task_reward(r, w)


def test_stage_rewards_pad_unreached_stages_with_zero_and_subrewards_follow_weights():
    assert dense.stage_rewards([1.0, 0.4], 4).tolist() == [1.0, 0.4, 0.0, 0.0]
    assert dense.reward_from_subrewards({"b": 0.0, "a": 1.0}, {"a": 3}) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no subtask rewards"):
        dense.reward_from_subrewards({})


def test_pass_at_1_at_the_three_thresholds_with_binomial_intervals():
    R = [1.0, 0.96, 0.95, 0.92, 0.5, 0.0, 0.9499999999999, 0.91]
    rows = {row.tau: row for row in dense.pass_at_1_table(R)}
    # >= 0.9: 1, .96, .95, .92, .95-float, .91 = 6; >= 0.95: 1, .96, .95, .95-float = 4; >= 1.0: 1
    assert [(rows[t].k, rows[t].n) for t in (0.9, 0.95, 1.0)] == [(6, 8), (4, 8), (1, 8)]
    assert rows[0.95].rate == 0.5
    assert (rows[0.95].ci_low, rows[0.95].ci_high) == pytest.approx(wilson_interval(4, 8))
    j = dense.pass_at_1_table(R, taus=(1.0,), method="jeffreys")[0]
    assert (j.ci_low, j.ci_high) == pytest.approx(jeffreys_interval(1, 8)) and j.method == "jeffreys"


def test_review_w6_interval_for_two_of_46():
    # the review: 2/46 = 4.3% has a 95% binomial interval of roughly [0.5%, 14.6%] (exact);
    # Wilson is a little narrower at the top and wider at the bottom but of the same size
    row = dense.pass_at_1_table([1.0] * 2 + [0.0] * 44, taus=(0.95,))[0]
    assert row.rate == pytest.approx(0.0435, abs=1e-4)
    assert 0.005 < row.ci_low < 0.02 and 0.12 < row.ci_high < 0.15


def test_mean_reward_with_student_t_interval():
    # R = 0.2, 0.4, 0.6: mean 0.4, s = 0.2, t_{0.975, 2} = 4.302653, half = 4.302653 * 0.2 / sqrt(3)
    m = dense.mean_reward([0.2, 0.4, 0.6])
    half = 4.302653 * 0.2 / math.sqrt(3)
    assert m.mean == pytest.approx(0.4)
    assert (m.ci_low, m.ci_high) == pytest.approx((0.0, min(1.0, 0.4 + half)), abs=1e-5)  # clipped at 0
    m = dense.mean_reward([0.5, 0.6, 0.5, 0.6])
    half = 3.182446 * np.std([0.5, 0.6, 0.5, 0.6], ddof=1) / 2
    assert (m.ci_low, m.ci_high) == pytest.approx((0.55 - half, 0.55 + half), abs=1e-5)
    assert dense.mean_reward([0.3]).ci_low == 0.0 and dense.mean_reward([0.3]).ci_high == 1.0


@pytest.mark.parametrize("reason, R, kind", [
    ("timeout", 0.3, "timeout"), ("turn_cap", 0.9, "timeout"), ("failed", 0.5, "early_exit"),
    ("early_exit", 0.0, "early_exit"), ("passed", 0.8, "early_exit"), ("harness_error", 0.2, "harness_error"),
    ("harness_error", 1.0, "harness_error"), ("passed", 1.0, "passed"), ("timeout", 0.96, "passed")])
def test_failure_types(reason, R, kind):
    assert dense.failure_type(reason, R) == kind


def test_unknown_exit_reason_is_refused():
    with pytest.raises(ValueError, match="unknown exit reason 'crashed'"):
        dense.failure_type("crashed", 0.1)


def test_false_finish_is_an_early_exit_at_three_quarters_or_more():
    assert dense.is_false_finish("early_exit", 0.75) and dense.is_false_finish("early_exit", 0.92)
    assert not dense.is_false_finish("early_exit", 0.74) and not dense.is_false_finish("timeout", 0.9)


def test_failure_summary_counts_types_shares_and_false_finishes():
    reasons = ["timeout", "timeout", "failed", "failed", "harness_error", "passed", "early_exit"]
    R = [0.2, 0.4, 0.8, 0.3, 0.0, 1.0, 0.9]
    s = dense.failure_summary(reasons, R)
    assert (s.n_runs, s.n_failed) == (7, 6)
    assert s.counts == {"timeout": 2, "early_exit": 3, "harness_error": 1}
    assert s.shares["early_exit"] == pytest.approx(0.5)
    assert s.false_finishes == 2  # failed at 0.8 and early exit at 0.9
    assert s.mean_reward_by_type["timeout"] == pytest.approx(0.3)


def test_resource_summary_means_per_run():
    s = dense.resource_summary([100, 300], [4, 6], [10.0, 20.0], [0.5, 1.5])
    assert (s.tokens, s.turns, s.wall_s, s.cost_usd) == (200, 5, 15, 1.0)
    with pytest.raises(ValueError, match="differ in length"):
        dense.resource_summary([1], [1, 2], [1], [1])


def test_pareto_frontier_keeps_cheapest_for_each_pass_rate_level():
    # review §6.2 shape: cheap low scorer, mid, expensive best; an expensive weak model is dominated
    cost = [2.47, 6.13, 6.32, 21.46, 27.57, 5.0]
    rate = [0.022, 0.065, 0.065, 0.152, 0.022, 0.043]
    assert dense.pareto_frontier(cost, rate) == [0, 5, 1, 3]
    assert dense.pareto_frontier([1, 1], [0.5, 0.5]) == [0, 1]  # equal points are both kept
