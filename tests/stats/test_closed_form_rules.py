"""The rules added after session 3's calibration (docs/statistics.md §7.1, §7.3, §8):

* a Jeffreys limit at k = m is one-sided and spends the whole α;
* the tasks-fixed interval of a family/all row is MOVER of effective-count Jeffreys limits
  of ln Ē and ln Ō (closed form; for one binomial it is that binomial's Jeffreys interval);
* paired_difference: MOVER (tasks fixed) and paired cluster-t with the few-tasks flags.

Each pinned value is recomputed here from its formula, so a change of rule fails a test."""

import math

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import outcomes_from_counts as counts
from hrbench.stats import compare, paired_difference, residual_table, simulate_task
from hrbench.stats.cluster import effective_jeffreys_log_limits, jeffreys_log_limits, mover_aggregate_intervals


def test_jeffreys_limit_at_k_equals_m_is_one_sided_with_the_whole_alpha():
    low, high = jeffreys_log_limits(np.array([20, 12]), np.array([20, 20]), 0.95)
    assert high[0] == 0.0
    # One-sided: the 5 % quantile of Beta(20.5, 0.5), not the 2.5 % one (session 3's rule).
    assert low[0] == pytest.approx(math.log(stats.beta.ppf(0.05, 20.5, 0.5)), rel=1e-12)
    # Interior counts keep the equal-tailed limits.
    assert low[1] == pytest.approx(math.log(stats.beta.ppf(0.025, 12.5, 8.5)), rel=1e-12)
    assert high[1] == pytest.approx(math.log(stats.beta.ppf(0.975, 12.5, 8.5)), rel=1e-12)


def test_effective_count_limits_of_one_binomial_are_its_jeffreys_limits():
    for k, m in ((3, 20), (0, 20), (20, 20), (7, 11)):
        o = (k + 0.5) / (m + 1)
        got = effective_jeffreys_log_limits(np.array([k / m]), np.array([o]), np.array([o * (1 - o) / m]), 0.95,
                                            np.array([float(m)]))
        want = jeffreys_log_limits(np.array([k]), np.array([m]), 0.95)
        assert got[0][0] == pytest.approx(want[0][0], rel=1e-9) if k else got[0][0] == -math.inf
        assert got[1][0] == pytest.approx(want[1][0], abs=1e-12)


def test_family_tasks_fixed_interval_is_mover_of_pooled_natural_counts():
    # Two tasks, one stage each, 10 rollouts each: the observed side is the Jeffreys interval of
    # 2 + 1 of 20 natural successes (equal weights and rollouts: the Kish cap is the pooled count).
    a = counts("a", "F", [6], [10], [8, 2])  # P_exp 0.6, P_obs 0.2
    b = counts("b", "F", [4], [10], [9, 1])  # P_exp 0.4, P_obs 0.1
    fam = [r for r in residual_table([a, b]) if r.scope == "family"][0]
    assert fam.trial_ci_method == "mover-effective-jeffreys"
    assert fam.gamma == pytest.approx(math.log(0.5 / 0.15))
    lo_o, hi_o = (math.log(stats.beta.ppf(p, 3.5, 17.5)) for p in (0.025, 0.975))
    # Expected side: effective count from the delta variance at the Jeffreys means.
    q = np.array([6.5 / 11, 4.5 / 11])
    var = np.sum(q * (1 - q) / 10) / 4
    n = q.mean() * (1 - q.mean()) / var
    lo_e, hi_e = (math.log(stats.beta.ppf(p, 0.5 * n + 0.5, 0.5 * n + 0.5)) for p in (0.025, 0.975))
    ln_e, ln_o = math.log(0.5), math.log(0.15)
    assert fam.trial_ci_low == pytest.approx(fam.gamma - math.hypot(ln_e - lo_e, hi_o - ln_o), rel=1e-9)
    assert fam.trial_ci_high == pytest.approx(fam.gamma + math.hypot(hi_e - ln_e, ln_o - lo_o), rel=1e-9)


def test_family_tasks_fixed_interval_covers_with_few_natural_successes():
    # Session 3's percentile trial bootstrap covered 0.919-0.929 here (2 tasks, ~2-3 natural
    # successes each: a skewed log-count read as symmetric). The fixed tasks' truth:
    q = np.array([[0.45, 0.45], [0.5, 0.4]])
    r = q**1.6
    truth = math.log(q.prod(1).sum() / r.prod(1).sum())
    rng = np.random.default_rng(11)
    hits = n = 0
    for _ in range(600):
        tasks = [simulate_task(f"t{j}", "F", q[j], r[j], 20, 20, rng) for j in range(2)]
        fam = [row for row in residual_table(tasks, scopes=("family",))][0]
        if fam.gamma is None:
            continue
        n += 1
        hits += fam.trial_ci_low <= truth <= fam.trial_ci_high
    assert n > 550 and 0.93 <= hits / n <= 0.975


def test_aggregate_interval_is_undefined_only_where_a_sum_is_zero():
    k = np.array([[5], [0]])
    m = np.array([[10], [10]])
    mask = np.ones((2, 1), bool)
    pe, po = np.array([0.5, 0.0]), np.array([0.0, 0.0])
    low, high = mover_aggregate_intervals(pe, po, k, m, mask, np.array([0, 0]), np.array([10, 10]),
                                          np.ones((2, 1)), 0.95)
    assert np.isnan(low[0]) and np.isnan(high[0])


def _pair(rng, n_tasks, families, shift):
    q = np.array([0.8, 0.7])
    base = [simulate_task(f"t{j}", families[j], q, q * 0.8, 40, 40, rng) for j in range(n_tasks)]
    other = [simulate_task(f"t{j}", families[j], q, q * 0.8 * shift, 40, 40, rng) for j in range(n_tasks)]
    return base, other


