"""The residual table: Γ_H per task, per family and overall, with intervals.

Aggregation (paper §3.2, DESIGN §7): compose within each task first, then
P_exp,F = Σ w_t P_exp,t / Σ w_t and P_obs,F likewise with the *same* weights,
Γ_F = ln(P_exp,F / P_obs,F). Stage averages are never multiplied.

Aggregates sum unbiased (raw) per-task P's by default; task rows use the
declared zero rule (docs/statistics.md §6 and §11 for why).

Intervals: the headline (``ci_low``/``ci_high``) is the hierarchical bootstrap
for family and overall rows (it generalizes over the tasks those rows stand
for; by default one-stage task resampling with the Rao–Wu rescaling and
expanded percentiles) and the trial-level bootstrap for task rows; the
trial-level interval of aggregates (these tasks only) is reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import stats

from hrbench.stats.bootstrap import (
    CiMethod,
    Packed,
    TaskScopeSpec,
    TrialBank,
    aggregate_gamma,
    bca_probs,
    column_quantiles,
    expanded_z,
    group_matrix,
    hierarchical_gammas,
    hierarchical_jackknife,
    jackknife_acceleration,
    pack,
    rescaled_task_resample_gammas,
    task_resample_gammas,
    trial_bank,
    trial_variants,
)
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.estimate import BoundSide, TaskEstimate, estimate_task
from hrbench.stats.intervals import lower_bound_exact, upper_bound_exact

Scope = Literal["task", "family", "all"]
Quadrant = Literal[
    "both_high", "both_low", "expected_high_observed_low", "observed_above_expected", "intermediate"
]
ALL_SCOPES: tuple[Scope, ...] = ("task", "family", "all")


class QuadrantThresholds(BaseModel):
    """Declared thresholds on P_expected / P_observed for the paper's §3.4 reading (the study's `quadrant`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    high: float = Field(0.5, gt=0, lt=1, description="a rate at or above this is 'high'")
    low: float = Field(0.2, gt=0, lt=1, description="a rate at or below this is 'low'")

    @model_validator(mode="after")
    def _ordered(self) -> "QuadrantThresholds":
        if self.low >= self.high:
            raise ValueError(f"quadrant.low must be below quadrant.high, got low={self.low}, high={self.high}")
        return self


def quadrant(p_expected: float, p_observed: float, thresholds: QuadrantThresholds) -> Quadrant:
    """Quadrant label, first match wins (paper §3.4).

    1. ``both_high``: P_exp ≥ high and P_obs ≥ high.
    2. ``both_low``: P_exp < low and P_obs < low.
    3. ``expected_high_observed_low``: P_exp ≥ high and P_obs < low.
    4. ``observed_above_expected``: P_obs > P_exp (Γ < 0) outside the cases above.
    5. ``intermediate``: none of these (e.g. P_exp between the thresholds with P_obs ≤ P_exp).
    """
    hi, lo = thresholds.high, thresholds.low
    if p_expected >= hi and p_observed >= hi:
        return "both_high"
    if p_expected < lo and p_observed < lo:
        return "both_low"
    if p_expected >= hi and p_observed < lo:
        return "expected_high_observed_low"
    if p_observed > p_expected:
        return "observed_above_expected"
    return "intermediate"


class ResidualRow(BaseModel):
    """One row of the residual table. Infinite interval ends mean a one-sided interval."""

    # Infinite limits are meaningful (one-sided intervals); keep them distinguishable from null.
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    scope: Scope
    name: str
    family: str | None
    p_expected: float | None
    p_observed: float | None
    gamma: float | None
    ci_low: float | None
    ci_high: float | None
    trial_ci_low: float | None
    trial_ci_high: float | None
    se_delta: float | None
    ci_method: str
    level: float
    n_boot: int
    zero_rule: ZeroRule
    zero_rule_applied: bool
    n_tasks: int
    n_excluded: int
    quadrant: Quadrant | None
    bound: BoundSide | None = None
    bound_value: float | None = None
    stage_terms: list[float | None] | None = None
    stage_term_ci: list[tuple[float | None, float | None]] | None = None


