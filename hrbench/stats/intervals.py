"""Binomial intervals, one-sided bounds and the pre-declared zero rules.

Everything here works on counts ``k`` successes out of ``m`` trials. The scalar
functions are the documented reference; :func:`smoothed_log_table` is the
vectorized form the bootstrap uses so that resampled counts go through exactly
the same rule as the point estimate.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from hrbench.stats.data import ZERO_RULES, ZeroRule


def _check_counts(k: int, m: int) -> None:
    if m < 0 or k < 0 or k > m:
        raise ValueError(f"need 0 <= k <= m, got k={k}, m={m}")


@lru_cache(maxsize=32)
def two_sided_z(level: float) -> float:
    """z with P(|Z| <= z) = level (cached: estimators call it once per stage)."""
    return float(stats.norm.ppf(0.5 + level / 2))


def wilson_interval(k: int, m: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for ``k`` of ``m``.

    ``m == 0`` carries no information and returns ``(0.0, 1.0)``.
    """
    _check_counts(k, m)
    if m == 0:
        return 0.0, 1.0
    z = two_sided_z(level)
    p = k / m
    denom = 1 + z * z / m
    centre = (p + z * z / (2 * m)) / denom
    half = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / denom
    # Clamp only float noise: at k=0 / k=m the Wilson bound is exactly 0 / 1.
    return max(0.0, centre - half), min(1.0, centre + half)


def jeffreys_interval(k: int, m: int, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed Jeffreys interval: Beta(k+½, m−k+½) quantiles.

    Uses the standard boundary modification (Brown, Cai & DasGupta 2001): the
    lower limit is 0 when ``k == 0`` and the upper limit is 1 when ``k == m``.
    """
    _check_counts(k, m)
    if m == 0:
        return 0.0, 1.0
    alpha = 1 - level
    dist = stats.beta(k + 0.5, m - k + 0.5)
    low = 0.0 if k == 0 else float(dist.ppf(alpha / 2))
    high = 1.0 if k == m else float(dist.ppf(1 - alpha / 2))
    return low, high


def upper_bound_exact(k: int, m: int, alpha: float) -> float:
    """One-sided exact (Clopper–Pearson) upper confidence limit at level ``1 − alpha``."""
    _check_counts(k, m)
    if k == m or m == 0:
        return 1.0
    return float(stats.beta.ppf(1 - alpha, k + 1, m - k))


def lower_bound_exact(k: int, m: int, alpha: float) -> float:
    """One-sided exact (Clopper–Pearson) lower confidence limit at level ``1 − alpha``."""
    _check_counts(k, m)
    if k == 0 or m == 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, m - k + 1))


def smoothed_proportion(k: int, m: int, zero_rule: ZeroRule) -> float:
    """The proportion an estimator uses for ``k`` of ``m`` under ``zero_rule``.

    * ``jeffreys``: posterior mean ``(k+½)/(m+1)`` always (``m == 0`` gives ½).
    * ``haldane``: ``k/m``, but ``(k+½)/(m+1)`` where ``k == 0`` or ``k == m``.
    * ``bound`` / ``exclude``: raw ``k/m`` (may be 0; ``m == 0`` gives NaN: undefined).
    """
    _check_counts(k, m)
    return float(smoothed_array(np.array([k]), np.array([m]), zero_rule)[0])


def smoothed_array(k: np.ndarray, m: np.ndarray, zero_rule: ZeroRule) -> np.ndarray:
    """Vectorized :func:`smoothed_proportion` (same rule, elementwise)."""
    if zero_rule not in ZERO_RULES:
        raise ValueError(f"unknown zero_rule {zero_rule!r}; choose one of {ZERO_RULES}")
    k = np.asarray(k, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    add_half = (k + 0.5) / (m + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = k / m
    if zero_rule == "jeffreys":
        return add_half
    if zero_rule == "haldane":
        return np.where((k == 0) | (k == m), add_half, raw)
    return raw


def smoothed_log_table(max_n: int, zero_rule: ZeroRule) -> np.ndarray:
    """``table[n, k] = ln smoothed(k, n)`` for ``0 <= k <= n <= max_n``.

    The bootstrap gathers from this table instead of recomputing logs, so every
    replicate uses the identical rule. Under the raw rules ``ln 0 = −inf``, and
    ``n == 0`` (a stage nobody reached) maps to 0: it can only follow a stage
    with zero passes, whose ``−inf`` already fixes the product at 0.
    """
    n = np.arange(max_n + 1)[:, None]
    k = np.arange(max_n + 1)[None, :]
    k_b, n_b = np.broadcast_arrays(np.minimum(k, n), n)
    with np.errstate(divide="ignore"):
        table = np.log(smoothed_array(k_b, n_b, zero_rule))
    if zero_rule in ("bound", "exclude"):
        table[0, :] = 0.0
    return table
