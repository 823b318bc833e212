"""Paired contrasts under the bootstrap schemes kept for comparison (no study selects them).

:func:`paired_difference` is :func:`hrbench.stats.contrasts.paired_difference` with the
``hierarchical`` and ``aggregate`` options of :func:`hrbench.stats.compare.residual_table`: a
hierarchical replicate draws the *same* tasks for both sides, then resamples each side's trials.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
from scipy import stats

from hrbench.stats.compare.bootstrap import column_quantiles, expanded_z, trial_bank
from hrbench.stats.compare.residuals import (
    HIERARCHICAL_LABEL,
    AggregateRule,
    HierarchicalScheme,
    aggregate_replicates,
    uses_raw_aggregate,
)
from hrbench.stats.contrasts import (
    _none,
    DifferenceRow,
    closed_form_difference,
    paired_sides,
)
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.estimate import estimate_task
from hrbench.stats.packed import Packed, group_matrix, pack
from hrbench.stats.residuals import ALL_SCOPES, Scope


def _with_weights(pk: Packed, weights: np.ndarray) -> Packed:
    """``pk`` with side a's weights (weights and families are side a's)."""
    return dataclasses.replace(pk, weights=np.asarray(weights, np.float64))


def paired_difference(
    tasks_a: Sequence[TaskOutcomes],
    tasks_b: Sequence[TaskOutcomes],
    zero_rule: ZeroRule = "jeffreys",
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    scopes: Sequence[Scope] = ALL_SCOPES,
    hierarchical: HierarchicalScheme = "cluster_t",
    aggregate: AggregateRule = "unbiased",
    shared_checkpoint: bool = False,
) -> list[DifferenceRow]:
    """:func:`hrbench.stats.contrasts.paired_difference` with a comparison scheme (module docstring).

    ``hierarchical`` and ``aggregate`` mean what they mean in :func:`hrbench.stats.compare.residual_table`,
    so each side's Γ equals that table's. ``cluster_t`` (default) is the study's closed form (``seed``
    unused); the bootstrap schemes give both sides the same task draws (paired) and percentile intervals.
    """
    tasks_a, tasks_b = paired_sides(tasks_a, tasks_b, shared_checkpoint)
    if hierarchical == "cluster_t":
        return closed_form_difference(tasks_a, tasks_b, zero_rule, n_boot, level, scopes,
                                      uses_raw_aggregate(zero_rule, aggregate), shared_checkpoint)
    if shared_checkpoint:
        raise ValueError("shared_checkpoint needs the closed-form intervals (hierarchical='cluster_t')")
    pk_a, pk_b = pack(tasks_a), pack(tasks_b)
    T = pk_a.n_tasks
    names, member = group_matrix(pk_a)
    est_a = [estimate_task(t, zero_rule, level) for t in tasks_a]
    est_b = [estimate_task(t, zero_rule, level) for t in tasks_b]
    # Under "exclude" a task undefined on either side leaves the pair.
    kept = np.array([not (a.excluded or b.excluded) for a, b in zip(est_a, est_b)])
    wmat = member * (pk_a.weights * kept)[:, None]
    pe_a, po_a = np.array([e.p_expected for e in est_a]), np.array([e.p_observed for e in est_a])
    pe_b, po_b = np.array([e.p_expected for e in est_b]), np.array([e.p_observed for e in est_b])

    seed_a, seed_b, seed_h = np.random.SeedSequence(seed).spawn(3)
    K = max(n_boot, T)
    raw = uses_raw_aggregate(zero_rule, aggregate)
    bank_a = trial_bank(pk_a, K, seed_a, zero_rule, raw=raw)
    bank_b = trial_bank(pk_b, K, seed_b, zero_rule, raw=raw)
    probs = np.array([(1 - level) / 2, (1 + level) / 2])
    rows: list[DifferenceRow] = []
    common = dict(level=level, n_boot=n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        if "task" in scopes:
            reps = (np.log(bank_a.p_exp[:, :n_boot].T) - np.log(bank_a.p_obs[:, :n_boot].T)) - (
                np.log(bank_b.p_exp[:, :n_boot].T) - np.log(bank_b.p_obs[:, :n_boot].T)
            )
            ci = column_quantiles(reps, probs)
            for j, (a, b) in enumerate(zip(est_a, est_b)):
                delta = None if a.gamma is None or b.gamma is None else a.gamma - b.gamma
                rows.append(
                    DifferenceRow(
                        scope="task", name=a.name, gamma_a=a.gamma, gamma_b=b.gamma, delta=delta,
                        ci_low=_none(ci[j, 0]), ci_high=_none(ci[j, 1]),
                        trial_ci_low=_none(ci[j, 0]), trial_ci_high=_none(ci[j, 1]),
                        ci_method="trial-percentile", n_tasks=1, ci_estimand="tasks: fixed",
                        trial_ci_method="trial-percentile", **common,
                    )
                )
    # Same hier seed on both sides: the same task draws (paired); pk_b has pk_a's families and order.
    agg_a = aggregate_replicates(tasks_a, pk_a, pe_a, po_a, bank_a, wmat, kept, n_boot, seed_h, zero_rule, aggregate, hierarchical)
    pk_b_w = pk_b if np.array_equal(pk_b.weights, pk_a.weights) else _with_weights(pk_b, pk_a.weights)
    agg_b = aggregate_replicates(tasks_b, pk_b_w, pe_b, po_b, bank_b, wmat, kept, n_boot, seed_h, zero_rule, aggregate, hierarchical)
    g_a, g_b = agg_a.theta, agg_b.theta
    with np.errstate(invalid="ignore"):
        trial = agg_a.trial_reps - agg_b.trial_reps
        hier = (agg_a.hier_reps, agg_b.hier_reps)
    trial_ci = column_quantiles(trial, probs)
    hier_label = HIERARCHICAL_LABEL[hierarchical]
    with np.errstate(invalid="ignore"):
        hier_probs = probs if agg_a.df is None else stats.norm.cdf(expanded_z(level, agg_a.df, len(names)))
        hier_ci = column_quantiles(hier[0] - hier[1], hier_probs)
    for g, name in enumerate(names):
        scope: Scope = "all" if g == len(names) - 1 else "family"
        if scope not in scopes:
            continue
        finite = np.isfinite(g_a[g]) and np.isfinite(g_b[g])
        rows.append(
            DifferenceRow(
                scope=scope, name=name,
                gamma_a=_none(g_a[g]) if np.isfinite(g_a[g]) else None,
                gamma_b=_none(g_b[g]) if np.isfinite(g_b[g]) else None,
                delta=float(g_a[g] - g_b[g]) if finite else None,
                ci_low=_none(hier_ci[g, 0]), ci_high=_none(hier_ci[g, 1]),
                trial_ci_low=_none(trial_ci[g, 0]), trial_ci_high=_none(trial_ci[g, 1]),
                ci_method=f"{hier_label}-percentile", n_tasks=int(np.sum((member[:, g] > 0) & kept)),
                trial_ci_method="trial-percentile", df=None if agg_a.df is None else _none(agg_a.df[g]), **common,
            )
        )
    return rows