def _f(x: float) -> float | None:
    """NaN (undefined) → None; ±inf stays (a one-sided interval end)."""
    return None if x is None or np.isnan(x) else float(x)


def _var_p_expected(e: TaskEstimate) -> float:
    """Delta variance of P̂_exp = Π q̂_i: Σ_i (Π_{j≠i} q_j)² q_i(1−q_i)/m_i (finite even if a q is 0)."""
    q, m = np.array(e.q), np.array(e.checkpoint_m)
    others = np.array([np.prod(np.delete(q, i)) for i in range(q.size)])
    return float(np.sum(others**2 * q * (1 - q) / m))


def aggregate_delta_se(ests: Sequence[TaskEstimate], weights: np.ndarray) -> float | None:
    """Delta-method SE of Γ_F (tasks fixed, trials random, no covariance).

    Var(ln Σ w P̂) ≈ Σ_t w_t² Var(P̂_t) / (Σ w P)², with Var(P̂_exp,t) from
    :func:`_var_p_expected` and Var(P̂_obs,t) ≈ P_obs(1−P_obs)/m_0; expected and
    observed add. For one task this is exactly the per-task formula (paper eq. 4).
    """
    s_e = float(np.dot(weights, [e.p_expected for e in ests]))
    s_o = float(np.dot(weights, [e.p_observed for e in ests]))
    if not ests or s_e <= 0 or s_o <= 0:
        return None
    var_e = sum(w * w * _var_p_expected(e) for w, e in zip(weights, ests))
    var_o = sum(w * w * e.p_observed * (1 - e.p_observed) / e.m0 for w, e in zip(weights, ests))
    return math.sqrt(var_e / s_e**2 + var_o / s_o**2)


def _aggregate_bound(
    ests: Sequence[TaskEstimate], weights: np.ndarray, level: float
) -> tuple[BoundSide | None, float | None]:
    """One-sided bound for an aggregate whose log is undefined (zero rule ``bound``).

    As :func:`~hrbench.stats.estimate.gamma_bound`, with α split over the two limits
    and (Bonferroni) over the tasks, so the limits on the weighted sums hold jointly.
    """
    s_e = float(np.dot(weights, [e.p_expected for e in ests]))
    s_o = float(np.dot(weights, [e.p_observed for e in ests]))
    alpha = (1 - level) / (2 * len(ests))
    if s_o == 0 and s_e > 0:
        z = float(stats.norm.ppf(1 - (1 - level) / 2))
        var_e = sum(w * w * _var_p_expected(e) for w, e in zip(weights, ests))
        low_e = s_e * math.exp(-z * math.sqrt(var_e) / s_e)
        up_o = sum(w * upper_bound_exact(0, e.m0, alpha) for w, e in zip(weights, ests))
        return "lower", math.log(low_e / up_o)
    if s_e == 0 and s_o > 0:
        up_e = sum(
            w * min(upper_bound_exact(0, mj, alpha) for qj, mj in zip(e.q, e.checkpoint_m) if qj == 0)
            for w, e in zip(weights, ests)
        )
        low_o = sum(w * lower_bound_exact(e.passed[-1], e.m0, alpha) for w, e in zip(weights, ests))
        return "upper", math.log(up_e / low_o) if low_o > 0 else math.inf
    return None, None


def _one_sided(bound: BoundSide | None, value: float | None, ci: tuple[float, float]) -> tuple[float, float]:
    """Under the ``bound`` rule an undefined Γ is reported as the one-sided interval its bound gives
    (every bootstrap replicate is then ±inf as well, which says nothing more)."""
    if bound == "lower" and value is not None:
        return value, math.inf
    if bound == "upper" and value is not None:
        return -math.inf, value
    return ci


