"""The residual table: Γ_H per task, per family and overall, with intervals.

Aggregation (paper §3.2, DESIGN §7): compose within each task first, then
P_exp,F = Σ w_t P_exp,t / Σ w_t and P_obs,F likewise with the *same* weights,
Γ_F = ln(P_exp,F / P_obs,F). Stage averages are never multiplied.

Aggregates sum unbiased (raw) per-task P's by default; task rows use the
declared zero rule (docs/statistics.md §6 and §11 for why). A raw count of 0
that makes a log undefined gives ``gamma = None`` and a one-sided bound, under
every rule.

Intervals, each labelled with its estimand (``ci_estimand``): task rows get the
MOVER–Jeffreys interval (``tasks: fixed``); family and overall rows get the
cluster-t interval (``tasks: sampled``: the population of tasks they stand for;
none for a row without a family of ≥ 2 tasks) as the headline, and the
trial-level bootstrap (``tasks: fixed``) beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import stats

from hrbench.stats.bootstrap import (
    CiMethod,
    Packed,
    TrialBank,
    aggregate_gamma,
    bca_probs,
    column_quantiles,
    expanded_z,
    group_matrix,
    hierarchical_gammas,
    jackknife_acceleration,
    pack,
    rescaled_task_resample_gammas,
    task_resample_gammas,
    trial_bank,
    trial_variants,
)
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


def _percentile_probs(level: float) -> np.ndarray:
    return np.array([(1 - level) / 2, (1 + level) / 2])


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
FixedInterval = Literal["mover", "bootstrap"]
HierarchicalScheme = Literal["cluster_t", "tasks_rescaled", "tasks_then_trials", "tasks_only"]
_HIER_LABEL = {
    "cluster_t": "cluster-t",
    "tasks_rescaled": "hierarchical",
    "tasks_then_trials": "two-stage-hierarchical",
    "tasks_only": "task-resample",
}


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

    theta: np.ndarray  # (G,) NaN/±inf where a group's sum is 0
    trial_reps: np.ndarray  # (B, G)
    hier_reps: np.ndarray | None  # (B, G); None for the analytic cluster-t scheme
    accel_tr: np.ndarray | None  # (G,) BCa accelerations of the trial-level interval, or None
    pe: np.ndarray  # (T,) per-task P_exp the groups sum
    po: np.ndarray
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
    """Γ per group with its trial-level (and bootstrap hierarchical) replicates (docs/statistics.md §6–7).

    Under ``aggregate="unbiased"`` with a smoothing rule, groups sum the raw per-task
    P's and the bank's raw replicates; a group whose raw sum is 0 has an undefined Γ
    (reported as a bound, never a smoothed stand-in). Equal ``hier_seed`` gives equal
    task draws, which is what pairs two sides of a contrast.
    """
    if hierarchical not in _HIER_LABEL:
        raise ValueError(f"unknown hierarchical scheme {hierarchical!r}; choose one of {tuple(_HIER_LABEL)}")
    raw = uses_raw_aggregate(zero_rule, aggregate)
    pe, po = raw_probabilities(pk) if raw else (pe_rule, po_rule)
    b = bank.raw() if raw else bank
    rule: ZeroRule = "bound" if raw else zero_rule
    theta = aggregate_gamma(pe, po, wmat, rule)
    trial_reps = aggregate_gamma(b.p_exp[:, :n_boot].T, b.p_obs[:, :n_boot].T, wmat, rule)
    weights = pk.weights * kept
    hier_reps = None
    if hierarchical == "tasks_then_trials":
        hier_reps = hierarchical_gammas([b], pk, n_boot, hier_seed, rule, weights)[0]
    elif hierarchical == "tasks_only":
        hier_reps = task_resample_gammas(pe, po, pk, n_boot, hier_seed, weights)
    elif hierarchical == "tasks_rescaled":
        hier_reps = rescaled_task_resample_gammas(pe, po, pk, n_boot, hier_seed, weights, b, rule)
    accel_tr = _trial_jackknife_aggregate(tasks, pe, po, wmat, rule) if bca else None
    df = None
    if hierarchical == "tasks_rescaled":
        live = weights > 0
        n_f = np.bincount(pk.family_index[live], minlength=len(pk.families))
        # Families with one task contribute trial-level (not between-task) noise: no df.
        per_f = np.where(n_f > 1, n_f - 1, 0).astype(np.float64)
        df = np.append(per_f, per_f.sum())
    return AggregateReplicates(theta, trial_reps, hier_reps, accel_tr, pe, po, df)


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


def median_shift(reps: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Median of the finite replicates minus the point estimate, per column (0 where undefined).

    A boundary count is resampled from its Jeffreys mean, not from k/m (bootstrap.py), which
    moves the replicates of a sum of raw P's off the point by about 1/(2m) per boundary
    stage; with many tasks that shift is comparable to the interval. The percentile ends
    are moved back by it, so the interval is centred on the point it is reported with.
    """
    shift = np.zeros(reps.shape[1])
    for g in range(reps.shape[1]):
        finite = reps[:, g][np.isfinite(reps[:, g])]
        if finite.size and np.isfinite(theta[g]):
            shift[g] = np.median(finite) - theta[g]
    return shift