def test_paired_difference_flags_small_families_and_is_closed_form():
    rng = np.random.default_rng(2)
    base, other = _pair(rng, 5, ["A", "A", "B", "B", "C"], 1.1)
    rows = {(r.scope, r.name): r for r in paired_difference(base, other, n_boot=100)}
    two = rows[("family", "A")]
    assert two.ci_method == "cluster-t" and two.df == pytest.approx(1.0) and "few-tasks" in two.flags
    assert two.ci_estimand == "tasks: sampled" and two.trial_ci_method == "mover-effective-jeffreys"
    one = rows[("family", "C")]
    assert one.ci_method == "too-few-tasks" and one.ci_low is None and "too-few-tasks" in one.flags
    task = rows[("task", "t4")]
    assert (one.delta, one.trial_ci_low, one.trial_ci_high) == (task.delta, task.trial_ci_low, task.trial_ci_high)
    # Closed form: no replicate, so the comparison version's seed does not matter; its defaults are the study's.
    again = compare.paired_difference(base, other, n_boot=100, seed=9)
    assert [r.model_dump() for r in again] == [r.model_dump() for r in rows.values()]


def test_paired_task_interval_is_mover_of_the_two_task_rows():
    rng = np.random.default_rng(3)
    base, other = _pair(rng, 2, ["A", "A"], 1.15)
    d = paired_difference(base, other)[0]
    a, b = residual_table(base, scopes=("task",))[0], residual_table(other, scopes=("task",))[0]
    assert d.delta == pytest.approx(a.gamma - b.gamma)
    assert d.ci_low == pytest.approx(d.delta - math.hypot(a.gamma - a.ci_low, b.ci_high - b.gamma))
    assert d.ci_high == pytest.approx(d.delta + math.hypot(a.ci_high - a.gamma, b.gamma - b.ci_low))
    assert d.ci_estimand == "tasks: fixed"


def test_paired_cluster_t_uses_the_pairing():
    # The same tasks on both sides with a large common task effect (each task's own degradation f_t)
    # and a small intervention effect: the paired interval of ΔΓ is much narrower than an unpaired
    # one, whose SE would be the two sides' SEs in quadrature (equal df 9, so widths scale alike).
    rng = np.random.default_rng(4)
    q = np.array([0.9, 0.85])
    f = np.linspace(0.55, 1.0, 10)
    base = [simulate_task(f"t{j}", "F", q, q * fj, 200, 200, rng) for j, fj in enumerate(f)]
    other = [simulate_task(f"t{j}", "F", q, q * min(fj * 1.05, 1.0), 200, 200, rng) for j, fj in enumerate(f)]
    d = paired_difference(base, other)[-1]
    a, b = residual_table(base)[-1], residual_table(other)[-1]
    assert d.ci_method == "cluster-t" and d.df == pytest.approx(9.0, rel=0.05)
    assert d.ci_high - d.ci_low < 0.6 * math.hypot(a.ci_high - a.ci_low, b.ci_high - b.ci_low)


def test_task_interval_is_mover_of_raw_stage_terms_and_one_observed_binomial():
    # docs/statistics.md §7.1: Σ ln q_i with per-stage Jeffreys limits, ln P_obs as one binomial
    # (15 of 20 rollouts), every term centred on its raw proportion.
    t = counts("t", "F", [20, 12], [20, 20], [3, 2, 15])
    row = [r for r in residual_table([t]) if r.scope == "task"][0]
    l1 = math.log(stats.beta.ppf(0.05, 20.5, 0.5))  # k = m: one-sided, whole α
    l2, u2 = (math.log(stats.beta.ppf(p, 12.5, 8.5)) for p in (0.025, 0.975))
    lo_o, hi_o = (math.log(stats.beta.ppf(p, 15.5, 5.5)) for p in (0.025, 0.975))
    raw = math.log(12 / 20) - math.log(15 / 20)
    low = raw - math.sqrt(l1**2 + (math.log(0.6) - l2) ** 2 + (hi_o - math.log(0.75)) ** 2)
    high = raw + math.sqrt((u2 - math.log(0.6)) ** 2 + (math.log(0.75) - lo_o) ** 2)
    assert row.ci_method == "mover-jeffreys" and row.ci_low < row.gamma < row.ci_high
    assert row.ci_low == pytest.approx(low, rel=1e-9) and row.ci_high == pytest.approx(high, rel=1e-9)


def test_all_row_over_a_family_of_three_is_flagged_few_tasks_whatever_its_df():
    # Two 3-task families reached ν = 4 and covered 1.000 (§11): a stratum of 2–4 tasks is floored
    # at its whole trial variance, so the row is conservative and flagged, not scored as nominal.
    rng = np.random.default_rng(3)
    small = [simulate_task(f"a{j}", "A", [0.8, 0.7], [0.75, 0.6], 20, 20, rng) for j in range(3)]
    large = [simulate_task(f"b{j}", "B", [0.9, 0.6], [0.85, 0.5], 20, 20, rng) for j in range(10)]
    rows = {(r.scope, r.name): r for r in residual_table([*small, *large])}
    everything, fam_b = rows[("all", "all")], rows[("family", "B")]
    assert everything.df is not None and everything.df >= 4  # the df rule alone would not flag it
    assert "few-tasks" in everything.flags and "few-tasks" in rows[("family", "A")].flags
    assert "few-tasks" not in fam_b.flags and fam_b.df == pytest.approx(9, rel=0.5)
