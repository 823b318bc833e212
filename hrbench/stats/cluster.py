"""Intervals whose coverage does not depend on having many tasks or large counts.

Two constructions (docs/statistics.md §7):

* :func:`mover_gamma_interval` — **tasks: fixed**, one task: Γ = Σ ln q_i − ln P_obs is
  a sum of logs of independent binomial proportions (checkpoint stages, and the natural
  successes k_0 of m_0). MOVER (Zou & Donner 2008) combines the Jeffreys interval of each
  term, so a count at 0 or m keeps a non-zero width.
* :func:`cluster_t_intervals` — **tasks: sampled**, families and ``all``: the
  linearized ratio-of-means estimator with the CR2 (stratified) variance and
  Bell–McCaffrey / Satterthwaite degrees of freedom, Γ̂ ± t_ν·SE, with a floor on each
  stratum's variance at its trial-level part (the between-task spread of the tasks'
  estimates contains their trial noise, so the sample variance can be below the trial
  variance only by chance — with two tasks it can even be 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special, stats

#: Below this many degrees of freedom the tasks-sampled interval is t-based with so few df
#: that it is conservative (calibration, docs/statistics.md §11): flagged ``few-tasks``.
FEW_TASKS_DF = 4.0


def jeffreys_log_limits(k: np.ndarray, m: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """ln of the Jeffreys limits of k of m (elementwise): Beta(k+½, m−k+½) quantiles, with the
    boundary modification of Brown, Cai & DasGupta (2001): lower limit 0 (ln = −inf) at k = 0,
    upper limit 1 (ln = 0) at k = m.

    At k = m the interval is one-sided — its upper end is the edge of the parameter space,
    which no truth lies above — so the lower limit is the one-sided Jeffreys limit with the
    whole α (the α/2 quantile left α/2 unspent above 1: task rows with most counts at m
    covered 0.971–0.977, docs/statistics.md §11). k = 0 needs no such rule: a raw zero makes
    Γ a bound (§3), and a conditional nobody reached (m = 0) is its own case.
    """
    alpha = 1 - level
    k, m = np.asarray(k, np.float64), np.asarray(m, np.float64)
    a, b = k + 0.5, np.maximum(m - k, 0) + 0.5
    low = special.betaincinv(a, b, np.where((k >= m) & (m > 0), alpha, alpha / 2))
    high = np.where(k >= m, 1.0, special.betaincinv(a, b, 1 - alpha / 2))
    with np.errstate(divide="ignore"):
        return np.log(np.where(k <= 0, 0.0, low)), np.log(high)


def mover_gamma_interval(
    log_q: np.ndarray,
    q_limits: tuple[np.ndarray, np.ndarray],
    log_r: np.ndarray,
    r_limits: tuple[np.ndarray, np.ndarray],
) -> tuple[float, float]:
    """MOVER interval of Σ ln q_i − Σ ln r_i from per-term log-limits (:func:`jeffreys_log_limits`).

    With θ̂ = Σ log_q − Σ log_r (the point estimate, under the declared rule) and
    [l_i, u_i] the limits of each log-proportion,

        L = θ̂ − sqrt(Σ (θ̂_qi − l_qi)² + Σ (u_ri − θ̂_ri)²)
        U = θ̂ + sqrt(Σ (u_qi − θ̂_qi)² + Σ (θ̂_ri − l_ri)²)

    (Zou & Donner 2008, Stat. Med. 27:1693–1702; Newcombe 1998 for one difference). A
    term at k = m has u = 0 but l < θ̂, so the interval never collapses; a term at k = 0
    has l = −inf, so its side of the interval is open.
    """
    (lq_lo, lq_hi), (lr_lo, lr_hi) = q_limits, r_limits
    log_q, log_r = np.asarray(log_q, np.float64), np.asarray(log_r, np.float64)
    theta = float(log_q.sum() - log_r.sum())
    # A raw point at k = m equals u (difference 0); clip float noise below 0.
    down = np.sum(np.maximum(log_q - lq_lo, 0) ** 2) + np.sum(np.maximum(lr_hi - log_r, 0) ** 2)
    up = np.sum(np.maximum(lq_hi - log_q, 0) ** 2) + np.sum(np.maximum(log_r - lr_lo, 0) ** 2)
    return theta - math.sqrt(down), theta + math.sqrt(up)


def var_p_expected(q: np.ndarray, m: np.ndarray) -> float:
    """Delta variance of Π q̂_i: Σ_i (Π_{j≠i} q_j)² q_i(1−q_i)/m_i."""
    q, m = np.asarray(q, np.float64), np.asarray(m, np.float64)
    # Π_{j≠i} q_j as prefix × suffix products: exact even where some q_j is 0.
    before = np.concatenate([[1.0], np.cumprod(q[:-1])])
    after = np.concatenate([np.cumprod(q[::-1][:-1])[::-1], [1.0]])
    others = before * after
    return float(np.sum(others**2 * q * (1 - q) / m))


def trial_variances(k: np.ndarray, m: np.ndarray, mask: np.ndarray, k0: np.ndarray, m0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-task trial variances of the raw P̂_exp = Π k_i/m_i and P̂_obs = k_0/m_0.

    Evaluated at the Jeffreys means (k+½)/(m+1), so a task whose counts sit at 0 or m
    still has its (small, non-zero) trial variance. (T, S) arrays with a padding mask.
    """
    q = np.where(mask, (k + 0.5) / (m + 1.0), 1.0)
    mm = np.where(mask, m, 1).astype(np.float64)
    prod = q.prod(axis=1, keepdims=True)
    others = prod / q
    var_e = np.sum(np.where(mask, others**2 * q * (1 - q) / mm, 0.0), axis=1)
    o = (k0 + 0.5) / (m0 + 1.0)
    return var_e, o * (1 - o) / m0


