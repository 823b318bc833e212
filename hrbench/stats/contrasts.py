"""Paired contrasts: ΔΓ between two agents or two conditions on the same tasks.

DESIGN §7: ΔΓ(I) = Γ(baseline) − Γ(I). Each side keeps its own P_expected and
P_observed (paper §3.3: every intervention defines its own counterfactual). The two
sides are separate runs, so their trials are independent given the task; the tasks
are shared (paired). Intervals, as in the residual table (docs/statistics.md §8):

* **tasks: fixed** (task rows; ``trial_ci_*`` of family/all rows): MOVER of the two
  sides' tasks-fixed intervals — independent sides, so L = Δ̂ − sqrt((Γ̂a − La)² + (Ub − Γ̂b)²)
  and U likewise (Zou & Donner 2008).
* **tasks: sampled** (``ci_*`` of family/all rows): paired cluster-t — the linearized
  terms x_t = x_a,t − x_b,t of the same task on both sides, CR2 stratified variance with
  the trial-variance floor (both sides' trial variances) and Bell–McCaffrey df; flagged
  ``few-tasks`` below 4 df, ``too-few-tasks`` (no interval) without a family of ≥ 2 tasks.

**Shared checkpoint trials** (``shared_checkpoint=True``: two conditions whose predictions use
the *same* checkpoint trials, e.g. baseline, context reset and state repair under one
protocol). Then P̂_exp is one estimate on both sides and cancels exactly:
ΔΓ = ln Ō_b − ln Ō_a. Treating the sides as independent counted the checkpoint variance twice
(intervals 25–35 % too wide, issue 25); with the covariance, the tasks-fixed interval is MOVER
of the two independent observed terms only, and the cluster-t floor holds only the observed
trial variances (the between-task terms x_a − x_b already lose the shared part).

The bootstrap schemes kept for comparison are :func:`hrbench.stats.compare.paired_difference`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from hrbench.stats.cluster import (
    FEW_TASKS_DF,
    cluster_t_from_terms,
    effective_jeffreys_log_limits,
    jeffreys_log_limits,
    linearized_terms,
    mover_aggregate_intervals,
    trial_variances,
)
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.estimate import estimate_task
from hrbench.stats.packed import aggregate_gamma, group_matrix, pack, raw_probabilities, sums_raw_probabilities
from hrbench.stats.residuals import ALL_SCOPES, Estimand, Flag, Scope, residual_table


class DifferenceRow(BaseModel):
    """ΔΓ = Γ_a − Γ_b for one task, family or ``all``; headline interval as in the residual table.

    ``ci_low``/``ci_high`` is about the population ``ci_estimand`` names (task rows: ``tasks:
    fixed``; family/all rows: ``tasks: sampled``, null with ``ci_method = "too-few-tasks"``);
    ``trial_ci_*`` is always ``tasks: fixed``. ``df`` is the cluster-t's degrees of freedom.
    """

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    scope: Scope
    name: str
    gamma_a: float | None
    gamma_b: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    trial_ci_low: float | None
    trial_ci_high: float | None
    ci_method: str
    level: float
    n_boot: int
    n_tasks: int
    ci_estimand: Estimand = "tasks: sampled"
    trial_ci_method: str = ""
    df: float | None = None
    flags: list[Flag] = []


def _align(tasks_a: Sequence[TaskOutcomes], tasks_b: Sequence[TaskOutcomes]) -> list[TaskOutcomes]:
    """``tasks_b`` reordered to match ``tasks_a`` by name; families must agree."""
    by_name = {t.name: t for t in tasks_b}
    names_a = [t.name for t in tasks_a]
    missing = sorted(set(names_a) ^ set(by_name))
    if missing or len(by_name) != len(tasks_b) or len(set(names_a)) != len(names_a):
        raise ValueError(f"paired_difference needs the same unique task names on both sides; unmatched: {missing}")
    out = [by_name[n] for n in names_a]
    for a, b in zip(tasks_a, out):
        if a.family != b.family:
            raise ValueError(f"task {a.name!r} is in family {a.family!r} on side a but {b.family!r} on side b")
    return out


def paired_sides(
    tasks_a: Sequence[TaskOutcomes], tasks_b: Sequence[TaskOutcomes], shared_checkpoint: bool
) -> tuple[list[TaskOutcomes], list[TaskOutcomes]]:
    """Both sides as lists, ``tasks_b`` in ``tasks_a``'s order; shared checkpoint trials checked identical."""
    tasks_a = list(tasks_a)
    tasks_b = _align(tasks_a, tasks_b)
    if shared_checkpoint:
        _check_shared(tasks_a, tasks_b)
    return tasks_a, tasks_b