def _percentile_probs(level: float) -> np.ndarray:
    return np.array([(1 - level) / 2, (1 + level) / 2])


def _task_bca_inputs(
    tasks: Sequence[TaskOutcomes], ests: Sequence[TaskEstimate], S: int, zero_rule: ZeroRule
) -> tuple[np.ndarray, np.ndarray]:
    """Point values and trial-jackknife accelerations of (Γ_t, stage terms), each (T, 1 + S)."""
    theta = np.full((len(tasks), 1 + S), np.nan)
    accel = np.zeros((len(tasks), 1 + S))
    for j, (t, e) in enumerate(zip(tasks, ests)):
        theta[j, 0] = np.nan if e.gamma is None else e.gamma
        theta[j, 1 : 1 + t.n_stages] = [np.nan if v is None else v for v in e.stage_terms]
        mult, lq, lr = trial_variants(t, zero_rule)
        with np.errstate(invalid="ignore"):
            vals = np.column_stack([lq.sum(1) - lr.sum(1), lq - lr])
        accel[j, : 1 + t.n_stages] = jackknife_acceleration(vals, mult)
    return theta, accel


def _trial_jackknife_aggregate(
    tasks: Sequence[TaskOutcomes], pe: np.ndarray, po: np.ndarray, wmat: np.ndarray, zero_rule: ZeroRule
) -> np.ndarray:
    """Trial-level BCa acceleration per group from grouped leave-one-trial-out variants."""
    vals, mults = [], []
    for j, t in enumerate(tasks):
        mult, lq, lr = trial_variants(t, zero_rule)
        pe_v = np.repeat(pe[None, :], mult.size, 0)
        po_v = np.repeat(po[None, :], mult.size, 0)
        pe_v[:, j] = np.exp(lq.sum(1))
        po_v[:, j] = np.exp(np.nan_to_num(lr, nan=0.0).sum(1))
        g = aggregate_gamma(pe_v, po_v, wmat, zero_rule)
        g[:, wmat[j] == 0] = np.nan  # a group's jackknife only removes its own trials
        vals.append(g), mults.append(mult)
    return jackknife_acceleration(np.concatenate(vals), np.concatenate(mults))


AggregateRule = Literal["unbiased", "smoothed"]
HierarchicalScheme = Literal["tasks_rescaled", "tasks_then_trials", "tasks_only"]


def uses_raw_aggregate(zero_rule: ZeroRule, aggregate: AggregateRule) -> bool:
    """Whether aggregates sum raw per-task P's (only smoothing rules differ from raw)."""
    if aggregate not in ("unbiased", "smoothed"):
        raise ValueError(f"unknown aggregate {aggregate!r}; choose 'unbiased' or 'smoothed'")
    return aggregate == "unbiased" and zero_rule in ("jeffreys", "haldane")