@lru_cache(maxsize=256)
def _floor_share(n: int) -> float:
    """Share of the trial variance a family's sample variance is floored at.

    Fewer than 5 tasks (flagged ``few-tasks``, however many df the row has): the whole trial variance — with
    2 tasks the sample variance is 0 by chance often enough to give zero-width intervals,
    and the row is declared conservative anyway. From 5 tasks on, the floor is the
    2.5 % quantile of χ²_{n−1}/(n−1) times the trial variance: the smallest sample
    variance consistent with the known trial part, so it binds only in the far lower
    tail (e.g. every task passes every trial) and leaves the t interval's calibration
    alone (a full floor over-covered: 0.97–0.99 with 5–10 tasks, docs/statistics.md §11).
    """
    return 1.0 if n < 5 else float(stats.chi2.ppf(0.025, n - 1)) / (n - 1)


@dataclass(frozen=True)
class ClusterT:
    """Tasks-sampled interval per group; NaN limits where no between-task information exists."""

    low: np.ndarray  # (G,)
    high: np.ndarray  # (G,)
    se: np.ndarray  # (G,)
    df: np.ndarray  # (G,) Satterthwaite df (NaN: no interval)
    n_multi: np.ndarray  # (G,) strata with ≥ 2 tasks in the group
    n_small: np.ndarray  # (G,) of them, strata of 2–4 tasks (whole-trial-variance floor: conservative)


def linearized_terms(
    p_exp: np.ndarray, p_obs: np.ndarray, var_exp: np.ndarray, var_obs: np.ndarray, w: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray] | None:
    """Γ̂ of one group and its per-task linearized terms x_t and trial variances τ_t.

    Γ̂ = ln Ē − ln Ō with Ē = Σ w_t P̂e_t / W (Ō likewise); Γ̂ − Γ ≈ Σ_t x_t with
    x_t = (w_t/W)(P̂e_t/Ē − P̂o_t/Ō), and τ_t = (w_t/W)² (Var P̂e_t/Ē² + Var P̂o_t/Ō²) is the
    trial-level variance of x_t. None where a sum is 0 (Γ̂ undefined).
    """
    W = w.sum()
    if not W > 0:
        return None
    E, O = float(np.dot(w, p_exp) / W), float(np.dot(w, p_obs) / W)
    if not (E > 0 and O > 0):
        return None
    x = (w / W) * (p_exp / E - p_obs / O)
    tau = (w / W) ** 2 * (var_exp / E**2 + var_obs / O**2)
    return math.log(E) - math.log(O), x, tau


def cluster_t_from_terms(
    theta: float, x: np.ndarray, tau: np.ndarray, live: np.ndarray, stratum: np.ndarray, level: float
) -> tuple[float, float, float, float, int]:
    """θ̂ ± t_ν·SE from linearized terms (see :func:`cluster_t_intervals`): (low, high, se, ν, n_multi,
    n_small), n_small counting the strata of 2–4 tasks, whose whole-trial-variance floor makes the
    interval conservative (:func:`_floor_share`) whatever ν is.

    NaN limits (and n_multi = 0) where no stratum of ``live`` tasks has ≥ 2 tasks.
    """
    v_tot, denom, n_multi, n_small = 0.0, 0.0, 0, 0
    for f in np.unique(stratum[live]):
        s = live & (stratum == f)
        n = int(s.sum())
        floor = float(tau[s].sum())
        if n == 1:
            v_tot += floor
            continue
        v = max(n / (n - 1) * float(np.sum((x[s] - x[s].mean()) ** 2)), floor * _floor_share(n))
        v_tot += v
        denom += v * v / (n - 1)
        n_multi += 1
        n_small += int(n < 5)
    if n_multi == 0:
        return math.nan, math.nan, math.nan, math.nan, 0, 0
    nu = v_tot**2 / denom
    half = float(special.stdtrit(nu, 0.5 + level / 2)) * math.sqrt(v_tot)  # t quantile (scipy.stats' costs 10×)
    return theta - half, theta + half, math.sqrt(v_tot), nu, n_multi, n_small


