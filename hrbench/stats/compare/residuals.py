"""The residual table under the interval schemes kept for comparison (no study selects them).

:func:`residual_table` is :func:`hrbench.stats.residuals.residual_table` with the options the
study schema does not offer: the bootstrap tasks-sampled schemes (``hierarchical``), the trial
bootstrap as the tasks-fixed interval (``fixed_interval="bootstrap"``, percentile or BCa) and
sums of the rule's smoothed P's (``aggregate="smoothed"``). Tests and benchmarks read them
beside the closed forms (docs/statistics.md §6, §7.5, §11). Task rows are the same under
every option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy import stats

from hrbench.stats.compare.bootstrap import (
    CiMethod,
    TrialBank,
    bca_probs,
    column_quantiles,
    expanded_z,
    hierarchical_gammas,
    jackknife_acceleration,
    rescaled_task_resample_gammas,
    task_resample_gammas,
    trial_bank,
    trial_variants,
)
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.packed import Packed, aggregate_gamma, raw_probabilities, sums_raw_probabilities
from hrbench.stats.residuals import (
    ALL_SCOPES,
    AggregateInputs,
    GroupIntervals,
    QuadrantThresholds,
    ResidualRow,
    Scope,
    closed_form_intervals,
    cluster_t,
    mover_intervals,
    residual_rows,
)

AggregateRule = Literal["unbiased", "smoothed"]
FixedInterval = Literal["mover", "bootstrap"]
HierarchicalScheme = Literal["cluster_t", "tasks_rescaled", "tasks_then_trials", "tasks_only"]
HIERARCHICAL_LABEL = {
    "cluster_t": "cluster-t",
    "tasks_rescaled": "hierarchical",
    "tasks_then_trials": "two-stage-hierarchical",
    "tasks_only": "task-resample",
}


def uses_raw_aggregate(zero_rule: ZeroRule, aggregate: AggregateRule) -> bool:
    """Whether aggregates sum raw per-task P's (only smoothing rules differ from raw)."""
    if aggregate not in ("unbiased", "smoothed"):
        raise ValueError(f"unknown aggregate {aggregate!r}; choose 'unbiased' or 'smoothed'")
    return aggregate == "unbiased" and sums_raw_probabilities(zero_rule)


def _percentile_probs(level: float) -> np.ndarray:
    return np.array([(1 - level) / 2, (1 + level) / 2])


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
    if hierarchical not in HIERARCHICAL_LABEL:
        raise ValueError(f"unknown hierarchical scheme {hierarchical!r}; choose one of {tuple(HIERARCHICAL_LABEL)}")
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


def _bootstrap_intervals(
    a: AggregateInputs, n_boot: int, seed: int, ci_method: CiMethod, hierarchical: HierarchicalScheme,
    aggregate: AggregateRule, fixed_interval: FixedInterval,
) -> GroupIntervals:
    """Family/all intervals when either of them is a bootstrap (the other may be closed-form)."""
    raw = uses_raw_aggregate(a.zero_rule, aggregate)
    bank_seed, hier_seed = np.random.SeedSequence(seed).spawn(2)
    bank = trial_bank(a.pk, max(n_boot, a.pk.n_tasks), bank_seed, a.zero_rule, raw=raw)
    agg = aggregate_replicates(a.tasks, a.pk, a.pe_rule, a.po_rule, bank, a.wmat, a.kept, n_boot, hier_seed,
                               a.zero_rule, aggregate, hierarchical, ci_method == "bca")
    theta, pe, po = agg.theta, agg.pe, agg.po
    if fixed_interval == "mover":
        trial_ci, t_label = mover_intervals(a, pe, po), "mover-effective-jeffreys"
    else:
        trial_ci = _interval(agg.trial_reps, theta, agg.accel_tr, a.level, ci_method)
        if ci_method == "percentile":
            trial_ci = trial_ci - median_shift(agg.trial_reps, theta)[:, None]
        t_label = f"trial-{ci_method}"
    G = theta.size
    if hierarchical == "cluster_t":
        hier_ci, hier_df, hier_few, variances = cluster_t(a, pe, po)
        hier_method = "cluster-t"
    else:
        # The bootstrap schemes read percentiles (expanded for the rescaled scheme) whatever ci_method says.
        hier_ci = _interval(agg.hier_reps, theta, None, a.level, "percentile", agg.df)
        hier_df = agg.df if agg.df is not None else np.full(G, np.nan)
        hier_few, variances = np.zeros(G, bool), None
        hier_method = HIERARCHICAL_LABEL[hierarchical] + "-percentile"
    return GroupIntervals(theta, pe, po, trial_ci, t_label, hier_ci, hier_df, hier_few, hier_method, variances)


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
    """The residual table with a comparison scheme for the family/all rows (module docstring).

    With every option at its default this is the study's table
    (:func:`hrbench.stats.residuals.residual_table`) exactly.

    Args:
        n_boot: bootstrap replicates of the bootstrap options (none drawn at the defaults).
        seed: seeds every replicate; equal inputs and seed give equal tables.
        ci_method: ``percentile`` or ``bca`` for ``fixed_interval="bootstrap"``.
        hierarchical: tasks-sampled interval: ``cluster_t`` (the study's), or the bootstrap
            schemes ``tasks_rescaled`` (Rao–Wu rescaled task resampling), ``tasks_then_trials``
            (two-stage) and ``tasks_only`` (docs/statistics.md §7.5, §11).
        aggregate: ``unbiased`` (the study's: raw P's under ``jeffreys``/``haldane``) or
            ``smoothed`` (the declared rule's P's).
        fixed_interval: ``mover`` (the study's) or ``bootstrap`` (the trial bootstrap, ``ci_method``).
    """
    if fixed_interval not in ("mover", "bootstrap"):
        raise ValueError(f"unknown fixed_interval {fixed_interval!r}; choose 'mover' or 'bootstrap'")
    if hierarchical not in HIERARCHICAL_LABEL:
        raise ValueError(f"unknown hierarchical scheme {hierarchical!r}; choose one of {tuple(HIERARCHICAL_LABEL)}")
    raw = uses_raw_aggregate(zero_rule, aggregate)

    def intervals(a: AggregateInputs) -> GroupIntervals:
        if fixed_interval == "mover" and hierarchical == "cluster_t":
            return closed_form_intervals(a, raw)
        return _bootstrap_intervals(a, n_boot, seed, ci_method, hierarchical, aggregate, fixed_interval)

    return residual_rows(tasks, zero_rule, n_boot, level, quadrant_thresholds, scopes, intervals)
