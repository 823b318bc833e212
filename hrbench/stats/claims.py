"""Confirmatory claims: the intervals a study stands behind, the error rate across them, and verdicts.

A study run prints hundreds of intervals; a reader who scans them for one that excludes 0 will find
one by chance (issue 25: 26 % of demo runs for the agent without degradation). So the study declares
before the data which intervals are its claims (`Study.claims`), and the error rate controlled
across them; every other interval is exploratory (docs/statistics.md §13).

* **Family-wise (``holm``).** Each claim's p-value is read off its own interval by inversion (the
  largest α at which the interval still contains 0), Holm's step-down adjusts them, and a claim is
  ``different`` when its adjusted p ≤ α. The adjusted interval printed beside it is the same
  estimator at level 1 − α/k (k claims): the simultaneous Bonferroni band, which Holm's first step
  uses and every later step only relaxes, so it holds all k truths at once with probability ≥ 1 − α.
* **False discovery rate (``by``).** Benjamini–Yekutieli (2001) adjusted p-values, valid under any
  dependence between the claims (they share tasks and trials); the adjusted interval is the same
  Bonferroni band (conservative for the FDR; the FCR-adjusted interval of Benjamini & Yekutieli 2005
  would need the number selected before the data are in).
* **Equivalence (TOST against a pre-registered margin δ, nats).** ``equivalent`` when the adjusted
  interval lies inside (−δ, δ): both one-sided tests H0: Γ ≤ −δ and H0: Γ ≥ δ reject at α/(2k) each,
  stricter than TOST at the adjusted α. Without a margin nothing is ever ``equivalent``: an
  interval that merely contains 0 is ``inconclusive``.
"""

from __future__ import annotations

import math
from typing import Callable, Literal

import numpy as np
from scipy import special

ErrorRate = Literal["holm", "by"]
Verdict = Literal["equivalent", "different", "inconclusive"]

#: Range and steps of the bisection on log α that inverts an interval into its p-value: 2^-28 of
#: 10 decades is far below any reported precision.
_P_FLOOR, _P_STEPS = 1e-10, 28


def claim_level(alpha: float, n_claims: int) -> float:
    """Level of each claim's adjusted interval: 1 − α/k, the simultaneous (Bonferroni) band over k claims."""
    if n_claims < 1:
        raise ValueError("a study claims at least one interval")
    return 1 - alpha / n_claims


def inversion_p_value(interval_at: Callable[[float], tuple[float | None, float | None]]) -> float | None:
    """Two-sided p-value of H0: θ = 0 from an interval estimator: the smallest α whose level-(1 − α)
    interval excludes 0 (test inversion; exact for any interval family nested in its level).

    ``interval_at(level)`` returns the (low, high) interval at that level; None when the interval is
    undefined (no estimate). Bisection on log α between 1e-10 and 0.999.
    """

    def excludes(alpha: float) -> bool | None:
        low, high = interval_at(1 - alpha)
        if low is None or high is None or math.isnan(low) or math.isnan(high):
            return None
        return low > 0 or high < 0

    top = excludes(0.999)
    if top is None:
        return None
    if not top:
        return 1.0
    if excludes(_P_FLOOR):
        return _P_FLOOR
    lo, hi = math.log(_P_FLOOR), math.log(0.999)  # excludes(e^lo) is False, excludes(e^hi) True
    for _ in range(_P_STEPS):
        mid = (lo + hi) / 2
        if excludes(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


def t_interval_rescaled(theta: float, low: float, high: float, df: float, level: float,
                        new_level: float) -> tuple[float, float, float]:
    """For a t interval θ̂ ± t_ν·SE at ``level`` (the cluster-t of tasks-sampled rows): its p-value for
    θ = 0 and its limits at ``new_level``, in closed form — the same as recomputing the estimator
    (its SE and ν do not depend on the level) and inverting it, without either."""
    # scipy.special's t quantile and tail: the same numbers as scipy.stats.t without its per-call checks
    se = (high - low) / (2 * float(special.stdtrit(df, 0.5 + level / 2)))
    p = float(2 * special.stdtr(df, -abs(theta) / se)) if se > 0 else (0.0 if theta != 0 else 1.0)
    half = float(special.stdtrit(df, 0.5 + new_level / 2)) * se
    return p, theta - half, theta + half


def holm_adjust(p: np.ndarray) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values: max over j ≤ rank of (k − j + 1)·p_(j), capped at 1."""
    p = np.asarray(p, np.float64)
    k = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((k - np.arange(k)) * p[order])
    out = np.empty(k)
    out[order] = np.minimum(stepped, 1.0)
    return out


def by_adjust(p: np.ndarray) -> np.ndarray:
    """Benjamini–Yekutieli (2001) adjusted p-values (FDR under arbitrary dependence):
    min over j ≥ rank of k·c_k·p_(j)/j, with c_k = Σ_{i≤k} 1/i, capped at 1."""
    p = np.asarray(p, np.float64)
    k = p.size
    if k == 0:
        return p
    c = float(np.sum(1.0 / np.arange(1, k + 1)))
    order = np.argsort(p, kind="stable")
    raw = k * c * p[order] / np.arange(1, k + 1)
    stepped = np.minimum.accumulate(raw[::-1])[::-1]
    out = np.empty(k)
    out[order] = np.minimum(stepped, 1.0)
    return out


def adjust(p: np.ndarray, rule: ErrorRate) -> np.ndarray:
    """Adjusted p-values of the declared error-rate control."""
    if rule == "holm":
        return holm_adjust(p)
    if rule == "by":
        return by_adjust(p)
    raise ValueError(f"unknown error rate {rule!r}; choose 'holm' or 'by'")


def verdict(low: float | None, high: float | None, rejected: bool, margin: float | None) -> Verdict:
    """``different`` when the claim's test rejects 0; ``equivalent`` when a margin is declared and the
    interval lies strictly inside (−margin, margin); ``inconclusive`` otherwise (module docstring)."""
    if rejected:
        return "different"
    if margin is not None and low is not None and high is not None and -margin < low and high < margin:
        return "equivalent"
    return "inconclusive"
