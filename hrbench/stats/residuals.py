"""The residual table: Γ_H per task, per family and overall, with intervals.

Aggregation (paper §3.2, DESIGN §7): compose within each task first, then
P_exp,F = Σ w_t P_exp,t / Σ w_t and P_obs,F likewise with the *same* weights,
Γ_F = ln(P_exp,F / P_obs,F). Stage averages are never multiplied.

Aggregates sum unbiased (raw) per-task P's; task rows use the
declared zero rule (docs/statistics.md §6 and §11 for why). A raw count of 0
that makes a log undefined gives ``gamma = None`` and a one-sided bound, under
every rule.

Intervals, each labelled with its estimand (``ci_estimand``): task rows get the
MOVER–Jeffreys interval (``tasks: fixed``); family and overall rows get the
cluster-t interval (``tasks: sampled``: the population of tasks they stand for;
none for a row without a family of ≥ 2 tasks) as the headline, and MOVER of the
effective-count Jeffreys limits (``tasks: fixed``) beside it. All are closed-form; the
bootstrap schemes kept for comparison are in :mod:`hrbench.stats.compare`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import stats

from hrbench.stats.cluster import (
    FAMILY_LEVEL_MIN,
    FEW_TASKS_DF,
    families_sampled_interval,
    cluster_t_intervals,
    var_p_expected,
    jeffreys_log_limits,
    mover_aggregate_intervals,
    mover_gamma_interval,
    trial_variances,
)
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.estimate import BoundSide, TaskEstimate, estimate_task
from hrbench.stats.intervals import lower_bound_exact, upper_bound_exact
from hrbench.stats.packed import (
    Packed,
    aggregate_gamma,
    group_matrix,
    pack,
    raw_probabilities,
    sums_raw_probabilities,
)

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


Estimand = Literal["tasks: fixed", "tasks: sampled"]
#: Row flags (docs/statistics.md §7): ``zero-rule`` a raw proportion entering a log is 0;
#: ``one-sided`` Γ is undefined and reported as a bound; ``no-estimate`` neither Γ nor a bound;
#: ``boundary`` some count is at m (every trial passed), the interval rests on the Jeffreys
#: limit there; ``few-tasks`` tasks-sampled interval with < FEW_TASKS_DF df or a family of 2–4
#: tasks (t-based with few df, or the whole trial-variance floor: wide, conservative); ``too-few-tasks`` no tasks-sampled interval (no family with ≥ 2 tasks);
#: ``excluded`` dropped by the ``exclude`` rule.
#: ``few-families``: the `all` row has 2 to FAMILY_LEVEL_MIN − 1 families, too few to resample them as a
#: level, so its headline keeps the family mix fixed (families_ci_* null).
Flag = Literal["zero-rule", "one-sided", "no-estimate", "boundary", "few-tasks", "too-few-tasks", "excluded",
               "few-families"]


class ResidualRow(BaseModel):
    """One row of the residual table. Infinite interval ends mean a one-sided interval.

    ``ci_low``/``ci_high`` is the headline interval for the population ``ci_estimand``
    names: ``tasks: fixed`` (task rows: this task) or ``tasks: sampled`` (family/all rows:
    the population of tasks the row's tasks stand for; null with ``ci_method =
    "too-few-tasks"`` when the row has no family of ≥ 2 tasks). ``trial_ci_low``/
    ``trial_ci_high`` is always ``tasks: fixed`` (these tasks only).
    """

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
    ci_estimand: Estimand
    trial_ci_low: float | None
    trial_ci_high: float | None
    se_delta: float | None
    ci_method: str
    trial_ci_method: str
    df: float | None  # degrees of freedom of a t-based tasks-sampled interval
    level: float
    n_boot: int
    zero_rule: ZeroRule
    zero_rule_applied: bool
    n_tasks: int
    n_excluded: int
    quadrant: Quadrant | None
    bound: BoundSide | None = None
    bound_value: float | None = None
    flags: list[Flag] = []
    stage_terms: list[float | None] | None = None
    stage_term_ci: list[tuple[float | None, float | None]] | None = None
    # `all` rows with ≥ FAMILY_LEVEL_MIN families: families resampled too (family → task → trial), the
    # population of families the study's families stand for (docs/statistics.md §7.6).
    families_ci_low: float | None = None
    families_ci_high: float | None = None
    families_df: float | None = None


def _f(x: float) -> float | None:
    """NaN (undefined) → None; ±inf stays (a one-sided interval end)."""
    return None if x is None or np.isnan(x) else float(x)


def _var_p_expected(e: TaskEstimate) -> float:
    """Delta variance of P̂_exp = Π q̂_i: Σ_i (Π_{j≠i} q_j)² q_i(1−q_i)/m_i (finite even if a q is 0)."""
    return var_p_expected(np.array(e.q), np.array(e.checkpoint_m))


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


def _one_sided(bound: BoundSide | None, value: float | None) -> tuple[float, float]:
    """The interval an undefined Γ is reported with: its one-sided bound, or (−inf, inf)
    when nothing can be said (no success on either side)."""
    if bound == "lower" and value is not None:
        return value, math.inf
    if bound == "upper" and value is not None:
        return -math.inf, value
    return -math.inf, math.inf


@dataclass(frozen=True)
class _TaskValues:
    """A task's point, tasks-fixed interval and flags (shared by its task row and a
    family row that holds only this task)."""

    gamma: float | None
    low: float
    high: float
    method: str
    bound: BoundSide | None
    bound_value: float | None
    flags: list[str]
    stage_ci: list[tuple[float | None, float | None]]


def _boundary(t: TaskOutcomes) -> bool:
    """Some count of the task is at m (every trial passed): its interval rests on the Jeffreys limit there."""
    return bool(np.any(t.checkpoint_k == t.checkpoint_m) or t.passed[-1] == t.m0)


class _LazyValues(dict):
    """Task values by task index, each computed on first use."""

    def __init__(self, compute: Callable[[int], "_TaskValues"]):
        super().__init__()
        self._compute = compute

    def __missing__(self, j: int) -> "_TaskValues":
        self[j] = value = self._compute(j)
        return value


def _task_values(
    t: TaskOutcomes, e: TaskEstimate, level: float, q_lim: tuple[np.ndarray, np.ndarray], r_lim: tuple[np.ndarray, np.ndarray]
) -> _TaskValues:
    """Γ̂ with its MOVER–Jeffreys interval, or the exact one-sided bound when a raw count is 0.

    ``q_lim``/``r_lim`` are the Jeffreys log-limits of the task's checkpoint and natural
    conditional proportions (:func:`~hrbench.stats.cluster.jeffreys_log_limits`). Under
    every rule a task whose raw P̂_obs or some raw q̂_i is 0 gets ``gamma = None``:
    smoothing would invent a finite residual there (issue 8: an agent that never passes
    got Γ = −2.6 [−2.6, −2.6]). What the data do say is a bound (``gamma_bound``).
    """
    flags: list[str] = ["boundary"] if _boundary(t) else []
    with np.errstate(divide="ignore"):  # raw rules: ln 0 = −inf, its stage term is None anyway
        log_q = np.log(np.asarray(e.q))
        log_r = np.log(np.array([np.nan if v is None else v for v in e.r]))
    # Each stage term ln q_i − ln r_i is a two-term MOVER interval (vectorized over stages).
    with np.errstate(invalid="ignore"):
        down = np.sqrt(np.maximum(log_q - q_lim[0], 0) ** 2 + np.maximum(r_lim[1] - log_r, 0) ** 2)
        up = np.sqrt(np.maximum(q_lim[1] - log_q, 0) ** 2 + np.maximum(log_r - r_lim[0], 0) ** 2)
    stage_ci = [
        (None, None) if term is None else (_f(term - d), _f(term + u))
        for term, d, u in zip(e.stage_terms, down.tolist(), up.tolist())
    ]
    if e.excluded:
        return _TaskValues(None, math.nan, math.nan, "excluded", None, None, ["zero-rule", "excluded", *flags], stage_ci)
    if e.zero_rule_applied:  # a raw proportion is 0: Γ itself is not estimable, a bound may be
        raw = e if e.zero_rule in ("bound", "exclude") else estimate_task(t, "bound", level)
        low, high = _one_sided(raw.bound, raw.bound_value)
        extra = ["one-sided"] if raw.bound else ["no-estimate"]
        method = "exact-bound" if raw.bound else "none"
        return _TaskValues(None, low, high, method, raw.bound, raw.bound_value, ["zero-rule", *extra, *flags], stage_ci)
    low, high = _task_interval(t, q_lim, level)
    # The declared rule's point (smoothed) and the raw centre differ by the rule's shrinkage:
    # the interval always holds the point it is printed beside.
    low, high = min(low, e.gamma), max(high, e.gamma)
    return _TaskValues(e.gamma, low, high, "mover-jeffreys", None, None, flags, stage_ci)


def _task_interval(t: TaskOutcomes, q_lim: tuple[np.ndarray, np.ndarray], level: float) -> tuple[float, float]:
    """Tasks-fixed interval of one task's Γ (every raw count > 0): MOVER of ln P_exp and ln P_obs.

    ln P_exp is the sum of the stages' ln q_i, each with its Jeffreys limits; P_obs is one
    binomial proportion, k_0 of m_0 natural rollouts (the product of the chain's conditionals
    telescopes to it), so it gets its own Jeffreys interval — read as S conditional terms it
    counted one binomial's uncertainty S times, each with its own skew (rows of 4–6 stages near
    P = 0.9 covered 0.97–0.985, docs/statistics.md §11). Every term is centred on its raw
    proportion, the estimate its Jeffreys limits are an interval for: centred on the smoothed
    points, the shrinkage of S stages at k = m adds up (S/(2m) on ln P_exp) against one on ln P_obs.
    """
    k, m = t.checkpoint_k, t.checkpoint_m
    k0 = np.array([t.passed[-1]])
    m0 = np.array([t.m0])
    obs_lim = jeffreys_log_limits(k0, m0, level)
    return mover_gamma_interval(np.log(k / m), q_lim, np.log(k0 / m0), obs_lim)



@dataclass(frozen=True, eq=False)
class AggregateInputs:
    """What every interval scheme of the family/all rows starts from (one residual table's tasks)."""

    tasks: list[TaskOutcomes]
    pk: Packed
    pe_rule: np.ndarray  # (T,) the declared rule's per-task P_exp
    po_rule: np.ndarray  # (T,) ... and P_obs
    wmat: np.ndarray  # (T, G) weights × membership, 0 for tasks the rule excludes
    kept: np.ndarray  # (T,) not excluded by the rule
    zero_rule: ZeroRule
    level: float

    def sums(self, raw: bool) -> tuple[np.ndarray, np.ndarray, ZeroRule]:
        """The per-task P's the groups sum, and the rule their Γ follows (raw sums: a 0 is a bound)."""
        if raw:
            pe, po = raw_probabilities(self.pk)
            return pe, po, "bound"
        return self.pe_rule, self.po_rule, self.zero_rule


@dataclass(frozen=True, eq=False)
class GroupIntervals:
    """Per group (each family, then ``all``): the point and the two intervals its row reports."""

    theta: np.ndarray  # (G,) Γ; NaN/±inf where a group's sum is 0
    pe: np.ndarray  # (T,) per-task P_exp the groups sum
    po: np.ndarray
    trial_ci: np.ndarray  # (G, 2) tasks fixed
    trial_method: str
    hier_ci: np.ndarray  # (G, 2) tasks sampled
    hier_df: np.ndarray  # (G,) NaN where the interval has no df
    hier_few: np.ndarray  # (G,) bool: a family of 2–4 tasks rests on the trial-variance floor
    hier_method: str
    # (var_e, var_o) per task when the `all` row's families-sampled interval applies (cluster-t only).
    trial_variances: tuple[np.ndarray, np.ndarray] | None


def mover_intervals(a: AggregateInputs, pe: np.ndarray, po: np.ndarray) -> np.ndarray:
    """(G, 2) tasks-fixed limits: MOVER of the effective-count Jeffreys limits of ln Ē and ln Ō."""
    k0 = np.array([t.passed[-1] for t in a.tasks])
    pk = a.pk
    return np.column_stack(mover_aggregate_intervals(pe, po, pk.k, pk.m, pk.mask, k0, pk.m0, a.wmat, a.level))


def cluster_t(a: AggregateInputs, pe: np.ndarray, po: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                            tuple[np.ndarray, np.ndarray]]:
    """Tasks-sampled cluster-t limits (G, 2), df, few-task flags and the per-task trial variances."""
    pk = a.pk
    k0 = np.array([t.passed[-1] for t in a.tasks])
    var_e, var_o = trial_variances(pk.k, pk.m, pk.mask, k0, pk.m0)
    ct = cluster_t_intervals(pe, po, var_e, var_o, a.wmat, pk.family_index, a.level)
    return np.column_stack([ct.low, ct.high]), ct.df, ct.n_small > 0, (var_e, var_o)


def closed_form_intervals(a: AggregateInputs, raw: bool) -> GroupIntervals:
    """The study's intervals of family/all rows: MOVER (tasks fixed) and cluster-t (tasks sampled).

    ``raw``: groups sum the raw per-task P's (:func:`~hrbench.stats.packed.sums_raw_probabilities`).
    Closed form: no replicate is drawn.
    """
    pe, po, rule = a.sums(raw)
    theta = aggregate_gamma(pe, po, a.wmat, rule)
    hier_ci, df, few, variances = cluster_t(a, pe, po)
    return GroupIntervals(theta, pe, po, mover_intervals(a, pe, po), "mover-effective-jeffreys",
                          hier_ci, df, few, "cluster-t", variances)


def residual_table(
    tasks: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    level: float = 0.95,
    quadrant_thresholds: QuadrantThresholds = QuadrantThresholds(),
    scopes: Sequence[Scope] = ALL_SCOPES,
) -> list[ResidualRow]:
    """Γ_H rows for every task, every family and ``all``, with intervals for both estimands.

    Everything here is what a study declares; the intervals are closed-form (no replicate is
    drawn). The bootstrap schemes kept for comparison are :func:`hrbench.stats.compare.residual_table`.

    Args:
        tasks: task units (checkpoint + natural trials of one agent, one condition).
        zero_rule: pre-declared rule for zero / boundary counts (smooths defined logs;
            a raw count of 0 always makes Γ a bound, docs/statistics.md §3). Family/all rows
            sum the raw per-task P's under ``jeffreys``/``haldane`` (unbiased, so their sums are).
        n_boot: the study's declared bootstrap size, recorded in every row.
        level: nominal coverage of every interval.
        quadrant_thresholds: declared thresholds for the quadrant label.
        scopes: which rows to produce.
    """
    return residual_rows(tasks, zero_rule, n_boot, level, quadrant_thresholds, scopes,
                         lambda a: closed_form_intervals(a, sums_raw_probabilities(zero_rule)))


def residual_rows(
    tasks: Sequence[TaskOutcomes],
    zero_rule: ZeroRule,
    n_boot: int,
    level: float,
    quadrant_thresholds: QuadrantThresholds,
    scopes: Sequence[Scope],
    intervals: Callable[[AggregateInputs], GroupIntervals],
) -> list[ResidualRow]:
    """The residual table with the family/all rows' intervals from ``intervals``.

    Task rows are MOVER–Jeffreys (or a bound) under every scheme; ``intervals`` is the
    study's :func:`closed_form_intervals` or a comparison scheme (:mod:`hrbench.stats.compare`).
    """
    tasks = list(tasks)
    ests = [estimate_task(t, zero_rule, level) for t in tasks]
    pk: Packed = pack(tasks)
    T, S = pk.k.shape
    # Jeffreys log-limits of every checkpoint and natural-conditional proportion at once.
    passed = np.zeros((T, S), np.int64)
    reached = np.zeros((T, S), np.int64)
    for j, t in enumerate(tasks):
        passed[j, : t.n_stages], reached[j, : t.n_stages] = t.passed, t.reached
    q_lim = jeffreys_log_limits(pk.k, pk.m, level)
    r_lim = jeffreys_log_limits(passed, reached, level)
    # Task values only where a row shows them (task rows, one-task groups): an aggregate-only table (the
    # claims' Monte Carlo, the planner's simulations) skips their per-task intervals and bounds.
    values = _LazyValues(lambda j: _task_values(
        tasks[j], ests[j], level, (q_lim[0][j, : tasks[j].n_stages], q_lim[1][j, : tasks[j].n_stages]),
        (r_lim[0][j, : tasks[j].n_stages], r_lim[1][j, : tasks[j].n_stages])))
    names, member = group_matrix(pk)
    kept = np.array([not e.excluded for e in ests])
    wmat = member * (pk.weights * kept)[:, None]
    pe0 = np.array([e.p_expected for e in ests])
    po0 = np.array([e.p_observed for e in ests])

    rows: list[ResidualRow] = []
    common = dict(level=level, n_boot=n_boot, zero_rule=zero_rule)
    if "task" in scopes:
        for t, e, v in zip(tasks, ests, map(values.__getitem__, range(len(tasks)))):
            rows.append(
                ResidualRow(
                    scope="task", name=t.name, family=t.family, p_expected=e.p_expected, p_observed=e.p_observed,
                    gamma=v.gamma, ci_low=_f(v.low), ci_high=_f(v.high), ci_estimand="tasks: fixed",
                    trial_ci_low=_f(v.low), trial_ci_high=_f(v.high), se_delta=e.se_delta,
                    ci_method=v.method, trial_ci_method=v.method, df=None,
                    zero_rule_applied=e.zero_rule_applied, n_tasks=1, n_excluded=int(e.excluded),
                    quadrant=quadrant(e.p_expected, e.p_observed, quadrant_thresholds),
                    bound=v.bound, bound_value=v.bound_value, flags=v.flags,
                    stage_terms=e.stage_terms, stage_term_ci=v.stage_ci, **common,
                )
            )
    agg_scopes = [s for s in ("family", "all") if s in scopes]
    if not agg_scopes:
        return rows

    gi = intervals(AggregateInputs(tasks, pk, pe0, po0, wmat, kept, zero_rule, level))
    theta, pe_g, po_g = gi.theta, gi.pe, gi.po
    raw_ests: list[TaskEstimate] | None = None

    for g, name in enumerate(names):
        scope: Scope = "all" if g == len(names) - 1 else "family"
        if scope not in agg_scopes:
            continue
        in_group = member[:, g] > 0
        idx = np.flatnonzero(in_group & kept)
        base = dict(
            scope=scope, name=name, family=None if scope == "all" else name, ci_estimand="tasks: sampled",
            zero_rule_applied=any(ests[i].zero_rule_applied for i in np.flatnonzero(in_group)),
            n_tasks=int(idx.size), n_excluded=int(np.sum(in_group & ~kept)), **common,
        )
        if idx.size <= 1:
            # One task stands for no population: the row *is* its task row (same point, same
            # tasks-fixed interval), and says that no tasks-sampled interval exists.
            if idx.size == 0:
                v = _TaskValues(None, math.nan, math.nan, "excluded", None, None, ["excluded"], [])
                e = None
            else:
                v, e = values[idx[0]], ests[idx[0]]
            rows.append(ResidualRow(
                p_expected=e.p_expected if e else None, p_observed=e.p_observed if e else None, gamma=v.gamma,
                ci_low=None, ci_high=None, trial_ci_low=_f(v.low), trial_ci_high=_f(v.high),
                se_delta=e.se_delta if e else None, ci_method="too-few-tasks", trial_ci_method=v.method, df=None,
                quadrant=quadrant(e.p_expected, e.p_observed, quadrant_thresholds) if e else None,
                bound=v.bound, bound_value=v.bound_value, flags=[*v.flags, "too-few-tasks"], **base,
            ))
            continue
        group_ests = [ests[i] for i in idx]
        w = pk.weights[idx]
        p_exp = float(np.dot(w, pe_g[idx]) / w.sum())
        p_obs = float(np.dot(w, po_g[idx]) / w.sum())
        flags: list[str] = ["zero-rule"] if base["zero_rule_applied"] else []
        if any(_boundary(tasks[i]) for i in idx):
            flags.append("boundary")
        families: dict = {}
        if scope == "all" and np.isfinite(theta[g]):
            n_families = np.unique(pk.family_index[idx]).size
            if n_families >= FAMILY_LEVEL_MIN and gi.trial_variances is not None:
                var_e, var_o = gi.trial_variances
                fam = families_sampled_interval(pe_g, po_g, var_e, var_o, wmat[:, g], pk.family_index, level)
                if fam is not None:
                    families = dict(families_ci_low=fam[0], families_ci_high=fam[1], families_df=fam[2])
            elif n_families >= 2:
                flags.append("few-families")
        if np.isfinite(theta[g]):
            gamma = float(theta[g])
            t_low, t_high = gi.trial_ci[g]
            h_low, h_high, df = gi.hier_ci[g, 0], gi.hier_ci[g, 1], _f(gi.hier_df[g])
            method = gi.hier_method
            if np.isnan(h_low):
                method, df = "too-few-tasks", None
                flags.append("too-few-tasks")
            elif (df is not None and df < FEW_TASKS_DF) or gi.hier_few[g]:
                flags.append("few-tasks")
            bound = bound_value = None
            t_method = gi.trial_method
        else:  # every task of the group has a raw zero on one side: a bound for these tasks, nothing more
            if raw_ests is None:
                raw_ests = [e if zero_rule in ("bound", "exclude") else estimate_task(t, "bound", level)
                            for t, e in zip(tasks, ests)]
            gamma = None
            bound, bound_value = _aggregate_bound([raw_ests[i] for i in idx], w, level)
            t_low, t_high = _one_sided(bound, bound_value)
            h_low = h_high = math.nan
            df, method = None, "none"
            t_method = "exact-bound" if bound else "none"
            flags.append("one-sided" if bound else "no-estimate")
        rows.append(ResidualRow(
            p_expected=p_exp, p_observed=p_obs, gamma=gamma, ci_low=_f(h_low), ci_high=_f(h_high),
            trial_ci_low=_f(t_low), trial_ci_high=_f(t_high),
            se_delta=aggregate_delta_se(group_ests, w), ci_method=method, trial_ci_method=t_method, df=df,
            quadrant=quadrant(p_exp, p_obs, quadrant_thresholds), bound=bound, bound_value=bound_value,
            flags=flags, **families, **base,
        ))
    return rows