def raw_probabilities(pk: Packed) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased per-task P̂_exp = Π k_i/m_i and P̂_obs = passed_n/m_0 (raw proportions)."""
    pe = np.prod(np.where(pk.mask, pk.k / np.maximum(pk.m, 1), 1.0), axis=1)
    po = np.array([t.passed[-1] / t.m0 for t in pk.tasks], np.float64)
    return pe, po


@dataclass(frozen=True, eq=False)
class AggregateReplicates:
    """Point values and bootstrap replicates of Γ per group (each family, then ``all``)."""

    theta: np.ndarray  # (G,)
    trial_reps: np.ndarray  # (B, G)
    hier_reps: np.ndarray  # (B, G)
    accel_h: np.ndarray | None  # (G,) BCa accelerations, or None
    accel_tr: np.ndarray | None
    pe_row: np.ndarray  # (T, G) per-task P_exp that group g sums
    po_row: np.ndarray
    use_raw: np.ndarray  # (G,) bool
    df: np.ndarray | None  # (G,) Σ_f (n_f − 1) for the rescaled one-stage scheme, else None


def aggregate_replicates(
    tasks: Sequence[TaskOutcomes],
    pk: Packed,
    pe_rule: np.ndarray,
    po_rule: np.ndarray,
    bank: TrialBank,
    wmat: np.ndarray,
    kept: np.ndarray,
    n_boot: int,
    hier_seed: np.random.SeedSequence,
    zero_rule: ZeroRule,
    aggregate: AggregateRule,
    hierarchical: HierarchicalScheme,
    bca: bool = False,
) -> AggregateReplicates:
    """Γ per group with its trial-level and hierarchical replicates (docs/statistics.md §6–7).

    Under ``aggregate="unbiased"`` with a smoothing rule, a group sums the raw per-task
    P's (and the bank's raw replicates) unless its raw expected or observed sum is 0,
    in which case it falls back to the declared rule's P's. Equal ``hier_seed`` gives
    equal task draws, which is what pairs two sides of a contrast.
    """
    T = pk.n_tasks
    G = wmat.shape[1]
    smooth = dict(pe=pe_rule, po=po_rule, bank=bank, rule=zero_rule)
    use_raw = np.zeros(G, bool)
    variants = []
    pe_row = np.repeat(pe_rule[:, None], G, 1)
    po_row = np.repeat(po_rule[:, None], G, 1)
    if uses_raw_aggregate(zero_rule, aggregate):
        pe_raw, po_raw = raw_probabilities(pk)
        use_raw = (pe_raw @ wmat > 0) & (po_raw @ wmat > 0)
        variants.append((dict(pe=pe_raw, po=po_raw, bank=bank.raw(), rule="bound"), use_raw))
        pe_row[:, use_raw] = pe_raw[:, None]
        po_row[:, use_raw] = po_raw[:, None]
    if not use_raw.all():
        variants.append((smooth, ~use_raw))
    theta = np.full(G, np.nan)
    trial_reps = np.full((n_boot, G), np.nan)
    hier_reps = np.full((n_boot, G), np.nan)
    accel_h = np.zeros(G) if bca else None
    accel_tr = np.zeros(G) if bca else None
    weights = pk.weights * kept
    for v, cols in variants:
        rule, b = v["rule"], v["bank"]
        theta[cols] = aggregate_gamma(v["pe"], v["po"], wmat, rule)[cols]
        trial_reps[:, cols] = aggregate_gamma(b.p_exp[:, :n_boot].T, b.p_obs[:, :n_boot].T, wmat, rule)[:, cols]
        if hierarchical == "tasks_then_trials":
            h = hierarchical_gammas([b], pk, n_boot, hier_seed, rule, weights)[0]
        elif hierarchical == "tasks_only":
            h = task_resample_gammas(v["pe"], v["po"], pk, n_boot, hier_seed, weights)
        elif hierarchical == "tasks_rescaled":
            h = rescaled_task_resample_gammas(v["pe"], v["po"], pk, n_boot, hier_seed, weights, b, rule)
        else:
            raise ValueError(f"unknown hierarchical scheme {hierarchical!r}")
        hier_reps[:, cols] = h[:, cols]
        if bca:
            accel_h[cols] = jackknife_acceleration(hierarchical_jackknife(v["pe"], v["po"], wmat, rule), np.ones(T))[cols]
            accel_tr[cols] = _trial_jackknife_aggregate(tasks, v["pe"], v["po"], wmat, rule)[cols]
    df = None
    if hierarchical == "tasks_rescaled":
        live = weights > 0
        n_f = np.bincount(pk.family_index[live], minlength=len(pk.families))
        # Families with one task contribute trial-level (not between-task) noise: no df.
        per_f = np.where(n_f > 1, n_f - 1, 0).astype(np.float64)
        df = np.append(per_f, per_f.sum())
    return AggregateReplicates(theta, trial_reps, hier_reps, accel_h, accel_tr, pe_row, po_row, use_raw, df)


def _interval(
    reps: np.ndarray,
    theta: np.ndarray,
    accel: np.ndarray | None,
    level: float,
    method: CiMethod,
    df: np.ndarray | None = None,
) -> np.ndarray:
    """(G, 2) interval limits from (B, G) replicates; ``df``: expanded percentiles (Student t)."""
    if method == "bca" and accel is not None:
        return column_quantiles(reps, bca_probs(reps, theta, accel, level, df))
    if df is None:
        return column_quantiles(reps, _percentile_probs(level))
    return column_quantiles(reps, stats.norm.cdf(expanded_z(level, df, reps.shape[1])))


def residual_table(
    tasks: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    quadrant_thresholds: QuadrantThresholds = QuadrantThresholds(),
    ci_method: CiMethod = "percentile",
    scopes: Sequence[Scope] = ALL_SCOPES,
    hierarchical: HierarchicalScheme = "tasks_rescaled",
    aggregate: AggregateRule = "unbiased",
) -> list[ResidualRow]:
    """Γ_H rows for every task, every family and ``all``, with bootstrap intervals.

    Args:
        tasks: task units (checkpoint + natural trials of one agent, one condition).
        zero_rule: pre-declared rule for zero / boundary counts.
        n_boot: bootstrap replicates (both schemes).
        seed: seeds everything; equal inputs and seed give equal tables.
        level: nominal coverage of every interval.
        quadrant_thresholds: declared thresholds for the quadrant label.
        ci_method: ``percentile`` (default) or ``bca``.
        scopes: which rows to produce (calibration skips task rows).
        hierarchical: headline resampling for family/all rows. ``tasks_rescaled``
            (default): whole tasks redrawn within family, each keeping its estimate,
            with the Rao–Wu small-sample rescaling; ``tasks_then_trials``: the
            two-stage scheme (tasks, then trials; conservative, it counts trial noise
            twice); ``tasks_only``: one-stage without rescaling. docs/statistics.md §7, §11.
        aggregate: per-task P's summed into family/all rows. ``unbiased`` (default):
            under ``jeffreys``/``haldane`` the raw Π k_i/m_i and passed_n/m_0 (the
            first-order bias correction of the smoothed proportions; unbiased, so their
            sums are), falling back to the smoothed P's for a group whose raw sum is 0;
            ``smoothed``: the declared rule's P's (the pre-calibration behaviour). Task
            rows always use the declared rule. Under ``bound``/``exclude`` both are raw.
    """
    tasks = list(tasks)
    ests = [estimate_task(t, zero_rule, level) for t in tasks]
    pk: Packed = pack(tasks)
    T, S = pk.k.shape
    names, member = group_matrix(pk)
    kept = np.array([not e.excluded for e in ests])
    wmat = member * (pk.weights * kept)[:, None]
    pe0 = np.array([e.p_expected for e in ests])
    po0 = np.array([e.p_observed for e in ests])
    raw_agg = uses_raw_aggregate(zero_rule, aggregate)

    ss = np.random.SeedSequence(seed)
    bank_seed, hier_seed = ss.spawn(2)
    bca = ci_method == "bca"
    spec = TaskScopeSpec(level=level, method=ci_method)
    if bca and "task" in scopes:
        theta_t, accel_t = _task_bca_inputs(tasks, ests, S, zero_rule)
        spec = TaskScopeSpec(level=level, method=ci_method, theta=theta_t, accel=accel_t)
    agg_wanted = any(sc in scopes for sc in ("family", "all"))
    bank = trial_bank(
        pk, max(n_boot, T), n_boot if "task" in scopes else 0, bank_seed, zero_rule, spec, raw=raw_agg and agg_wanted
    )

    rows: list[ResidualRow] = []
    common = dict(level=level, n_boot=n_boot, zero_rule=zero_rule)
    if "task" in scopes:
        for j, (t, e) in enumerate(zip(tasks, ests)):
            ci = bank.task_ci[j]
            low, high = _one_sided(e.bound, e.bound_value, (ci[0, 0], ci[0, 1]))
            rows.append(
                ResidualRow(
                    scope="task",
                    name=t.name,
                    family=t.family,
                    p_expected=e.p_expected,
                    p_observed=e.p_observed,
                    gamma=e.gamma,
                    ci_low=_f(low),
                    ci_high=_f(high),
                    trial_ci_low=_f(low),
                    trial_ci_high=_f(high),
                    se_delta=e.se_delta,
                    ci_method=f"trial-{ci_method}",
                    zero_rule_applied=e.zero_rule_applied,
                    n_tasks=1,
                    n_excluded=int(e.excluded),
                    quadrant=quadrant(e.p_expected, e.p_observed, quadrant_thresholds),
                    bound=e.bound,
                    bound_value=e.bound_value,
                    stage_terms=e.stage_terms,
                    stage_term_ci=[(_f(lo), _f(hi)) for lo, hi in ci[1 : 1 + t.n_stages]],
                    **common,
                )
            )
    agg_scopes = [s for s in ("family", "all") if s in scopes]
    if not agg_scopes:
        return rows

    agg = aggregate_replicates(
        tasks, pk, pe0, po0, bank, wmat, kept, n_boot, hier_seed, zero_rule, aggregate, hierarchical, bca
    )
    theta_g, pe_row, po_row = agg.theta, agg.pe_row, agg.po_row
    hier_label = {"tasks_rescaled": "hierarchical", "tasks_then_trials": "two-stage-hierarchical", "tasks_only": "task-resample"}[
        hierarchical
    ]
    hier_ci = _interval(agg.hier_reps, theta_g, agg.accel_h, level, ci_method, agg.df)
    trial_ci = _interval(agg.trial_reps, theta_g, agg.accel_tr, level, ci_method)

    for g, name in enumerate(names):
        scope: Scope = "all" if g == len(names) - 1 else "family"
        if scope not in agg_scopes:
            continue
        in_group = member[:, g] > 0
        idx = np.flatnonzero(in_group & kept)
        group_ests = [ests[i] for i in idx]
        w = pk.weights[idx]
        p_exp = float(np.dot(w, pe_row[idx, g]) / w.sum()) if idx.size else None
        p_obs = float(np.dot(w, po_row[idx, g]) / w.sum()) if idx.size else None
        gamma = _f(theta_g[g]) if np.isfinite(theta_g[g]) else None
        bound, bound_value = (None, None)
        if zero_rule == "bound" and gamma is None and idx.size:
            bound, bound_value = _aggregate_bound(group_ests, w, level)
        h_low, h_high = _one_sided(bound, bound_value, (hier_ci[g, 0], hier_ci[g, 1]))
        t_low, t_high = _one_sided(bound, bound_value, (trial_ci[g, 0], trial_ci[g, 1]))
        rows.append(
            ResidualRow(
                scope=scope,
                name=name,
                family=None if scope == "all" else name,
                p_expected=p_exp,
                p_observed=p_obs,
                gamma=gamma,
                ci_low=_f(h_low),
                ci_high=_f(h_high),
                trial_ci_low=_f(t_low),
                trial_ci_high=_f(t_high),
                se_delta=aggregate_delta_se(group_ests, w) if idx.size else None,
                ci_method=f"{hier_label}-{ci_method}",
                zero_rule_applied=any(ests[i].zero_rule_applied for i in np.flatnonzero(in_group)),
                n_tasks=int(idx.size),
                n_excluded=int(np.sum(in_group & ~kept)),
                quadrant=None if p_exp is None else quadrant(p_exp, p_obs, quadrant_thresholds),
                bound=bound,
                bound_value=bound_value,
                **common,
            )
        )
    return rows
