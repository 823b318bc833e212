"""Protects the bootstrap: exact resampling distributions, determinism, coverage, BCa, pairing."""

import math

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import compare, paired_difference, residual_table, simulate_task
from hrbench.stats.sampling import binomial_tables, binomial_tables_all_n


def test_table_sampler_draws_the_binomial_distribution():
    rng = np.random.default_rng(11)
    n, p, N = np.array([50, 7, 200]), np.array([0.97, 0.5, 0.999]), 200_000
    draws = binomial_tables(n, p, 201).sample(np.tile(np.arange(3), N), rng.random(3 * N)).reshape(N, 3)
    for j in range(3):
        support = np.arange(n[j] + 1)
        expected = stats.binom.pmf(support, n[j], p[j]) * N
        observed = np.bincount(draws[:, j], minlength=n[j] + 1)
        keep = expected > 20
        chi2 = np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep])
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_chain_sampler_handles_every_n_and_degenerate_p():
    rng = np.random.default_rng(2)
    tables = binomial_tables_all_n(np.array([0.0, 1.0, 0.3]), 30)
    n = rng.integers(0, 31, 30_000)
    which = rng.integers(0, 3, 30_000)
    x = tables.sample(which * 31 + n, rng.random(30_000))
    assert np.all(x[which == 0] == 0) and np.all(x[which == 1] == n[which == 1])
    sel = which == 2
    assert np.mean(x[sel] - 0.3 * n[sel]) == pytest.approx(0, abs=0.05)


def _tasks(rng, n=6, gamma_factor=0.8):
    q = np.array([0.9, 0.8, 0.9])
    return [simulate_task(f"t{j}", "AB"[j % 2], q, q * gamma_factor ** (1 / 3), 40, 40, rng) for j in range(n)]


def test_same_seed_same_table_and_different_seed_differs():
    tasks = _tasks(np.random.default_rng(0))
    a = compare.residual_table(tasks, n_boot=300, seed=5, fixed_interval="bootstrap")
    b = compare.residual_table(tasks, n_boot=300, seed=5, fixed_interval="bootstrap")
    c = compare.residual_table(tasks, n_boot=300, seed=6, fixed_interval="bootstrap")
    assert [r.model_dump() for r in a] == [r.model_dump() for r in b]
    assert a[-1].trial_ci_low != c[-1].trial_ci_low


def test_study_table_is_closed_form_and_is_the_comparison_table_at_its_defaults():
    tasks = _tasks(np.random.default_rng(0))
    a = residual_table(tasks, n_boot=300)
    c = compare.residual_table(tasks, n_boot=50, seed=6)
    assert [r.model_dump(exclude={"n_boot"}) for r in a] == [r.model_dump(exclude={"n_boot"}) for r in c]


def test_hierarchical_interval_is_wider_than_trial_level_with_heterogeneous_tasks():
    rng = np.random.default_rng(1)
    tasks = [simulate_task(f"t{j}", "F", [0.9, 0.9], [0.9, 0.9 * f], 60, 60, rng) for j, f in enumerate(np.linspace(0.4, 1, 10))]
    row = residual_table(tasks, n_boot=1000)[-1]
    assert row.ci_high - row.ci_low > row.trial_ci_high - row.trial_ci_low


def test_trial_level_interval_covers_known_truth():
    # Small coverage simulation (200 reps): one task, truth Γ = ln(0.648 / 0.35).
    q, r = np.array([0.9, 0.8, 0.9]), np.array([0.8, 0.625, 0.7])
    truth = math.log(np.prod(q) / np.prod(r))
    rng = np.random.default_rng(123)
    hits = 0
    reps = 200
    for rep in range(reps):
        t = simulate_task("t", "F", q, r, 60, 60, rng)
        row = residual_table([t], n_boot=400, scopes=("task",))[0]
        hits += row.ci_low <= truth <= row.ci_high
    # Binomial(200, 0.95) lies in [0.90, 0.99] with probability > 0.99.
    assert 0.90 <= hits / reps <= 0.99


def test_stage_term_intervals_bracket_their_point_values():
    row = residual_table(_tasks(np.random.default_rng(4)), n_boot=500)[0]
    for term, (lo, hi) in zip(row.stage_terms, row.stage_term_ci):
        assert lo <= term <= hi


def test_bca_option_runs_and_reports_its_method():
    rows = compare.residual_table(_tasks(np.random.default_rng(5)), n_boot=500, ci_method="bca", fixed_interval="bootstrap")
    assert rows[-1].trial_ci_method == "trial-bca" and rows[-1].ci_method == "cluster-t"
    assert all(r.trial_ci_low < r.trial_ci_high for r in rows)


