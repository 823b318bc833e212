"""Protects the calibrated aggregate (docs/statistics.md §6–7, §11): unbiased per-task P's in
family/all rows, the bootstrap hierarchical options, and the exclude rule's single kept task."""

import math

import numpy as np
import pytest

from hrbench.stats import compare, outcomes_from_counts, paired_difference, residual_table, simulate_task
from hrbench.stats.compare.bootstrap import rescaled_task_resample_gammas
from hrbench.stats.packed import pack


def _study(rng, n=8, fams="AB"):
    q = np.array([0.9, 0.7, 0.8])
    return [simulate_task(f"t{j}", fams[j % len(fams)], q, q * 0.9, 30, 30, rng) for j in range(n)]


def test_aggregate_sums_raw_proportions_under_a_smoothing_rule():
    a = outcomes_from_counts("a", "F", [8, 5], [10, 10], [2, 4, 4], weight=3.0)  # raw P_exp .4, P_obs .4
    b = outcomes_from_counts("b", "F", [9, 2], [10, 10], [5, 4, 1], weight=1.0)  # raw P_exp .18, P_obs .1
    for rule in ("jeffreys", "haldane"):
        rows = {r.name: r for r in residual_table([a, b], zero_rule=rule, n_boot=200)}
        fam = rows["F"]
        assert fam.p_expected == pytest.approx((3 * 0.4 + 0.18) / 4)
        assert fam.p_observed == pytest.approx((3 * 0.4 + 0.1) / 4)
        assert fam.gamma == pytest.approx(math.log(1.38 / 1.3))
        if rule == "jeffreys":  # task rows keep the declared rule
            assert rows["a"].p_expected == pytest.approx((8.5 / 11) * (5.5 / 11))
    smoothed = {r.name: r for r in compare.residual_table([a, b], n_boot=200, aggregate="smoothed")}
    ta, tb = smoothed["a"], smoothed["b"]
    assert smoothed["F"].p_expected == pytest.approx((3 * ta.p_expected + tb.p_expected) / 4)


def test_aggregate_whose_raw_observed_sum_is_zero_is_a_bound_not_a_smoothed_value():
    a = outcomes_from_counts("a", "F", [8, 5], [10, 10], [4, 6, 0])
    b = outcomes_from_counts("b", "F", [9, 2], [10, 10], [5, 5, 0])
    fam = [r for r in residual_table([a, b], n_boot=200) if r.scope == "family"][0]
    assert fam.gamma is None and fam.bound == "lower" and "one-sided" in fam.flags
    assert fam.trial_ci_low == fam.bound_value and fam.trial_ci_high == math.inf
    assert fam.ci_low is None and fam.ci_method == "none"  # a bound for these tasks says nothing of a population


def test_rescaled_resample_gives_the_unbiased_variance_of_a_sum():
    # P_obs = 1 everywhere, so exp(Γ*) · n is the rescaled resampled sum of P_exp.
    rng = np.random.default_rng(3)
    tasks = _study(rng, n=6, fams="F")
    pk = pack(tasks)
    x = rng.uniform(0.2, 0.8, 6)
    reps = rescaled_task_resample_gammas(x, np.ones(6), pk, 40_000, np.random.SeedSequence(1), pk.weights)
    sums = np.exp(reps[:, -1]) * 6
    assert sums.mean() == pytest.approx(x.sum(), rel=0.01)
    assert sums.var() == pytest.approx(6 * x.var(ddof=1), rel=0.05)  # n · s², not n · s² · (n−1)/n


def test_hierarchical_schemes_are_labelled():
    tasks = _study(np.random.default_rng(5))
    assert residual_table(tasks, n_boot=200)[-1].ci_method == "cluster-t"
    for scheme, label in (("tasks_then_trials", "two-stage-hierarchical"), ("tasks_rescaled", "hierarchical")):
        row = compare.residual_table(tasks, n_boot=200, hierarchical=scheme)[-1]
        assert row.ci_method == f"{label}-percentile" and row.ci_low < row.gamma < row.ci_high


def test_paired_difference_uses_the_residual_table_aggregate():
    rng = np.random.default_rng(6)
    a, b = _study(rng), _study(rng)
    diff = paired_difference(a, b, n_boot=300)[-1]
    assert diff.gamma_a == pytest.approx(residual_table(a, n_boot=200)[-1].gamma)
    assert diff.gamma_b == pytest.approx(residual_table(b, n_boot=200)[-1].gamma)
    assert diff.ci_low < diff.delta < diff.ci_high and diff.ci_method == "cluster-t"


def test_exclude_rule_single_kept_task_gets_a_finite_trial_level_interval():
    keep = outcomes_from_counts("a", "F", [6, 5], [12, 12], [4, 4, 4])
    drop = outcomes_from_counts("b", "F", [0, 5], [12, 12], [6, 6, 0])  # k = 0: undefined, excluded
    fam = [r for r in residual_table([keep, drop], zero_rule="exclude", n_boot=300) if r.scope == "family"][0]
    assert fam.n_tasks == 1 and fam.n_excluded == 1
    assert math.isfinite(fam.trial_ci_low) and math.isfinite(fam.trial_ci_high)
    assert fam.ci_low is None and fam.ci_method == "too-few-tasks"
    task = [r for r in residual_table([keep, drop], zero_rule="exclude", n_boot=300) if r.name == "a"][0]
    assert (fam.gamma, fam.trial_ci_low, fam.trial_ci_high) == (task.gamma, task.trial_ci_low, task.trial_ci_high)
