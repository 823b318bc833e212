"""The residual table: Γ_H per task, per family and overall, with intervals.

Aggregation (paper §3.2, DESIGN §7): compose within each task first, then
P_exp,F = Σ w_t P_exp,t / Σ w_t and P_obs,F likewise with the *same* weights,
Γ_F = ln(P_exp,F / P_obs,F). Stage averages are never multiplied.

Intervals: the headline (``ci_low``/``ci_high``) is the hierarchical bootstrap
for family and overall rows (it generalizes over the tasks those rows stand
for) and the trial-level bootstrap for task rows; the trial-level interval of
aggregates (these tasks only) is reported beside it.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator
from scipy import stats

from hrbench.stats.bootstrap import (
    CiMethod,
    Packed,
    TaskScopeSpec,
    aggregate_gamma,
    bca_probs,
    column_quantiles,
    group_matrix,
    hierarchical_gammas,
    hierarchical_jackknife,
    jackknife_acceleration,
    pack,
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
    """Declared thresholds on P_expected / P_observed for the paper's §3.4 reading."""

    model_config = ConfigDict(frozen=True)

    high: float = 0.5
    low: float = 0.2

    @model_validator(mode="after")
    def _ordered(self) -> "QuadrantThresholds":
        if not 0 <= self.low <= self.high <= 1:
            raise ValueError(f"quadrant thresholds need 0 <= low <= high <= 1, got low={self.low}, high={self.high}")
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


def _interval(reps: np.ndarray, theta: np.ndarray, accel: np.ndarray | None, level: float, method: CiMethod) -> np.ndarray:
    """(G, 2) interval limits from (B, G) replicates."""
    if method == "bca" and accel is not None:
        return column_quantiles(reps, bca_probs(reps, theta, accel, level))
    return column_quantiles(reps, _percentile_probs(level))


def residual_table(
    tasks: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    quadrant_thresholds: QuadrantThresholds = QuadrantThresholds(),
    ci_method: CiMethod = "percentile",
    scopes: Sequence[Scope] = ALL_SCOPES,
    hierarchical: Literal["tasks_then_trials", "tasks_only"] = "tasks_then_trials",
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
        hierarchical: headline resampling for family/all rows: tasks then trials
            (default, DESIGN §7) or whole tasks only (one-stage cluster bootstrap;
            see docs/statistics.md §11 for why it is offered).
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
    theta_g = aggregate_gamma(pe0, po0, wmat, zero_rule)

    ss = np.random.SeedSequence(seed)
    bank_seed, hier_seed = ss.spawn(2)
    bca = ci_method == "bca"
    spec = TaskScopeSpec(level=level, method=ci_method)
    if bca and "task" in scopes:
        theta_t, accel_t = _task_bca_inputs(tasks, ests, S, zero_rule)
        spec = TaskScopeSpec(level=level, method=ci_method, theta=theta_t, accel=accel_t)
    bank = trial_bank(pk, max(n_boot, T), n_boot if "task" in scopes else 0, bank_seed, zero_rule, spec)

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

    trial_reps = aggregate_gamma(bank.p_exp[:, :n_boot].T, bank.p_obs[:, :n_boot].T, wmat, zero_rule)
    if hierarchical == "tasks_then_trials":
        hier_reps = hierarchical_gammas([bank], pk, n_boot, hier_seed, zero_rule, pk.weights * kept)[0]
        hier_label = "hierarchical"
    else:
        hier_reps = task_resample_gammas(pe0, po0, pk, n_boot, hier_seed, pk.weights * kept)
        hier_label = "task-resample"
    accel_h = accel_tr = None
    if bca:
        accel_h = jackknife_acceleration(hierarchical_jackknife(pe0, po0, wmat, zero_rule), np.ones(T))
        accel_tr = _trial_jackknife_aggregate(tasks, pe0, po0, wmat, zero_rule)
    hier_ci = _interval(hier_reps, theta_g, accel_h, level, ci_method)
    trial_ci = _interval(trial_reps, theta_g, accel_tr, level, ci_method)

    for g, name in enumerate(names):
        scope: Scope = "all" if g == len(names) - 1 else "family"
        if scope not in agg_scopes:
            continue
        in_group = member[:, g] > 0
        idx = np.flatnonzero(in_group & kept)
        group_ests = [ests[i] for i in idx]
        w = pk.weights[idx]
        p_exp = float(np.dot(w, pe0[idx]) / w.sum()) if idx.size else None
        p_obs = float(np.dot(w, po0[idx]) / w.sum()) if idx.size else None
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