def cluster_t_intervals(
    p_exp: np.ndarray,
    p_obs: np.ndarray,
    var_exp: np.ndarray,
    var_obs: np.ndarray,
    wmat: np.ndarray,
    stratum: np.ndarray,
    level: float,
) -> ClusterT:
    """Γ̂_g ± t_ν·SE for every group g = column of ``wmat`` (weights × membership).

    Linearization (:func:`linearized_terms`): Γ̂ − Γ ≈ Σ_t x_t. Within stratum
    f (family; the family mix is a design choice) the n_f tasks are a sample, so the
    stratum total has the with-replacement variance v_f = n_f/(n_f−1) Σ (x_t − x̄_f)² —
    for a stratified mean this *is* the CR2 estimator (Bell & McCaffrey 2002), and its
    Bell–McCaffrey df is the Satterthwaite ν = (Σ v_f)² / Σ v_f²/(n_f−1), which is
    n_f − 1 for one family. v_f is floored at (a share, :func:`_floor_share`, of) the
    stratum's trial-level variance Σ τ_t, the known lower bound of its expectation. A
    single-task stratum stands for itself: it adds its trial variance and no df. A group
    with no stratum of ≥ 2 tasks gets no interval (NaN).
    """
    T, G = wmat.shape
    low, high, se, df = (np.full(G, np.nan) for _ in range(4))
    n_multi, n_small = np.zeros(G, np.int64), np.zeros(G, np.int64)
    for g in range(G):
        w = wmat[:, g]
        terms = linearized_terms(p_exp, p_obs, var_exp, var_obs, w)
        if terms is None:
            continue
        low[g], high[g], se[g], df[g], n_multi[g], n_small[g] = cluster_t_from_terms(*terms, w > 0, stratum, level)
    return ClusterT(low=low, high=high, se=se, df=df, n_multi=n_multi, n_small=n_small)

#: Families are resampled as a level of the hierarchy (METR's family → task → run) from this many
#: families on. The family-level interval is a t interval on F − 1 df whose variance is the spread of F
#: family totals: below 10 families its df are < 9, the variance estimate's coefficient of variation
#: sqrt(2/(F − 1)) exceeds 0.5 and t_{F−1} inflates the width by > 15 % over the normal quantile at 95 %
#: (by > 50 % at 99.5 %), so the row keeps the fixed-family interval and says so (flag ``few-families``).
FAMILY_LEVEL_MIN = 10


def families_sampled_interval(
    p_exp: np.ndarray, p_obs: np.ndarray, var_exp: np.ndarray, var_obs: np.ndarray, w: np.ndarray,
    family: np.ndarray, level: float,
) -> tuple[float, float, float] | None:
    """Γ̂ ± t_{F−1}·SE with families as the sampled units (tasks nested in them, trials in tasks): the
    ultimate-cluster variance F/(F−1) Σ_f (X_f − X̄)² of the family totals X_f = Σ_{t∈f} x_t of the
    linearized terms (:func:`linearized_terms`), which contains the task- and trial-level variance of
    each total; floored, as the stratified interval is, at a share of the trial variance.
    Returns (low, high, df), or None with fewer than 2 families or no estimate."""
    terms = linearized_terms(p_exp, p_obs, var_exp, var_obs, w)
    live = w > 0
    fams = np.unique(family[live])
    if terms is None or fams.size < 2:
        return None
    theta, x, tau = terms
    F = fams.size
    totals = np.array([x[live & (family == f)].sum() for f in fams])
    v = max(F / (F - 1) * float(np.sum((totals - totals.mean()) ** 2)), float(tau[live].sum()) * _floor_share(F))
    half = float(stats.t.ppf(0.5 + level / 2, F - 1)) * math.sqrt(v)
    return theta - half, theta + half, float(F - 1)


