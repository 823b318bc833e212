"""Protects the Conover–Iman rank partial correlation on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hrbench.stats.rank import rank_partial_correlation


def test_hand_computed_partial_correlation_on_ranks():
    # ranks equal values; r_xy = 0.8, r_xz = 0.8, r_yz = 0.4
    # r_xy.z = (0.8 - 0.32) / sqrt(0.36 * 0.84) = 0.872872
    pc = rank_partial_correlation([1, 2, 3, 4], [1, 3, 2, 4], [1, 2, 4, 3])
    assert pc.r == pytest.approx(0.48 / math.sqrt(0.36 * 0.84))
    assert (pc.n, pc.n_controls) == (4, 1)
    assert (pc.ci_low, pc.ci_high) == (-1.0, 1.0)  # n - 3 - k = 0: no Fisher interval


def test_values_enter_only_through_their_ranks():
    a = rank_partial_correlation([1, 2, 3, 4], [1, 3, 2, 4], [1, 2, 4, 3])
    b = rank_partial_correlation([10, 200, 3000, 4e4], [0.1, 0.3, 0.2, 9], [-5, 0, 100, 7])
    assert a.r == pytest.approx(b.r)


def _one_control(rxy: float, rxz: float, ryz: float) -> float:
    return (rxy - rxz * ryz) / math.sqrt((1 - rxz**2) * (1 - ryz**2))


def test_two_controls_with_ties_match_the_recursive_formula():
    from scipy import stats

    rng = np.random.default_rng(3)
    n = 40
    w = rng.integers(0, 6, n)  # ties, ranked by their average rank
    d = w + rng.integers(0, 3, n)
    y = -d + rng.normal(0, 1, n)
    c = rng.normal(size=n)
    pc = rank_partial_correlation(y, d, [w, c])
    x1, x2, z1, z2 = (stats.rankdata(v) for v in (y, d, w, c))
    r = np.corrcoef([x1, x2, z1, z2])
    # r_12.34 = (r_12.3 - r_14.3 r_24.3) / sqrt((1 - r_14.3^2)(1 - r_24.3^2))
    r12_3 = _one_control(r[0, 1], r[0, 2], r[1, 2])
    r14_3 = _one_control(r[0, 3], r[0, 2], r[3, 2])
    r24_3 = _one_control(r[1, 3], r[1, 2], r[3, 2])
    assert pc.r == pytest.approx(_one_control(r12_3, r14_3, r24_3))
    assert pc.n_controls == 2 and pc.r < 0 and pc.ci_low < pc.r < pc.ci_high and pc.p_value < 0.05


def test_fisher_interval_and_p_value():
    rng = np.random.default_rng(0)
    z = rng.normal(size=50)
    x = z + rng.normal(size=50)
    y = z + rng.normal(size=50)  # related only through z
    pc = rank_partial_correlation(x, y, z)
    half = 1.959964 / math.sqrt(50 - 4)
    assert pc.ci_low == pytest.approx(math.tanh(math.atanh(pc.r) - half), abs=1e-6)
    assert pc.ci_high == pytest.approx(math.tanh(math.atanh(pc.r) + half), abs=1e-6)
    assert pc.p_value > 0.05  # controlling for z removes the shared part


def test_undefined_cases_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="same length"):
        rank_partial_correlation([1, 2, 3], [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 4 observations"):
        rank_partial_correlation([1, 2, 3], [1, 2, 3], [1, 2, 3])
    with pytest.raises(ValueError, match="fully explained"):
        rank_partial_correlation([1, 2, 3, 4], [4, 1, 2, 3], [1, 2, 3, 4])