def test_paired_difference_of_a_study_with_itself_is_zero():
    tasks = _tasks(np.random.default_rng(6))
    for row in paired_difference(tasks, list(reversed(tasks)), n_boot=300):
        assert row.delta == pytest.approx(0.0, abs=1e-12)


def test_paired_difference_detects_an_intervention_effect():
    rng = np.random.default_rng(7)
    q = np.array([0.9, 0.85, 0.9])
    base = [simulate_task(f"t{j}", "F", q, q * 0.8, 80, 80, rng) for j in range(12)]
    fixed = [simulate_task(f"t{j}", "F", q, q, 80, 80, rng) for j in range(12)]
    row = paired_difference(base, fixed, n_boot=800)[-1]
    assert row.ci_low > 0 and row.delta == pytest.approx(3 * math.log(1 / 0.8), abs=0.35)


def test_paired_difference_requires_matching_task_names():
    tasks = _tasks(np.random.default_rng(8))
    with pytest.raises(ValueError, match="unmatched"):
        paired_difference(tasks, tasks[:-1])


def test_hierarchical_replicates_match_a_naive_two_stage_bootstrap():
    # The bank/running-sum implementation (with bank wrap-around) against a plain loop.
    from hrbench.stats.compare.bootstrap import hierarchical_gammas, trial_bank
    from hrbench.stats.packed import pack

    rng = np.random.default_rng(9)
    tasks = [simulate_task(f"t{j}", "F", [0.9, 0.7], [0.9, 0.7 * f], 30, 30, rng) for j, f in enumerate(np.linspace(0.5, 1, 8))]
    pk = pack(tasks)
    B = 4000
    bank = trial_bank(pk, B, np.random.SeedSequence(1), "jeffreys")
    fast = hierarchical_gammas([bank], pk, B, np.random.SeedSequence(2), "jeffreys", pk.weights)[0][:, -1]

    def smooth(k, n):
        return (k + 0.5) / (n + 1)

    naive = np.empty(B)
    for b in range(B):
        s_e = s_o = 0.0
        for j in rng.integers(0, len(tasks), len(tasks)):
            t = tasks[j]
            k = rng.binomial(t.checkpoint_m, t.checkpoint_k / t.checkpoint_m)
            s_e += np.prod(smooth(k, t.checkpoint_m))
            depths = rng.choice(t.natural_depths, t.m0)  # literal trial resampling
            passed = np.array([(depths >= i).sum() for i in (1, 2)])
            reached = np.array([t.m0, passed[0]])
            s_o += np.prod(smooth(passed, reached))
        naive[b] = np.log(s_e) - np.log(s_o)
    assert fast.mean() == pytest.approx(naive.mean(), abs=0.02)
    assert fast.std() == pytest.approx(naive.std(), rel=0.08)


def test_tasks_only_resampling_is_offered_and_labelled():
    rows = compare.residual_table(_tasks(np.random.default_rng(10)), n_boot=400, hierarchical="tasks_only")
    agg = rows[-1]
    assert agg.ci_method == "task-resample-percentile" and agg.ci_low < agg.gamma < agg.ci_high


def test_thread_count_never_changes_results():
    from hrbench.stats.compare.bootstrap import trial_bank
    from hrbench.stats.packed import pack

    pk = pack(_tasks(np.random.default_rng(12), n=40))
    one = trial_bank(pk, 20_000, np.random.SeedSequence(3), "jeffreys", workers=1, raw=True)
    two = trial_bank(pk, 20_000, np.random.SeedSequence(3), "jeffreys", workers=2, raw=True)
    assert np.array_equal(one.p_exp, two.p_exp) and np.array_equal(one.p_obs_raw, two.p_obs_raw)


def test_the_production_path_offers_and_imports_no_comparison_scheme():
    # Issue 22: what a study cannot select lives in hrbench.stats.compare, for tests and benchmarks only.
    import inspect
    import re
    from pathlib import Path

    options = {"hierarchical", "aggregate", "fixed_interval", "ci_method", "seed"}
    for fn in (residual_table, paired_difference):
        assert not options & set(inspect.signature(fn).parameters), fn.__name__
    root = Path(__file__).resolve().parents[2]
    users = [str(p.relative_to(root)) for top in ("hrbench", "resources", "assets", "pipelines")
             for p in (root / top).rglob("*.py")
             if "stats/compare" not in p.as_posix()
             and re.search(r"^\s*(from hrbench\.stats\.compare|import hrbench\.stats\.compare|from hrbench\.stats import .*\bcompare\b)",
                           p.read_text(), re.M)]
    assert users == []