def effective_jeffreys_log_limits(
    point: np.ndarray, centre: np.ndarray, var: np.ndarray, level: float, n_cap: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """ln of Jeffreys limits of a weighted mean of proportions, by its effective count (elementwise).

    A weighted mean p̄ of independent proportion estimates with variance V is read as a
    binomial proportion of n* = p̃(1−p̃)/V trials (the effective sample size; p̃ and V at the
    Jeffreys means, so n* is finite when every count is at 0 or m) and k* = p̄·n* successes,
    and gets the Jeffreys interval of k* of n*: Beta(k*+½, n*−k*+½) quantiles, lower limit 0
    at p̄ = 0, upper 1 (and the lower one-sided) at p̄ = 1 (Korn & Graubard 1998, Survey Methodology 24:193–201, with
    Clopper–Pearson; Dean & Pagano 2015, J. Survey Stat. Methodol. 3:484–503, with Jeffreys).
    For one proportion this *is* its Jeffreys interval. ``n_cap`` caps n* (Korn & Graubard's
    truncation of the design effect at 1): a sum of binomials with unequal p has a smaller
    variance than the pooled binomial, but that saving is estimated and unstable with few
    successes, so the observed side is never credited with more than its trials.
    """
    point, centre, var = (np.asarray(x, np.float64) for x in (point, centre, var))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = centre * (1 - centre) / var
    if n_cap is not None:
        n = np.minimum(n, n_cap)
    k = np.clip(point, 0, 1) * n
    alpha = 1 - level
    a, b = k + 0.5, np.maximum(n - k, 0) + 0.5
    # At p̄ = 1 the interval is one-sided and takes the whole α, as in jeffreys_log_limits.
    low = np.where(point <= 0, 0.0, special.betaincinv(a, b, np.where(point >= 1, alpha, alpha / 2)))
    high = np.where(point >= 1, 1.0, special.betaincinv(a, b, 1 - alpha / 2))
    with np.errstate(divide="ignore"):
        return np.log(low), np.log(high)


def mover_aggregate_intervals(
    p_exp: np.ndarray,
    p_obs: np.ndarray,
    k: np.ndarray,
    m: np.ndarray,
    mask: np.ndarray,
    k0: np.ndarray,
    m0: np.ndarray,
    wmat: np.ndarray,
    level: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Tasks-fixed interval of Γ_g = ln Ē_g − ln Ō_g per group (column of ``wmat``): MOVER of two logs.

    Ē_g = Σ w_t P̂e_t / W and Ō_g = Σ w_t P̂o_t / W (``p_exp``/``p_obs``: the per-task P̂'s the
    row sums) are independent (checkpoint and natural trials are separate runs), so, as for a
    task row (:func:`mover_gamma_interval`), the limits of ln Ē and ln Ō combine as

        L = Γ̂ − sqrt((ln Ē − l_E)² + (u_O − ln Ō)²),   U = Γ̂ + sqrt((u_E − ln Ē)² + (ln Ō − l_O)²)

    with each side's limits from :func:`effective_jeffreys_log_limits` (the trial variances of
    :func:`trial_variances`; the observed side capped at its Kish trial count
    (Σw)² / Σ(w²/m_0), which for equal weights and rollouts is the pooled Jeffreys interval of
    Σ k_0 of Σ m_0). Replaces the percentile trial bootstrap, which read a skewed log-count
    with a handful of natural successes as if it were symmetric (0.919–0.929 for 2–5 tasks at
    low P, docs/statistics.md §11). NaN where a side's sum is 0 (the row is a bound).
    """
    var_e, var_o = trial_variances(k, m, mask, k0, m0)
    q_j = np.where(mask, (k + 0.5) / (m + 1.0), 1.0).prod(axis=1)
    o_j = (k0 + 0.5) / (m0 + 1.0)
    W = wmat.sum(axis=0)
    share2 = (wmat / np.where(W > 0, W, 1.0)) ** 2
    E, O = (p_exp @ wmat) / W, (p_obs @ wmat) / W
    le, ue = effective_jeffreys_log_limits(E, (q_j @ wmat) / W, var_e @ share2, level)
    cap = 1.0 / ((1.0 / m0) @ share2)
    lo, uo = effective_jeffreys_log_limits(O, (o_j @ wmat) / W, var_o @ share2, level, cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        ln_e, ln_o = np.log(E), np.log(O)
        theta = ln_e - ln_o
        low = theta - np.sqrt((ln_e - le) ** 2 + (uo - ln_o) ** 2)
        high = theta + np.sqrt((ue - ln_e) ** 2 + (ln_o - lo) ** 2)
    bad = ~((E > 0) & (O > 0))
    low[bad], high[bad] = np.nan, np.nan
    return low, high
