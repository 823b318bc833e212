"""Pins the worked examples of issue 8 (docs/statistics.md §7): no interval collapses onto a
point, no replicate is dropped, a boundary count keeps its variance, an agent without
successes gets no invented residual, and a single-task family row is its task row."""

import math

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import outcomes_from_counts as counts
from hrbench.stats import compare, residual_table
from hrbench.stats.compare.bootstrap import rescaled_task_resample_gammas
from hrbench.stats.packed import pack, raw_probabilities
from hrbench.stats.cluster import cluster_t_intervals, jeffreys_log_limits, mover_gamma_interval


def _rows(tasks, **kw):
    return {(r.scope, r.name): r for r in compare.residual_table(tasks, n_boot=kw.pop("n_boot", 2000), **kw)}


def test_two_task_family_with_equal_ratios_is_not_zero_width():
    # Issue 8: raw (P_exp, P_obs) = (0.64, 0.32) and (0.40, 0.20) gave [0.693, 0.693]: both tasks have
    # P_obs/P_exp = 1/2, so the between-task spread of the estimates is exactly 0.
    a = counts("a", "F", [8, 8], [10, 10], [17, 0, 8])  # raw P_exp 0.64, P_obs 8/25 = 0.32
    b = counts("b", "F", [8, 5], [10, 10], [20, 0, 5])  # raw P_exp 0.40, P_obs 5/25 = 0.20
    fam = _rows([a, b])[("family", "F")]
    assert (fam.p_expected, fam.p_observed) == (pytest.approx(0.52), pytest.approx(0.26))
    assert fam.gamma == pytest.approx(math.log(2))
    assert fam.ci_estimand == "tasks: sampled" and fam.ci_method == "cluster-t" and fam.df == pytest.approx(1.0)
    # The population interval contains the trial noise, so it is wider than the tasks-fixed one ...
    assert fam.ci_low < fam.trial_ci_low < fam.gamma < fam.trial_ci_high < fam.ci_high
    # ... and, with 1 df, says it rests on too few tasks.
    assert "few-tasks" in fam.flags
    assert fam.trial_ci_high - fam.trial_ci_low > 0.5  # the trial-level interval: [0.17, 1.35]


def test_cluster_t_floor_is_the_trial_variance_times_t_with_one_df():
    pe, po = np.array([0.64, 0.40]), np.array([0.32, 0.20])
    var_e, var_o = np.array([0.004, 0.003]), np.array([0.008, 0.006])
    ct = cluster_t_intervals(pe, po, var_e, var_o, np.ones((2, 1)), np.zeros(2, int), 0.95)
    tau = 0.25 * (var_e / 0.52**2 + var_o / 0.26**2)
    half = stats.t.ppf(0.975, 1) * math.sqrt(tau.sum())
    assert ct.low[0] == pytest.approx(math.log(2) - half) and ct.high[0] == pytest.approx(math.log(2) + half)


def test_cluster_t_of_one_family_is_the_student_t_interval_of_the_linearized_values():
    rng = np.random.default_rng(0)
    pe, po = rng.uniform(0.3, 0.9, 6), rng.uniform(0.1, 0.5, 6)
    ct = cluster_t_intervals(pe, po, np.zeros(6), np.zeros(6), np.ones((6, 1)), np.zeros(6, int), 0.9)
    x = pe / pe.mean() - po / po.mean()
    half = stats.t.ppf(0.95, 5) * x.std(ddof=1) / math.sqrt(6)
    theta = math.log(pe.mean() / po.mean())
    assert ct.df[0] == pytest.approx(5) and ct.low[0] == pytest.approx(theta - half)


def test_negative_rescaled_replicates_are_kept_not_dropped():
    # Issue 8: P_obs 0.40 and 0.04 — the rescaled resample of the observed sum goes below 0 and
    # those replicates were dropped, giving [0.565, 0.764] with 0.764 = Γ̂ itself.
    a = counts("a", "F", [8, 8], [10, 10], [15, 0, 10])  # P_obs 10/25 = 0.40
    b = counts("b", "F", [8, 8], [10, 10], [24, 0, 1])  # P_obs 1/25 = 0.04
    pk = pack([a, b])
    pe, po = raw_probabilities(pk)
    reps = rescaled_task_resample_gammas(pe, po, pk, 4000, np.random.SeedSequence(0), pk.weights)
    assert not np.isnan(reps).any()  # none dropped
    assert np.isposinf(reps[:, -1]).mean() > 0.05  # the resampled observed sum hit 0: Γ* = +inf, kept
    rescaled = _rows([a, b], hierarchical="tasks_rescaled")[("family", "F")]
    assert rescaled.ci_high > rescaled.gamma + 0.1  # the upper tail is no longer cut at Γ̂
    default = _rows([a, b])[("family", "F")]
    assert default.ci_low < default.gamma < default.ci_high and "few-tasks" in default.flags


