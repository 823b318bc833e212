"""Vectorized, seeded bootstrap over task units, kept for comparison with the closed forms.

No study selects these: a study's residual and contrast intervals are closed-form (MOVER and
cluster-t, :mod:`hrbench.stats.residuals`, :mod:`hrbench.stats.cluster`) and draw no replicate.
Tests and benchmarks use the schemes here to check the closed forms against (docs/statistics.md §7.5).

Two resampling schemes (DESIGN §7):

* **trial-level** (tasks fixed): for each task, checkpoint counts are redrawn as
  ``k*_i ~ Bin(m_i, p̂_i)`` and the natural rollouts as the chain
  ``passed*_1 ~ Bin(m_0, p̂_1)``, ``passed*_{i+1} ~ Bin(passed*_i, p̂_{i+1})`` with
  ``p̂ = k/m`` (multinomial resampling of the rollout depths), except at a boundary
  count (0 or m), which is resampled from the Jeffreys mean (:func:`resampling_proportion`).
* **hierarchical**: tasks are redrawn with replacement within their family
  (stratified: the family mix is part of the design). The one-stage schemes
  (:func:`rescaled_task_resample_gammas`, Rao–Wu rescaled, and :func:`task_resample_gammas`)
  keep each drawn task's estimates; the two-stage scheme (:func:`hierarchical_gammas`)
  then also resamples trials within each drawn task as above, checkpoint and
  natural trials of a drawn task together.

Implementation: every task gets a *bank* of ``K`` independent trial-level
replicates (its resampled P_exp and P_obs, optionally also the raw ones). The
trial-level interval reads the bank directly. A two-stage hierarchical replicate ``b`` draws task indices for its slots
``j = 0..T−1`` and gives slot ``j`` the bank entry ``(o_b + j) mod K`` with a
random offset ``o_b``; since ``K ≥ T`` two slots of one replicate never share an
entry, so conditional on the drawn tasks their trial resamples are independent
— each replicate is an exact draw from the hierarchical bootstrap — while the
trial-level work is done once instead of twice.

Replicates whose log is undefined (raw rules only) follow the declared zero
rule: ``bound`` keeps ``±inf`` (order statistics stay valid, so an interval may
be one-sided) and drops NaN (0/0); ``exclude`` drops the task from that
replicate's aggregate, and drops non-finite replicates at task scope.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy import stats

from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.estimate import log_proportions
from hrbench.stats.intervals import smoothed_log_table
from hrbench.stats.packed import Packed
from hrbench.stats.sampling import binomial_tables, binomial_tables_all_n, guide_cells

CiMethod = Literal["percentile", "bca"]

# Elements per working array: small enough to stay in cache (the sampler is
# memory-bound), large enough to amortize Python overhead.
_BLOCK = 300_000
# Chain tables hold every n in 0..m_0, i.e. ~(m_0+1)(m_0+2+cells) entries per
# task-stage; building an entry costs about a third of what a Generator.binomial draw
# costs more than a table draw, so tables pay only with enough replicates per row.
_TABLE_ENTRY_PER_DRAW = 0.4


def _chain_tables_pay(n_max: int, K: int) -> bool:
    """Whether tabulating Bin(n, p) for every n beats ``Generator.binomial`` for K draws per row."""
    return _TABLE_ENTRY_PER_DRAW * (n_max + 1) * (n_max + 2 + guide_cells(n_max + 1)) < K


def resampling_proportion(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The proportion a count is resampled from: k/m, but (k+½)/(m+1) at k = 0 or k = m.

    Resampling a boundary count from k/m gives it zero variance (every replicate is
    0 or m again), which collapsed intervals onto a point (issue 8). The Jeffreys mean
    moves the resampling distribution *into* the parameter space, the only side the
    truth can lie on (q ≤ 1 when k = m). A stage nobody reached (m = 0) gives ½.
    """
    k, m = np.asarray(k, np.float64), np.asarray(m, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((k <= 0) | (k >= m), (k + 0.5) / (m + 1), k / m)


# --------------------------------------------------------------------------- quantiles


def column_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantiles of each column of ``x`` (replicates × columns).

    ``probs`` is ``(P,)`` or ``(C, P)`` (per-column probabilities, as BCa needs).
    NaN entries are dropped; ±inf are kept as order statistics (interpolation
    next to an infinite neighbour returns the nearer order statistic). Returns
    ``(C, P)``; a column without any valid replicate gives NaN.
    """
    B, C = x.shape
    probs = np.broadcast_to(np.atleast_2d(probs), (C, np.atleast_2d(probs).shape[-1]))
    if np.isfinite(x).all() and (probs == probs[0]).all():
        return np.quantile(x, probs[0], axis=0).T  # fast path: partition, no sort
    xs = np.sort(x, axis=0)  # NaN sorts last
    n_valid = (~np.isnan(x)).sum(axis=0)
    h = (np.maximum(n_valid, 1)[:, None] - 1) * probs
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(n_valid - 1, 0)[:, None])
    a = np.take_along_axis(xs, lo.T, axis=0).T
    b = np.take_along_axis(xs, hi.T, axis=0).T
    frac = h - lo
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(a) & np.isfinite(b), a + (b - a) * frac, np.where(frac < 0.5, a, b))
    out[n_valid == 0] = np.nan
    return out


def expanded_z(level: float, df: np.ndarray | None, n_cols: int) -> np.ndarray:
    """(C, 2) normal quantiles of the interval ends; with ``df``, Student-t quantiles instead.

    Hesterberg's (2015, arXiv:1411.5279) expanded percentile interval: the bootstrap distribution of a
    mean from n units is too narrow in small samples; reading it at
    Φ(± t_{df, 1−α/2}) instead of α/2, 1 − α/2 compensates (the √(n/(n−1)) half of
    his correction is done by the Rao–Wu rescaling). ``df ≤ 0`` or NaN: plain z.
    """
    alpha = 1 - level
    z = np.tile(stats.norm.ppf([alpha / 2, 1 - alpha / 2]), (n_cols, 1))
    if df is None:
        return z
    df = np.asarray(df, np.float64)
    ok = np.isfinite(df) & (df > 0)
    t = stats.t.ppf(1 - alpha / 2, np.where(ok, df, 1.0))
    z[ok] = np.column_stack([-t, t])[ok]
    return z


def bca_probs(
    replicates: np.ndarray, theta: np.ndarray, accel: np.ndarray, level: float, df: np.ndarray | None = None
) -> np.ndarray:
    """BCa-adjusted percentile probabilities per column (Efron 1987); ``(C, 2)``.

    Columns whose point estimate is undefined fall back to plain percentiles.
    ``df`` (per column) reads the ends at Student-t instead of normal quantiles
    (:func:`expanded_z`).
    """
    valid = ~np.isnan(replicates)
    n = np.maximum(valid.sum(axis=0), 1)
    below = ((replicates < theta) & valid).sum(axis=0) + 0.5 * ((replicates == theta) & valid).sum(axis=0)
    share = np.clip(below / n, 1 / (2 * n), 1 - 1 / (2 * n))  # keeps z0 finite
    z0 = stats.norm.ppf(share)
    zq = expanded_z(level, df, replicates.shape[1])
    adj = z0[:, None] + (z0[:, None] + zq) / (1 - accel[:, None] * (z0[:, None] + zq))
    probs = stats.norm.cdf(adj)
    plain = stats.norm.cdf(zq)
    bad = ~np.isfinite(theta) | ~np.isfinite(accel) | ~np.isfinite(probs).all(axis=1)
    probs[bad] = plain[bad]
    return probs


def jackknife_acceleration(values: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """Acceleration ``a`` from (grouped) jackknife values; ``values`` is (V, C), ``mult`` (V,)."""
    ok = np.isfinite(values)
    w = np.where(ok, mult[:, None], 0.0)
    vals = np.where(ok, values, 0.0)
    mean = (w * vals).sum(0) / np.maximum(w.sum(0), 1e-300)
    d = np.where(ok, mean - vals, 0.0)
    num = (w * d**3).sum(0)
    den = 6 * ((w * d**2).sum(0)) ** 1.5
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, 0.0)


# --------------------------------------------------------------------------- trial-level bank


@dataclass(frozen=True, eq=False)
class TrialBank:
    """``K`` trial-level replicates of every task's P_exp and P_obs.

    Task-major layout (T, K): each worker writes contiguous rows, and the
    hierarchical pass reads each task's entries in order.
    """

    p_exp: np.ndarray  # (T, K)
    p_obs: np.ndarray  # (T, K)
    # Raw (unsmoothed) P*_exp = Π k*_i/m_i and P*_obs = passed*_n/m_0 of the same replicates;
    # only when requested (``trial_bank(..., raw=True)``): the unbiased aggregate uses them.
    p_exp_raw: np.ndarray | None = None  # (T, K)
    p_obs_raw: np.ndarray | None = None  # (T, K)

    def raw(self) -> "TrialBank":
        """The same replicates with the raw P's in place of the smoothed ones."""
        if self.p_exp_raw is None or self.p_obs_raw is None:
            raise ValueError("bank was drawn without raw=True")
        return TrialBank(p_exp=self.p_exp_raw, p_obs=self.p_obs_raw)


def _chain_proportions(pk: Packed) -> np.ndarray:
    """(T, S) proportions the natural chain is resampled from: passed_i / reached_i, 1 on padding."""
    chain_p = np.ones(pk.k.shape)
    for j, t in enumerate(pk.tasks):
        chain_p[j, : t.n_stages] = resampling_proportion(t.passed, t.reached)
    return chain_p


def _bank_chunk(
    pk: Packed,
    chain_p: np.ndarray,
    sl: slice,
    K: int,
    rng: np.random.Generator,
    log_table: np.ndarray,
    raw: bool = False,
) -> tuple[np.ndarray, ...]:
    k, m, m0, chain_p, mask = pk.k[sl], pk.m[sl], pk.m0[sl], chain_p[sl], pk.mask[sl]
    Tc, S = k.shape
    W = log_table.shape[0]
    flat_table = log_table.ravel()
    # Checkpoints: one distribution per task-stage; rows laid out (task, stage, replicate).
    p_hat = np.where(m > 0, resampling_proportion(k, m), 0.0)
    ck = binomial_tables(m.ravel(), p_hat.ravel(), int(m.max()) + 1)
    rows = np.repeat(np.arange(Tc * S, dtype=np.int32), K)
    kstar = ck.sample(rows, rng.random(Tc * S * K))
    if raw:  # Π k*_i / m_i over real stages (padding: m = 0, factor 1)
        inv_m = np.where(m > 0, 1.0 / np.maximum(m, 1), 0.0).ravel()
        ratio = (kstar.reshape(Tc * S, K) * inv_m[:, None]).reshape(Tc, S, K)
        ratio[~mask] = 1.0
        p_exp_raw = ratio.prod(1)
        del ratio
    row_logs = log_table[m.ravel()] * mask.ravel()[:, None]  # ln s(k, m_row); 0 on padding stages
    kstar += rows * np.int32(W)
    log_q = row_logs.ravel()[kstar].reshape(Tc, S, K)
    # Natural rollouts: the binomial chain, with n = passed*_{i-1} itself resampled.
    n_max = int(m0.max())
    log_r = np.empty((Tc, S, K))
    prev = np.repeat(m0.astype(np.int32), K)
    tables = _chain_tables_pay(n_max, K)
    if tables:
        chain = binomial_tables_all_n(chain_p.ravel(), n_max)
        row0 = np.repeat(np.arange(Tc, dtype=np.int32) * np.int32(S * (n_max + 1)), K)
    padded = not mask.all()
    for i in range(S):
        if tables:
            cur = chain.sample(row0 + np.int32(i * (n_max + 1)) + prev, rng.random(Tc * K))
        else:
            cur = rng.binomial(prev, np.repeat(chain_p[:, i], K)).astype(np.int32)
        logs = flat_table[prev * np.int32(W) + cur].reshape(Tc, K)
        log_r[:, i, :] = logs * mask[:, i, None] if padded else logs
        prev = cur
    p_exp, p_obs = np.exp(log_q.sum(1)), np.exp(log_r.sum(1))
    # Padding stages have chain p = 1, so the last draw is passed*_n of the real last stage.
    extra = (p_exp_raw, prev.reshape(Tc, K) / m0[:, None].astype(np.float64)) if raw else ()
    return (p_exp, p_obs, *extra)


def trial_bank(
    pk: Packed,
    K: int,
    seed: np.random.SeedSequence,
    zero_rule: ZeroRule,
    workers: int | None = None,
    raw: bool = False,
) -> TrialBank:
    """Draw ``K`` trial-level replicates per task (task chunks, seeded per chunk).

    ``raw=True`` also keeps the raw P*'s of the same replicates (``p_exp_raw``, ``p_obs_raw``).

    Chunks run on ``workers`` threads (default: one per core). Results depend only
    on the inputs and ``seed``, never on ``workers``.
    """
    T, S = pk.k.shape
    n_max = int(pk.m0.max())
    per_task = K * S
    if _chain_tables_pay(n_max, K):
        per_task = max(per_task, S * (n_max + 1) * (n_max + 2 + guide_cells(n_max + 1)) // 4)
    chunk = max(1, _BLOCK // per_task)
    slices = [slice(a, min(a + chunk, T)) for a in range(0, T, chunk)]
    seeds = seed.spawn(len(slices))
    log_table = smoothed_log_table(int(max(pk.m.max(), pk.m0.max())), zero_rule)
    chain_p = _chain_proportions(pk)
    p_exp, p_obs = np.empty((T, K)), np.empty((T, K))
    p_exp_raw, p_obs_raw = (np.empty((T, K)), np.empty((T, K))) if raw else (None, None)

    def run(j: int) -> None:
        sl = slices[j]
        out = _bank_chunk(pk, chain_p, sl, K, np.random.default_rng(seeds[j]), log_table, raw)
        p_exp[sl], p_obs[sl] = out[:2]
        if raw:
            p_exp_raw[sl], p_obs_raw[sl] = out[2:]

    # numpy releases the GIL inside the sampler's array work: on an idle 2-core machine two
    # threads cut the bank time by about a third.
    workers = min(len(slices), workers or os.cpu_count() or 1)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, range(len(slices))))
    else:
        for j in range(len(slices)):
            run(j)
    return TrialBank(p_exp=p_exp, p_obs=p_obs, p_exp_raw=p_exp_raw, p_obs_raw=p_obs_raw)


# --------------------------------------------------------------------------- aggregates


def _group_weights(pk: Packed, weights: np.ndarray) -> np.ndarray:
    """(T, G) weights × membership for each family and ``all``."""
    names_w = np.zeros((pk.n_tasks, len(pk.families) + 1))
    names_w[np.arange(pk.n_tasks), pk.family_index] = weights
    names_w[:, -1] = weights
    return names_w


def _task_counts(rng: np.random.Generator, strata: list[np.ndarray], nb: int, T: int) -> np.ndarray:
    """(nb, T) multiplicities: each family's tasks drawn with replacement, family sizes kept."""
    counts = np.zeros((nb, T), np.int64)
    for s in strata:
        draws = s[rng.integers(0, s.size, (nb, s.size))]
        counts += np.bincount((np.arange(nb)[:, None] * T + draws).ravel(), minlength=nb * T).reshape(nb, T)
    return counts


def hierarchical_gammas(
    banks: Sequence[TrialBank],
    pk: Packed,
    n_boot: int,
    seed: np.random.SeedSequence,
    zero_rule: ZeroRule,
    weights: np.ndarray,
) -> np.ndarray:
    """Hierarchical (tasks, then trials) replicates of Γ per group; ``(len(banks), n_boot, G)``.

    Replicate ``b`` draws each family's tasks with replacement, giving task ``t``
    a count ``c_bt``; its copies take the task's next ``c_bt`` bank entries (in
    order, wrapping at ``K``), so copies within a replicate are distinct,
    independent trial resamples, and their sum is a difference of a running sum.
    ``weights`` are the task weights, 0 for tasks excluded at the point estimate.
    All banks share the same counts and entries, which is what makes a
    difference between two banks (two agents / conditions) a *paired* bootstrap.
    """
    T, K = banks[0].p_exp.shape
    rng = np.random.default_rng(seed)
    strata = [np.flatnonzero(pk.family_index == f) for f in range(len(pk.families))]
    if max(s.size for s in strata) > K:
        raise ValueError("bank size must be at least the largest family")
    names_w = _group_weights(pk, weights)
    running = []
    for bank in banks:
        pe, po = bank.p_exp, bank.p_obs
        if zero_rule == "exclude":  # a replicate with an undefined log drops the task from both sums
            keep = (pe > 0) & (po > 0)
            pe, po = pe * keep, po * keep
        running.append(tuple(_running_sum(x) for x in (pe, po)))
    out = np.empty((len(banks), n_boot, len(pk.families) + 1))
    start = np.zeros(T, np.int64)
    block = max(1, _BLOCK // T)
    row = np.arange(T) * (K + 1)
    for b0 in range(0, n_boot, block):
        nb = min(block, n_boot - b0)
        counts = _task_counts(rng, strata, nb, T)
        first = (start + np.cumsum(counts, 0) - counts) % K  # first entry used by each (replicate, task)
        start = (start + counts.sum(0)) % K
        end = first + counts
        # A run past entry K wraps to the start of the bank: add the wrapped part separately.
        wrapped = np.flatnonzero(end > K)
        lo, hi = (row + first).ravel(), (row + np.minimum(end, K)).ravel()
        hi_wrapped = (row + end - K).ravel()[wrapped]
        row_wrapped = np.broadcast_to(row, end.shape).ravel()[wrapped]
        for j, (cum_e, cum_o) in enumerate(running):
            sums = []
            for cum in (cum_e.ravel(), cum_o.ravel()):
                x = cum[hi] - cum[lo]
                x[wrapped] += cum[hi_wrapped] - cum[row_wrapped]
                sums.append(x.reshape(nb, T) @ names_w)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[j, b0 : b0 + nb] = np.log(sums[0]) - np.log(sums[1])
    return out


def _running_sum(x: np.ndarray) -> np.ndarray:
    """Row-wise running sums with a leading 0: sum of entries [a, b) = out[b] − out[a]."""
    out = np.zeros((x.shape[0], x.shape[1] + 1))
    np.cumsum(x, axis=1, out=out[:, 1:])
    return out


def task_resample_gammas(
    p_exp: np.ndarray,
    p_obs: np.ndarray,
    pk: Packed,
    n_boot: int,
    seed: np.random.SeedSequence,
    weights: np.ndarray,
) -> np.ndarray:
    """Replicates of Γ per group resampling whole tasks only (each keeps its observed trials); (n_boot, G).

    The one-stage cluster bootstrap (Davison & Hinkley 1997, §3.8): the spread of
    the drawn tasks' estimates already contains their trial noise, so trials are
    not resampled again (``hierarchical="tasks_only"`` of :func:`hrbench.stats.compare.residual_table`).
    """
    rng = np.random.default_rng(seed)
    strata = [np.flatnonzero(pk.family_index == f) for f in range(len(pk.families))]
    names_w = _group_weights(pk, weights)
    counts = _task_counts(rng, strata, n_boot, pk.n_tasks)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(counts @ (names_w * p_exp[:, None])) - np.log(counts @ (names_w * p_obs[:, None]))


def rescaled_task_resample_gammas(
    p_exp: np.ndarray,
    p_obs: np.ndarray,
    pk: Packed,
    n_boot: int,
    seed: np.random.SeedSequence,
    weights: np.ndarray,
    bank: TrialBank | None = None,
    zero_rule: ZeroRule = "jeffreys",
) -> np.ndarray:
    """One-stage task resampling with the Rao–Wu small-sample rescaling; (n_boot, G).

    Within each family (stratum) f of n_f tasks with positive weight, whole tasks are
    drawn with replacement (each keeps its estimated P̂_exp, P̂_obs: their spread across
    tasks already contains the trial noise, so trials are not resampled again —
    Davison & Hinkley 1997, §3.8). The stratum sums are then rescaled about their
    observed values, S'_f = S_f + λ_f (S*_f − S_f) with λ_f = sqrt(n_f / (n_f − 1))
    (Rao & Wu 1988, rescaling bootstrap with resample size n_f), which removes the
    (n_f − 1)/n_f downward bias of the bootstrap variance of a sum; the same draw is
    used for expected and observed. A family with a single task carries no
    between-task information: its sum takes that task's trial-level replicate from
    ``bank`` (the two-stage scheme's value for one task), or stays fixed without a bank.
    A rescaled sum that falls below 0 is clipped at 0 (Γ* = ±inf, kept as an order statistic). Under
    ``exclude`` a single-task family's bank replicate with an undefined log drops out
    (0/0: NaN), as in the two-stage scheme.
    """
    rng = np.random.default_rng(seed)
    T = pk.n_tasks
    F = len(pk.families)
    live = weights > 0
    strata = [np.flatnonzero((pk.family_index == f) & live) for f in range(F)]
    fam_w = np.zeros((T, F))
    fam_w[np.arange(T), pk.family_index] = weights
    vals = np.column_stack([weights * p_exp, weights * p_obs])  # (T, 2)
    obs = np.stack([p_exp @ fam_w, p_obs @ fam_w], axis=1)  # (F, 2) observed family sums
    scaled = np.empty((n_boot, F, 2))
    for f, s in enumerate(strata):
        if s.size > 1:  # draws as in _task_counts (same rng order), summed by gathering
            draws = s[rng.integers(0, s.size, (n_boot, s.size))]
            lam = np.sqrt(s.size / (s.size - 1))
            scaled[:, f, :] = obs[f] + lam * (vals[draws].sum(axis=1) - obs[f])
        elif s.size == 1 and bank is not None:
            t = s[0]
            be, bo = bank.p_exp[t, :n_boot], bank.p_obs[t, :n_boot]
            if zero_rule == "exclude":
                keep = (be > 0) & (bo > 0)
                be, bo = be * keep, bo * keep
            scaled[:, f, 0] = weights[t] * be
            scaled[:, f, 1] = weights[t] * bo
        else:
            scaled[:, f, :] = obs[f]
    both = np.concatenate([scaled, scaled.sum(axis=1, keepdims=True)], axis=1)  # (n_boot, G, 2)
    # Rescaling can push a sum below 0; such a replicate is kept, not dropped (dropping cut off
    # one tail, issue 8): the sum is clipped at 0, so its log is -inf and Γ* = ±inf.
    np.maximum(both, 0.0, out=both)
    sums = (both[..., 0], both[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(sums[0]) - np.log(sums[1])


def trial_variants(t: TaskOutcomes, zero_rule: ZeroRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grouped leave-one-trial-out variants of a task for the trial-level BCa jackknife.

    Removing any one success (or failure) of a stage gives the same statistic, so
    each distinct removal is one row with multiplicity = how many trials it stands
    for. Returns ``(mult (V,), log_q (V, n), log_r (V, n))``.
    """
    k, m = t.checkpoint_k, t.checkpoint_m
    counts = t.depth_counts
    n = t.n_stages
    ks, ms, depth_rows, mult = [], [], [], []
    for i in range(n):
        for dk, c in ((1, k[i]), (0, m[i] - k[i])):
            if c > 0 and m[i] > 1:
                kk, mm = k.copy(), m.copy()
                kk[i] -= dk
                mm[i] -= 1
                ks.append(kk), ms.append(mm), depth_rows.append(counts), mult.append(c)
    if t.m0 > 1:
        for d in range(n + 1):
            if counts[d] > 0:
                cc = counts.copy()
                cc[d] -= 1
                ks.append(k), ms.append(m), depth_rows.append(cc), mult.append(counts[d])
    K_, M_, C_ = np.array(ks), np.array(ms), np.array(depth_rows)
    tail = np.cumsum(C_[:, ::-1], axis=1)[:, ::-1]
    passed = tail[:, 1:]
    reached = tail[:, :-1]
    log_q, log_r = log_proportions(K_, M_, passed, reached, zero_rule)
    return np.array(mult, np.float64), log_q, log_r
