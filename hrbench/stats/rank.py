"""Rank partial correlation (Conover & Iman 1981), as the depth paper relates pass rate to D given W.

Each variable is replaced by its ranks (ties get their average rank), and the Pearson correlation
of the ranks of x and y is taken after removing the linear effect of the ranks of the controls Z:

    r_xy·Z = corr(e_x, e_y),   e_v = rank(v) − its least-squares fit on [1, rank(Z)]

With one control z this is (r_xy − r_xz r_yz) / √((1 − r_xz²)(1 − r_yz²)) on ranks.
Interval: Fisher's z, atanh(r) ± z_{1−α/2} / √(n − 3 − k) for k controls, mapped back with tanh
(the estimand is the population partial rank correlation); p-value from t = r √((n − 2 − k)/(1 − r²)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

from hrbench.stats.intervals import two_sided_z


class PartialCorrelation(BaseModel):
    model_config = ConfigDict(frozen=True)
    r: float
    n: int
    n_controls: int
    ci_low: float
    ci_high: float
    p_value: float


def _residuals(v: np.ndarray, design: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(design, v, rcond=None)
    return v - design @ coef


def rank_partial_correlation(x: Sequence[float], y: Sequence[float], controls: Sequence[Sequence[float]] | Sequence[float],
                             level: float = 0.95) -> PartialCorrelation:
    """Conover–Iman partial correlation of x and y on ranks, controlling for `controls` (one array or several)."""
    x_r = stats.rankdata(np.asarray(x, dtype=np.float64))
    y_r = stats.rankdata(np.asarray(y, dtype=np.float64))
    z = np.asarray(controls, dtype=np.float64)
    z = z[None, :] if z.ndim == 1 else z
    n, k = x_r.size, z.shape[0]
    if y_r.size != n or z.shape[1] != n:
        raise ValueError(f"x, y and every control need the same length; got {n}, {y_r.size}, {z.shape[1]}")
    if n < k + 3:
        raise ValueError(f"a partial correlation with {k} control(s) needs at least {k + 3} observations, got {n}")
    design = np.column_stack([np.ones(n)] + [stats.rankdata(row) for row in z])
    e_x, e_y = _residuals(x_r, design), _residuals(y_r, design)
    sx, sy = float(np.sqrt(e_x @ e_x)), float(np.sqrt(e_y @ e_y))
    if sx < 1e-12 or sy < 1e-12:
        raise ValueError("x or y is fully explained by the controls (or constant): the partial correlation "
                         "is undefined")
    r = float(np.clip((e_x @ e_y) / (sx * sy), -1.0, 1.0))
    df = n - 2 - k
    if abs(r) >= 1.0:
        low = high = r
        p = 0.0
    else:
        t = r * math.sqrt(df / (1 - r * r))
        p = float(2 * stats.t.sf(abs(t), df))
        if n - 3 - k > 0:
            half = two_sided_z(level) / math.sqrt(n - 3 - k)
            low, high = math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)
        else:
            low, high = -1.0, 1.0
    return PartialCorrelation(r=r, n=n, n_controls=k, ci_low=low, ci_high=high, p_value=p)