def test_boundary_counts_keep_their_variance():
    # Issue 8: three stages at 20/20 and 25/25 natural successes gave [−0.014, −0.014].
    t = counts("t", "F", [20, 20, 20], [20, 20, 20], [0, 0, 0, 25])
    row = _rows([t])[("task", "t")]
    assert row.gamma == pytest.approx(3 * math.log(20.5 / 21) - 3 * math.log(25.5 / 26))
    assert row.ci_low < row.gamma - 0.05 and row.ci_high > row.gamma + 0.05
    assert row.ci_low < 0 < row.ci_high and "boundary" in row.flags
    for (lo, hi), term in zip(row.stage_term_ci, row.stage_terms):
        assert lo < term < hi
    # Two such tasks: the tasks-fixed bootstrap of the family resamples them from the Jeffreys mean.
    u = counts("u", "F", [20, 20, 20], [20, 20, 20], [0, 0, 0, 25])
    fam = _rows([t, u])[("family", "F")]
    assert fam.trial_ci_high - fam.trial_ci_low > 0.05 and fam.ci_high - fam.ci_low > 0.05


def test_single_task_family_row_is_its_task_row():
    # Issue 8: task row 2.50 [0.98, 5.16] vs family row 2.07 [0.74, ∞) for the same data.
    rng = np.random.default_rng(4)
    others = [counts(f"o{j}", "A", [8, 7, 9], [10, 10, 10], [1, 2, 2, 5]) for j in range(3)]
    lone = counts("lone", "B", [9, 9, 8], [10, 10, 10], [3, 3, 2, 2])
    rows = _rows([*others, lone], seed=int(rng.integers(100)))
    task, fam = rows[("task", "lone")], rows[("family", "B")]
    assert fam.gamma == task.gamma and fam.p_expected == task.p_expected and fam.p_observed == task.p_observed
    assert (fam.trial_ci_low, fam.trial_ci_high) == (task.trial_ci_low, task.trial_ci_high)
    assert fam.ci_low is None and fam.ci_high is None and fam.ci_method == "too-few-tasks"
    assert "too-few-tasks" in fam.flags and fam.trial_ci_method == task.ci_method == "mover-jeffreys"


def test_agent_that_never_passes_gets_no_point_and_no_zero_width_interval():
    # Issue 8: a 0.5B model passed 0 of 22 checkpoint trials and 0 of 12 rollouts; the table said
    # Γ = −2.603 [−2.603, −2.603].
    tasks = [counts("a", "F", [0] * 4, [6, 6, 5, 5], [6, 0, 0, 0, 0]), counts("b", "F", [0, 0], [6, 6], [6, 0, 0])]
    for rule in ("jeffreys", "haldane", "bound"):
        for row in residual_table(tasks, zero_rule=rule, n_boot=300):
            assert row.gamma is None and row.zero_rule_applied and "zero-rule" in row.flags
            assert "no-estimate" in row.flags and row.bound is None
            assert row.trial_ci_low == -math.inf and row.trial_ci_high == math.inf


def test_agent_that_gives_up_with_good_checkpoints_gets_a_lower_bound():
    tasks = [counts(n, "F", [8, 9], [10, 10], [12, 0, 0]) for n in ("a", "b")]
    for row in residual_table(tasks, n_boot=300):
        assert row.gamma is None and row.bound == "lower" and "one-sided" in row.flags
        assert row.trial_ci_low == row.bound_value and row.trial_ci_high == math.inf and row.bound_value > 0


def test_agent_that_passes_everything_gets_a_two_sided_interval_around_zero():
    for n in (3, 5):  # with 5 tasks the sample variance (0 here) is floored at a χ² quantile share
        tasks = [counts(f"t{j}", "F", [10, 10, 10], [10, 10, 10], [0, 0, 0, 10]) for j in range(n)]
        for row in residual_table(tasks, n_boot=500):
            assert row.gamma is not None and abs(row.gamma) < 0.05 and "boundary" in row.flags
            # 10 of 10 per task: the Jeffreys limit 0.80 per stage; 30 of 30 per family: 0.96.
            width = 0.05 if row.scope == "task" else 0.02
            assert row.trial_ci_low < -width and row.trial_ci_high > width
            if row.scope != "task":
                assert row.ci_low < row.gamma - 0.01 and row.ci_high > row.gamma + 0.01


def test_mover_interval_matches_jeffreys_for_a_single_proportion():
    # One checkpoint stage and an always-successful natural side with huge m reduce Γ to ln q.
    lo, hi = jeffreys_log_limits(np.array([7]), np.array([20]), 0.95)
    q_hat = np.log([7.5 / 21])
    low, high = mover_gamma_interval(q_hat, (lo, hi), np.zeros(0), (np.zeros(0), np.zeros(0)))
    assert math.exp(low) == pytest.approx(stats.beta.ppf(0.025, 7.5, 13.5))
    assert math.exp(high) == pytest.approx(stats.beta.ppf(0.975, 7.5, 13.5))


def test_every_interval_names_its_estimand():
    rows = residual_table([counts(f"t{j}", "F", [7, 8], [10, 10], [2, 3, 5]) for j in range(5)], n_boot=300)
    for r in rows:
        assert r.ci_estimand == ("tasks: fixed" if r.scope == "task" else "tasks: sampled")
    assert rows[-1].df == pytest.approx(4) and "few-tasks" not in rows[-1].flags