def residual_table(
    tasks: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    quadrant_thresholds: QuadrantThresholds = QuadrantThresholds(),
    ci_method: CiMethod = "percentile",
    scopes: Sequence[Scope] = ALL_SCOPES,
    hierarchical: HierarchicalScheme = "cluster_t",
    aggregate: AggregateRule = "unbiased",
    fixed_interval: FixedInterval = "mover",
) -> list[ResidualRow]:
    """Γ_H rows for every task, every family and ``all``, with intervals for both estimands.

    Args:
        tasks: task units (checkpoint + natural trials of one agent, one condition).
        zero_rule: pre-declared rule for zero / boundary counts (smooths defined logs;
            a raw count of 0 always makes Γ a bound, docs/statistics.md §3).
        n_boot: bootstrap replicates of the bootstrap options (``fixed_interval="bootstrap"``,
            the bootstrap ``hierarchical`` schemes); the defaults draw none.
        seed: seeds everything; equal inputs and seed give equal tables.
        level: nominal coverage of every interval.
        quadrant_thresholds: declared thresholds for the quadrant label.
        ci_method: ``percentile`` (default) or ``bca`` for the tasks-fixed bootstrap
            interval (``fixed_interval="bootstrap"``).
        scopes: which rows to produce.
        hierarchical: tasks-sampled interval of family/all rows. ``cluster_t``
            (default): linearized, CR2 stratified variance with Bell–McCaffrey df and
            a trial-variance floor (:func:`~hrbench.stats.cluster.cluster_t_intervals`);
            the bootstrap schemes ``tasks_rescaled`` (Rao–Wu rescaled task resampling),
            ``tasks_then_trials`` (two-stage) and ``tasks_only`` are kept for comparison
            (docs/statistics.md §7, §11).
        aggregate: per-task P's summed into family/all rows. ``unbiased`` (default):
            under ``jeffreys``/``haldane`` the raw Π k_i/m_i and passed_n/m_0 (unbiased,
            so their sums are); ``smoothed``: the declared rule's P's. Task rows always
            use the declared rule. Under ``bound``/``exclude`` both are raw.
        fixed_interval: tasks-fixed interval of family/all rows. ``mover`` (default):
            MOVER of the effective-count Jeffreys limits of ln Ē and ln Ō
            (:func:`~hrbench.stats.cluster.mover_aggregate_intervals`); ``bootstrap``: the
            trial bootstrap (``ci_method`` percentile or BCa), kept for comparison.
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

    if fixed_interval not in ("mover", "bootstrap"):
        raise ValueError(f"unknown fixed_interval {fixed_interval!r}; choose 'mover' or 'bootstrap'")
    raw = uses_raw_aggregate(zero_rule, aggregate)
    k0 = np.array([t.passed[-1] for t in tasks])
    if fixed_interval == "bootstrap" or hierarchical != "cluster_t":
        bank_seed, hier_seed = np.random.SeedSequence(seed).spawn(2)
        bank = trial_bank(pk, max(n_boot, T), bank_seed, zero_rule, raw=raw)
        agg = aggregate_replicates(tasks, pk, pe0, po0, bank, wmat, kept, n_boot, hier_seed, zero_rule, aggregate,
                                   hierarchical, ci_method == "bca")
        theta, pe_g, po_g = agg.theta, agg.pe, agg.po
    else:  # the defaults are closed-form: no replicate is drawn
        agg = None
        pe_g, po_g = raw_probabilities(pk) if raw else (pe0, po0)
        theta = aggregate_gamma(pe_g, po_g, wmat, "bound" if raw else zero_rule)
    if fixed_interval == "mover":
        trial_ci = np.column_stack(mover_aggregate_intervals(pe_g, po_g, pk.k, pk.m, pk.mask, k0, pk.m0, wmat, level))
        t_label = "mover-effective-jeffreys"
    else:
        trial_ci = _interval(agg.trial_reps, theta, agg.accel_tr, level, ci_method)
        if ci_method == "percentile":
            trial_ci = trial_ci - median_shift(agg.trial_reps, theta)[:, None]
        t_label = f"trial-{ci_method}"
    if hierarchical == "cluster_t":
        var_e, var_o = trial_variances(pk.k, pk.m, pk.mask, k0, pk.m0)
        ct = cluster_t_intervals(pe_g, po_g, var_e, var_o, wmat, pk.family_index, level)
        hier_ci, hier_df, hier_small = np.column_stack([ct.low, ct.high]), ct.df, ct.n_small > 0
    else:
        hier_ci = _interval(agg.hier_reps, theta, None, level, "percentile", agg.df)
        hier_df = agg.df if agg.df is not None else np.full(len(names), np.nan)
        hier_small = np.zeros(len(names), bool)
    # The bootstrap options read percentiles (expanded for the rescaled scheme) whatever ci_method says.
    hier_method = _HIER_LABEL[hierarchical] + ("" if hierarchical == "cluster_t" else "-percentile")
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
            if n_families >= FAMILY_LEVEL_MIN and hierarchical == "cluster_t":
                fam = families_sampled_interval(pe_g, po_g, var_e, var_o, wmat[:, g], pk.family_index, level)
                if fam is not None:
                    families = dict(families_ci_low=fam[0], families_ci_high=fam[1], families_df=fam[2])
            elif n_families >= 2:
                flags.append("few-families")
        if np.isfinite(theta[g]):
            gamma = float(theta[g])
            t_low, t_high = trial_ci[g]
            h_low, h_high, df = hier_ci[g, 0], hier_ci[g, 1], _f(hier_df[g])
            method = hier_method
            if np.isnan(h_low):
                method, df = "too-few-tasks", None
                flags.append("too-few-tasks")
            elif (df is not None and df < FEW_TASKS_DF) or hier_small[g]:
                flags.append("few-tasks")
            bound = bound_value = None
            t_method = t_label
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
