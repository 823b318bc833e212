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
* **Family-wise by a max-|t| simultaneous band (``maxt``).** The claims' test statistics are read on
  the normal scale, z_j = Φ⁻¹(1 − p_j/2), and taken as jointly normal with the correlation R estimated
  from the claims' linearized per-task terms where they share tasks (and so trials: `claims_correlation`);
  the band's critical value c is the (1 − α) quantile of max_j |Z_j|, Z ~ N(0, R), by seeded simulation,
  each claim's adjusted interval is its own estimator at level 2Φ(c) − 1, and its adjusted p-value is
  P(max |Z| ≥ z_j) (single-step). Claims with no shared tasks, or no per-task terms, are taken as
  independent: by the Gaussian correlation inequality (Royen 2014) P(max |Z| ≤ c) is smallest with those
  blocks independent, so this is conservative there (the Šidák band) and exact where R is right. It is
  never wider than Bonferroni's 1 − α/k and is narrower the more the claims are correlated.
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

ErrorRate = Literal["holm", "by", "maxt"]
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


def adjust(p: np.ndarray, rule: ErrorRate, corr: np.ndarray | None = None) -> np.ndarray:
    """Adjusted p-values of the declared error-rate control (``corr``: the claims' correlation, for maxt;
    None = independent)."""
    if rule == "holm":
        return holm_adjust(p)
    if rule == "by":
        return by_adjust(p)
    if rule == "maxt":
        p = np.asarray(p, np.float64)
        return MaxT.of(np.eye(p.size) if corr is None else corr).adjust(p)
    raise ValueError(f"unknown error rate {rule!r}; choose 'holm', 'by' or 'maxt'")


#: Draws of max |Z| for the max-|t| band: the α = 0.05 tail probability to ±0.001 (MC standard error), which
#: moves the band's level by as little (its critical value by ~0.3 %).
MAXT_DRAWS = 50_000


class MaxT:
    """The distribution of max_j |Z_j| for Z ~ N(0, R): the max-|t| band's critical value and adjusted p-values
    (module docstring). Seeded: the same claims give the same band."""

    def __init__(self, maxima: np.ndarray) -> None:
        self.maxima = np.sort(maxima)

    @classmethod
    def of(cls, corr: np.ndarray, n_draws: int = MAXT_DRAWS, seed: int = 0) -> "MaxT":
        corr = np.asarray(corr, np.float64)
        # The estimated R may be slightly indefinite (covariances over each pair's common tasks): nearest
        # PSD by clipping eigenvalues, rescaled to a unit diagonal.
        vals, vecs = np.linalg.eigh((corr + corr.T) / 2)
        root = vecs * np.sqrt(np.clip(vals, 0, None))
        root /= np.sqrt(np.maximum((root**2).sum(axis=1, keepdims=True), 1e-300))
        rng = np.random.default_rng(seed)
        draws = rng.standard_normal((n_draws, corr.shape[0]), dtype=np.float32)
        return cls(np.abs(draws @ root.T.astype(np.float32)).max(axis=1).astype(np.float64))

    def critical(self, alpha: float) -> float:
        """c with P(max |Z| ≤ c) = 1 − α."""
        return float(np.quantile(self.maxima, 1 - alpha))

    def level(self, alpha: float) -> float:
        """Each claim's adjusted level: 2Φ(c) − 1 (its own interval at this level is the band)."""
        return float(special.erf(self.critical(alpha) / math.sqrt(2)))

    def adjust(self, p: np.ndarray) -> np.ndarray:
        """Single-step adjusted p-values P(max |Z| ≥ z_j), z_j = Φ⁻¹(1 − p_j/2), held between p_j and
        Bonferroni's k·p_j, the bounds that hold for any correlation (the simulation resolves only p above
        1/draws). Single-step, as the band is: Holm's step-down can reject a claim with a larger p that it
        does not."""
        p = np.asarray(p, np.float64)
        z = -special.ndtri(p / 2)
        above = self.maxima.size - np.searchsorted(self.maxima, z, side="left")
        return np.clip(above / self.maxima.size, p, np.minimum(p * p.size, 1.0))


def claims_correlation(terms: list[dict[str, tuple[str, float]] | None]) -> np.ndarray:
    """The claims' correlation from their linearized per-task terms ({task: (family, x_t)}; None: unknown).

    Tasks sampled within family, each claim's variance is Σ_f n_f/(n_f−1) Σ_{t∈f} (x_t − x̄_f)² (the
    cluster-t's); two claims over common tasks covary by the same sum of cross-products over those tasks, which
    carries both the tasks they share and the trials they share (shared checkpoint trials make the same task's
    terms move together). Claims with no common task, or without terms, are independent (conservative: see the
    module docstring)."""
    k = len(terms)
    centred: list[dict[str, tuple[float, float]] | None] = []
    for t in terms:
        if not t:
            centred.append(None)
            continue
        by_family: dict[str, list[str]] = {}
        for name, (family, _) in t.items():
            by_family.setdefault(family, []).append(name)
        out = {}
        for names in by_family.values():
            n = len(names)
            if n < 2:
                continue  # a single-task family has no between-task spread (it adds trial variance only)
            mean = sum(t[v][1] for v in names) / n
            for v in names:
                out[v] = (t[v][1] - mean, n / (n - 1))
        centred.append(out or None)
    var = [None if c is None else sum(d * d * f for d, f in c.values()) for c in centred]
    corr = np.eye(k)
    for i in range(k):
        for j in range(i + 1, k):
            a, b = centred[i], centred[j]
            if a is None or b is None or not var[i] or not var[j]:
                continue
            cov = sum(a[v][0] * b[v][0] * a[v][1] for v in a.keys() & b.keys())
            corr[i, j] = corr[j, i] = float(np.clip(cov / math.sqrt(var[i] * var[j]), -1, 1))
    return corr


def verdict(low: float | None, high: float | None, rejected: bool, margin: float | None) -> Verdict:
    """``different`` when the claim's test rejects 0; ``equivalent`` when a margin is declared and the
    interval lies strictly inside (−margin, margin); ``inconclusive`` otherwise (module docstring)."""
    if rejected:
        return "different"
    if margin is not None and low is not None and high is not None and -margin < low and high < margin:
        return "equivalent"
    return "inconclusive"