def _check_shared(tasks_a: Sequence[TaskOutcomes], tasks_b: Sequence[TaskOutcomes]) -> None:
    """Shared checkpoint trials must be the same trials: otherwise the covariance claimed does not exist."""
    for a, b in zip(tasks_a, tasks_b):
        same = len(a.checkpoint_passes) == len(b.checkpoint_passes) and all(
            np.array_equal(x, y) for x, y in zip(a.checkpoint_passes, b.checkpoint_passes))
        if not same:
            raise ValueError(f"task {a.name!r}: shared_checkpoint=True but the two sides' checkpoint trials differ")


def _none(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def paired_difference(
    tasks_a: Sequence[TaskOutcomes],
    tasks_b: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    level: float = 0.95,
    scopes: Sequence[Scope] = ALL_SCOPES,
    shared_checkpoint: bool = False,
) -> list[DifferenceRow]:
    """Paired intervals for Γ_a − Γ_b per task, family and overall (module docstring).

    Tasks are matched by name; weights and families are side a's. Side a is
    typically the baseline and side b the intervention, giving ΔΓ(I). Each side's Γ
    equals :func:`~hrbench.stats.residuals.residual_table`'s; the intervals are closed-form
    (``n_boot``, the study's declared bootstrap size, is only recorded). The bootstrap
    schemes kept for comparison are :func:`hrbench.stats.compare.paired_difference`.
    ``shared_checkpoint``: both sides' predictions come from the same checkpoint trials (checked:
    they must be identical), so P̂_exp cancels and only the observed sides carry trial variance.
    """
    tasks_a, tasks_b = paired_sides(tasks_a, tasks_b, shared_checkpoint)
    return closed_form_difference(tasks_a, tasks_b, zero_rule, n_boot, level, scopes,
                                  sums_raw_probabilities(zero_rule), shared_checkpoint)


def _mover_difference(d: float, a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float]:
    """MOVER limits of Γ_a − Γ_b from each side's (point, low, high); independent sides."""
    (ga, la, ua), (gb, lb, ub) = a, b
    with np.errstate(invalid="ignore"):
        return (d - float(np.hypot(ga - la, ub - gb)), d + float(np.hypot(ua - ga, gb - lb)))


def _observed_difference(delta: float, a: TaskOutcomes, b: TaskOutcomes, level: float) -> tuple[float, float]:
    """Tasks-fixed interval of one task's ΔΓ when the sides share checkpoint trials: ΔΓ = ln P_obs,b − ln P_obs,a.

    MOVER of the two sides' Jeffreys log-limits of k_0 of m_0 (independent natural rollouts), centred on
    the raw proportions and widened, if need be, to hold the declared rule's Δ̂ (as a task row is).
    """
    k0 = np.array([b.passed[-1], a.passed[-1]])
    m0 = np.array([b.m0, a.m0])
    lim = jeffreys_log_limits(k0, m0, level)
    raw = np.log(k0 / m0)
    (ob, oa), (l_b, l_a), (u_b, u_a) = raw, lim[0], lim[1]
    lo, hi = _mover_difference(float(ob - oa), (float(ob), float(l_b), float(u_b)), (float(oa), float(l_a), float(u_a)))
    return min(lo, delta), max(hi, delta)


def _observed_log_limits(
    po: np.ndarray, k0: np.ndarray, m0: np.ndarray, wmat: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the tasks-fixed limits of ln Ō (effective-count Jeffreys, capped at the Kish trial count:
    the observed half of :func:`~hrbench.stats.cluster.mover_aggregate_intervals`)."""
    W = wmat.sum(axis=0)
    share2 = (wmat / np.where(W > 0, W, 1.0)) ** 2
    o_j = (k0 + 0.5) / (m0 + 1.0)
    var_o = o_j * (1 - o_j) / m0
    cap = 1.0 / ((1.0 / m0) @ share2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return effective_jeffreys_log_limits((po @ wmat) / W, (o_j @ wmat) / W, var_o @ share2, level, cap)


def closed_form_difference(
    tasks_a: list[TaskOutcomes],
    tasks_b: list[TaskOutcomes],
    zero_rule: ZeroRule,
    n_boot: int,
    level: float,
    scopes: Sequence[Scope],
    raw: bool,
    shared: bool = False,
) -> list[DifferenceRow]:
    """MOVER (tasks fixed) and paired cluster-t (tasks sampled) intervals of ΔΓ (module docstring).

    ``tasks_b`` is aligned to ``tasks_a`` (:func:`paired_sides`). ``raw``: groups sum the raw
    per-task P's (:func:`~hrbench.stats.packed.sums_raw_probabilities`). ``shared``: the sides
    share their checkpoint trials, so only the observed terms enter either interval.
    """
    pk_a, pk_b = pack(tasks_a), pack(tasks_b)
    names, member = group_matrix(pk_a)
    est_a = [estimate_task(t, zero_rule, level) for t in tasks_a]
    est_b = [estimate_task(t, zero_rule, level) for t in tasks_b]
    # Under "exclude" a task undefined on either side leaves the pair.
    kept = np.array([not (a.excluded or b.excluded) for a, b in zip(est_a, est_b)])
    wmat = member * (pk_a.weights * kept)[:, None]
    # Task rows of each side: the residual table's (declared rule, MOVER–Jeffreys), tasks fixed; only where a
    # row shows them (task scope, a one-task group), so an overall-only contrast (the claims' Monte Carlo) skips them.
    shown = "task" in scopes or bool(np.any((wmat[:, [i for i, n in enumerate(names)
                                                     if ("all" if i == len(names) - 1 else "family") in scopes]] > 0)
                                            .sum(axis=0) == 1))
    task_a = residual_table(tasks_a, zero_rule, level=level, scopes=("task",)) if shown else []
    task_b = residual_table(tasks_b, zero_rule, level=level, scopes=("task",)) if shown else []
    task_rows: list[DifferenceRow] = []
    common = dict(level=level, n_boot=n_boot)
    for out_a, out_b, ra, rb in zip(tasks_a, tasks_b, task_a, task_b):
        defined = ra.gamma is not None and rb.gamma is not None
        delta = ra.gamma - rb.gamma if defined else None
        lo = hi = None
        if defined and shared:
            lo, hi = _observed_difference(delta, out_a, out_b, level)
        elif defined:
            lo, hi = _mover_difference(delta, (ra.gamma, ra.ci_low, ra.ci_high), (rb.gamma, rb.ci_low, rb.ci_high))
        flags = [f for f in dict.fromkeys([*ra.flags, *rb.flags]) if f in ("zero-rule", "boundary", "excluded")]
        if not defined:
            flags.append("no-estimate")
        task_rows.append(DifferenceRow(
            scope="task", name=ra.name, gamma_a=ra.gamma, gamma_b=rb.gamma, delta=delta, ci_low=lo, ci_high=hi,
            trial_ci_low=lo, trial_ci_high=hi, ci_method="mover-jeffreys", trial_ci_method="mover-jeffreys",
            ci_estimand="tasks: fixed", n_tasks=1, flags=flags, **common,
        ))
    rows = [r for r in task_rows if "task" in scopes]

    sides = []
    for pk, ests in ((pk_a, est_a), (pk_b, est_b)):
        pe_rule, po_rule = np.array([e.p_expected for e in ests]), np.array([e.p_observed for e in ests])
        pe, po = raw_probabilities(pk) if raw else (pe_rule, po_rule)
        k0 = np.array([t.passed[-1] for t in pk.tasks])
        theta = aggregate_gamma(pe, po, wmat, "bound" if raw else zero_rule)
        low, high = mover_aggregate_intervals(pe, po, pk.k, pk.m, pk.mask, k0, pk.m0, wmat, level)
        var_e, var_o = trial_variances(pk.k, pk.m, pk.mask, k0, pk.m0)
        if shared:  # the checkpoint side is one estimate on both sides: no trial variance in the difference
            var_e = np.zeros_like(var_e)
            low, high = _observed_log_limits(po, k0, pk.m0, wmat, level)
        sides.append((pe, po, theta, low, high, var_e, var_o))
    (pe_a, po_a, th_a, lo_a, hi_a, ve_a, vo_a), (pe_b, po_b, th_b, lo_b, hi_b, ve_b, vo_b) = sides
    for g, name in enumerate(names):
        scope: Scope = "all" if g == len(names) - 1 else "family"
        if scope not in scopes:
            continue
        w = wmat[:, g]
        idx = np.flatnonzero(w > 0)
        base = dict(scope=scope, name=name, n_tasks=int(idx.size), **common)
        if idx.size == 1:
            # One task stands for no population: the row is its task row, with no tasks-sampled interval.
            t = task_rows[idx[0]]
            rows.append(t.model_copy(update=dict(
                **base, ci_low=None, ci_high=None, ci_method="too-few-tasks", ci_estimand="tasks: sampled",
                flags=[*t.flags, "too-few-tasks"])))
            continue
        ta = linearized_terms(pe_a, po_a, ve_a, vo_a, w)
        tb = linearized_terms(pe_b, po_b, ve_b, vo_b, w)
        ga = float(th_a[g]) if np.isfinite(th_a[g]) else None
        gb = float(th_b[g]) if np.isfinite(th_b[g]) else None
        if ta is None or tb is None or ga is None or gb is None:
            rows.append(DifferenceRow(
                **base, gamma_a=ga, gamma_b=gb, delta=None, ci_low=None, ci_high=None, trial_ci_low=None,
                trial_ci_high=None, ci_method="none", trial_ci_method="none", flags=["no-estimate"]))
            continue
        delta = ga - gb
        if shared:  # ΔΓ = ln Ō_b − ln Ō_a; lo/hi hold each side's limits of ln Ō
            o_a, o_b = math.log(float(po_a @ w / w.sum())), math.log(float(po_b @ w / w.sum()))
            t_lo, t_hi = _mover_difference(delta, (o_b, lo_b[g], hi_b[g]), (o_a, lo_a[g], hi_a[g]))
        else:
            t_lo, t_hi = _mover_difference(delta, (ga, lo_a[g], hi_a[g]), (gb, lo_b[g], hi_b[g]))
        lo, hi, _, df, n_multi, n_small = cluster_t_from_terms(delta, ta[1] - tb[1], ta[2] + tb[2], w > 0,
                                                      pk_a.family_index, level)
        zero = any(est_a[i].zero_rule_applied or est_b[i].zero_rule_applied for i in idx)
        flags: list[Flag] = ["zero-rule"] if zero else []
        method = "cluster-t"
        if n_multi == 0:
            method, df = "too-few-tasks", None
            flags.append("too-few-tasks")
        elif df < FEW_TASKS_DF or n_small:
            flags.append("few-tasks")
        rows.append(DifferenceRow(
            **base, gamma_a=ga, gamma_b=gb, delta=delta, ci_low=_none(lo), ci_high=_none(hi),
            trial_ci_low=t_lo, trial_ci_high=t_hi, ci_method=method, trial_ci_method="mover-effective-jeffreys",
            df=None if df is None else _none(df), flags=flags))
    return rows
