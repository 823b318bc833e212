"""Protects the confirmatory claims: adjusted p-values against closed forms, the inversion p-value, TOST verdicts,
and contrasts that use the covariance of shared checkpoint trials."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import paired_difference, simulate_task
from hrbench.stats.claims import by_adjust, claim_level, holm_adjust, inversion_p_value, verdict
from hrbench.stats.cluster import jeffreys_log_limits


def test_holm_adjusted_p_values_match_the_step_down_by_hand():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    assert holm_adjust(np.array([0.01, 0.04, 0.03, 0.005])) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust(np.array([0.5, 0.9])) == pytest.approx([1.0, 1.0])  # capped at 1


def test_by_adjusted_p_values_match_the_step_up_by_hand():
    p = np.array([0.001, 0.02, 0.04])
    c = 1 + 1 / 2 + 1 / 3
    raw = [3 * c * 0.001 / 1, 3 * c * 0.02 / 2, 3 * c * 0.04 / 3]  # then running min from the top
    assert by_adjust(p) == pytest.approx([raw[0], min(raw[1], raw[2]), raw[2]])


def test_the_inversion_p_value_of_a_normal_interval_is_the_z_test():
    theta, se = 0.7, 0.3

    def normal(level: float) -> tuple[float, float]:
        z = stats.norm.ppf(0.5 + level / 2)
        return theta - z * se, theta + z * se

    assert inversion_p_value(normal) == pytest.approx(2 * stats.norm.sf(theta / se), rel=1e-6)
    assert inversion_p_value(lambda level: (None, None)) is None
    assert inversion_p_value(lambda level: (-1.0, 1.0)) == 1.0  # contains 0 at every level


def test_the_claim_level_is_the_simultaneous_band():
    assert claim_level(0.05, 20) == pytest.approx(0.9975)


@pytest.mark.parametrize("low, high, rejected, margin, expected", [
    (-0.1, 0.1, False, None, "inconclusive"),  # no margin: never equivalent
    (-0.1, 0.1, False, 0.2, "equivalent"),
    (-0.1, 0.25, False, 0.2, "inconclusive"),  # reaches past the margin
    (0.1, 0.3, True, 0.5, "different"),
    (None, None, False, 0.5, "inconclusive"),
])
def test_verdicts(low, high, rejected, margin, expected):
    assert verdict(low, high, rejected, margin) == expected


# -- contrasts with shared checkpoint trials ---------------------------------------------------------


def _shared_pair(rng: np.random.Generator, n: int = 10, m: int = 20, ratio: float = 0.8):
    q = np.array([0.9, 0.85, 0.9, 0.95])
    base = [simulate_task(f"t{j}", "AB"[j % 2], q, q, m, m, rng) for j in range(n)]
    other = [simulate_task(f"t{j}", "AB"[j % 2], q, q * ratio ** (1 / 4), m, m, rng) for j in range(n)]
    shared = [dataclasses.replace(b, checkpoint_passes=a.checkpoint_passes) for a, b in zip(base, other)]
    return base, shared


def test_a_shared_trial_contrast_is_the_difference_of_the_observed_logs_with_their_mover_interval():
    base, other = _shared_pair(np.random.default_rng(4))
    rows = paired_difference(base, other, level=0.95, shared_checkpoint=True)
    a, b = base[0], other[0]
    task = rows[0]
    k0 = np.array([b.passed[-1], a.passed[-1]])
    m0 = np.array([b.m0, a.m0])
    low, high = jeffreys_log_limits(k0, m0, 0.95)
    ob, oa = np.log(k0 / m0)
    expect_lo = (ob - oa) - math.hypot(ob - low[0], high[1] - oa)
    expect_hi = (ob - oa) + math.hypot(high[0] - ob, oa - low[1])
    assert task.ci_low == pytest.approx(min(expect_lo, task.delta))
    assert task.ci_high == pytest.approx(max(expect_hi, task.delta))
    overall = rows[-1]
    po = lambda ts: np.mean([t.passed[-1] / t.m0 for t in ts])  # noqa: E731 — raw P̂_obs of the `all` row
    assert overall.delta == pytest.approx(math.log(po(other)) - math.log(po(base)))


def test_shared_trials_give_narrower_contrast_intervals_than_independent_sides():
    """Tasks fixed: the checkpoint variance no longer enters twice, strictly narrower. Tasks sampled: the
    paired between-task terms already cancel the shared part, so only the trial-variance floor shrinks
    (never wider)."""
    base, other = _shared_pair(np.random.default_rng(5))
    shared = paired_difference(base, other, shared_checkpoint=True)
    independent = paired_difference(base, other)
    compared = 0
    for s, i in zip(shared, independent):
        if s.delta is None or i.delta is None:
            continue
        assert s.delta == pytest.approx(i.delta)
        assert s.trial_ci_high - s.trial_ci_low < i.trial_ci_high - i.trial_ci_low
        if s.scope != "task" and s.ci_low is not None:
            assert s.ci_high - s.ci_low <= i.ci_high - i.ci_low + 1e-12
        compared += 1
    assert compared >= 10


def test_shared_checkpoint_refuses_sides_whose_checkpoint_trials_differ():
    rng = np.random.default_rng(6)
    base, other = _shared_pair(rng)
    other[3] = simulate_task("t3", "B", np.array([0.9, 0.85, 0.9, 0.95]), np.array([0.9] * 4), 20, 20, rng)
    with pytest.raises(ValueError, match="checkpoint trials differ"):
        paired_difference(base, other, shared_checkpoint=True)
