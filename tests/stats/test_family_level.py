"""Protects families as a level of the hierarchy (issue 25): the `all` row's families-sampled interval — its
closed form, the threshold below which the row keeps the family mix fixed and says so, and (slow) its coverage
of a population of families with a family effect, where the fixed-family interval does not cover."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import residual_table, simulate_task
from hrbench.stats.cluster import FAMILY_LEVEL_MIN, families_sampled_interval, linearized_terms


def test_the_families_interval_is_a_t_interval_on_the_family_totals():
    p_exp = np.array([0.6, 0.5, 0.7, 0.4, 0.65, 0.55])
    p_obs = np.array([0.3, 0.35, 0.5, 0.2, 0.4, 0.25])
    var = np.full(6, 1e-6)  # trial variance far below the spread: the floor does not bind
    w = np.ones(6)
    family = np.array([0, 0, 1, 1, 2, 2])
    theta, x, _ = linearized_terms(p_exp, p_obs, var, var, w)
    totals = np.array([x[:2].sum(), x[2:4].sum(), x[4:].sum()])
    half = stats.t.ppf(0.975, 2) * np.sqrt(3 / 2 * np.sum((totals - totals.mean()) ** 2))
    low, high, df = families_sampled_interval(p_exp, p_obs, var, var, w, family, 0.95)
    assert (low, high, df) == pytest.approx((theta - half, theta + half, 2))


def _tasks(rng: np.random.Generator, n_families: int, per_family: int = 3, m: int = 20) -> list:
    q = np.array([0.85, 0.85, 0.85])
    out = []
    for f in range(n_families):
        shift = rng.normal(0, 0.3)
        for j in range(per_family):
            r = np.minimum(q * np.exp(-(0.5 + shift + rng.normal(0, 0.2)) / 3), 1.0)
            out.append(simulate_task(f"f{f}t{j}", f"F{f}", q, r, m, m, rng))
    return out


def test_enough_families_are_resampled_and_fewer_are_flagged():
    rng = np.random.default_rng(1)
    many = next(r for r in residual_table(_tasks(rng, FAMILY_LEVEL_MIN)) if r.scope == "all")
    assert many.families_ci_low < many.gamma < many.families_ci_high and many.families_df == FAMILY_LEVEL_MIN - 1
    assert "few-families" not in many.flags
    few = next(r for r in residual_table(_tasks(rng, FAMILY_LEVEL_MIN - 1)) if r.scope == "all")
    assert few.families_ci_low is None and "few-families" in few.flags
    assert few.ci_low is not None  # the fixed-family (tasks-sampled) interval is still the headline


@pytest.mark.slow
def test_the_families_interval_covers_the_population_of_families():
    """12 families of 3 tasks, family effect sd 0.3 and task effect sd 0.2 on Γ, m = m_0 = 20, 400 studies."""
    rng = np.random.default_rng(7)
    # Truth over the population of families and tasks (the same generative model, 400,000 tasks).
    shift = rng.normal(0, 0.3, 400_000) + rng.normal(0, 0.2, 400_000)
    r = np.minimum(0.85 * np.exp(-(0.5 + shift[:, None]) / 3), 1.0)
    truth = float(np.log(0.85**3 / np.mean(np.prod(np.repeat(r, 3, axis=1), axis=1))))
    covered = fixed_covered = 0
    reps = 400
    for _ in range(reps):
        row = next(r for r in residual_table(_tasks(rng, 12)) if r.scope == "all")
        covered += row.families_ci_low <= truth <= row.families_ci_high
        fixed_covered += row.ci_low <= truth <= row.ci_high
    print(f"families sampled {covered / reps:.3f}, families fixed {fixed_covered / reps:.3f} (truth {truth:.3f})")
    assert 0.93 <= covered / reps <= 0.97
    assert fixed_covered / reps < covered / reps  # holding the family mix fixed misses the family spread
