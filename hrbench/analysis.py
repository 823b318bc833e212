"""From trial tables to the method's tables: stage estimates, expected, observed, residuals.

Thin glue between stored trial rows and the pure estimators in `hrbench.stats`;
every number is computed there. Every estimator takes its estimand (`Estimand`: the
condition whose natural rollouts are observed, the checkpoint protocol whose trials give
q̂, the zero rule and the baseline model) as an argument, so any number can be recomputed
under another admissible choice. Sim agents' closed-form truth is attached beside the
estimates so the pipeline can be checked against it.

Trials that ended in `harness_error` have no valid result and are left out of every
denominator (as the depth paper does, App. I); their number is reported beside the estimates.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from hrbench.design import StudyDesign
from hrbench.protocol import CheckpointProtocol, Study
from hrbench.stats import (
    StageGraph, TaskOutcomes, estimate_task, p_expected, residual_table, smoothed_proportion,
    wilson_interval,
)
from hrbench.stats.baselines import Baseline, BaselineKind
from hrbench.stats.data import ZeroRule
from hrbench.tasks.model import Task


class MissingTrials(ValueError):
    """Trials this pre-registration needs are not in the tables (says which to materialize)."""


class ExpectedMismatch(ValueError):
    """The registered P_expected differs from a recomputation from the same trials."""


class Estimand(BaseModel):
    """What one Γ estimates: which rollouts, which checkpoints, which zero rule and baseline model."""

    model_config = ConfigDict(frozen=True)
    condition: str
    protocol: CheckpointProtocol
    zero_rule: ZeroRule
    baseline_model: BaselineKind

    @classmethod
    def declared(cls, study: Study, condition: str) -> "Estimand":
        """The pre-registered estimand of a condition."""
        return cls(condition=condition, protocol=study.checkpoint_protocol(condition), zero_rule=study.zero_rule,
                   baseline_model=study.baseline_model)


def declared_estimands(study: Study) -> list[Estimand]:
    return [Estimand.declared(study, c) for c in study.conditions]


def _valid(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[trials["exit_reason"] != "harness_error"]


def harness_errors(trials: pd.DataFrame) -> int:
    """Trials without a valid result (left out of every estimate)."""
    return int((trials["exit_reason"] == "harness_error").sum()) if len(trials) else 0


def _checkpoint_passes(design: StudyDesign, checkpoint: pd.DataFrame, protocol: CheckpointProtocol,
                       task: str) -> tuple[np.ndarray, ...]:
    """0/1 outcomes per stage of this study version's checkpoint trials under a protocol, stages in path order."""
    phash = protocol.protocol_hash()
    rows = _valid(checkpoint[(checkpoint["prereg_sha256"] == design.prereg_sha256) & (checkpoint["protocol"] == phash)
                             & (checkpoint["task"] == task)])
    stages = design.task(task).stages
    passes = tuple(rows[rows["stage"] == s.name].sort_values("trial_index")["passed"].to_numpy(dtype=np.int64)
                   for s in stages)
    missing = [s.name for s, p in zip(stages, passes) if p.size == 0]
    if missing:
        raise MissingTrials(f"no valid checkpoint trials of pre-registration {design.prereg_sha256[:12]} (protocol "
                            f"{phash}) for task {task!r}, stages {missing}: materialize checkpoint_trials for that "
                            "partition (trials that ended in harness_error are retried on the next run)")
    return passes


def task_outcomes(design: StudyDesign, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                  estimand: Estimand) -> list[TaskOutcomes]:
    """Per-task trial outcomes of one agent under one estimand, stages in path order."""
    condition = estimand.condition
    nat = _valid(natural[(natural["prereg_sha256"] == design.prereg_sha256) & (natural["condition"] == condition)])
    outcomes = []
    for task in design.tasks:
        t_nat = nat[nat["task"] == task.name]
        if t_nat.empty:
            raise MissingTrials(f"no valid natural trials of pre-registration {design.prereg_sha256[:12]} for task "
                                f"{task.name!r} ({condition}): materialize natural_trials for that partition")
        passes = _checkpoint_passes(design, checkpoint, estimand.protocol, task.name)
        outcomes.append(TaskOutcomes(
            name=task.name, family=task.family, weight=design.weight(task.name), checkpoint_passes=passes,
            natural_depths=t_nat.sort_values("trial_index")["stages_passed"].to_numpy(dtype=np.int64),
        ))
    return outcomes


def task_p_expected(task: Task, q: list[float], baseline_model: BaselineKind, seed: int) -> Baseline:
    """P_expected of one task from its stage estimates, under the baseline model (stats.p_expected).

    A rollout stops at its first failed stage and the harness allows no retries, so the
    simulator's graph is the task's path of stages (on which it agrees with the product).
    """
    graph = StageGraph.path(q, [s.name for s in task.stages]) if baseline_model == "checkpoint_simulator" else None
    return p_expected(q, baseline_model, graph, seed=seed)


def stage_estimates(design: StudyDesign, agent: str, checkpoint: pd.DataFrame,
                    estimands: list[Estimand] | None = None) -> pd.DataFrame:
    """q̂_i with Wilson intervals per condition, task and stage (checkpoint trials only)."""
    rows = []
    for est in estimands or declared_estimands(design.study):
        phash = est.protocol.protocol_hash()
        for task in design.tasks:
            truth = design.truth(agent, task.name, est.condition, est.protocol)
            for s, passes in zip(task.stages, _checkpoint_passes(design, checkpoint, est.protocol, task.name)):
                k, m = int(passes.sum()), int(passes.size)
                low, high = wilson_interval(k, m, design.study.bootstrap.level)
                rows.append({
                    "agent": agent, "condition": est.condition, "protocol": phash, "task": task.name,
                    "family": task.family, "stage": s.name, "stage_index": s.index, "k": k, "m": m,
                    "q_hat": smoothed_proportion(k, m, est.zero_rule), "q_ci_low": low, "q_ci_high": high,
                    "true_q": truth.q[s.index] if truth else None,
                })
    return design.stamp(pd.DataFrame(rows))


def expected_success(design: StudyDesign, agent: str, estimates: pd.DataFrame) -> pd.DataFrame:
    """P_expected per condition and task, from the stage estimates, under the declared baseline model."""
    model = design.study.baseline_model
    rows = []
    for (condition, task), group in estimates.groupby(["condition", "task"], sort=False):
        t = design.task(task)
        est = Estimand.declared(design.study, condition)
        baseline = task_p_expected(t, list(group.sort_values("stage_index")["q_hat"]), model, design.study.seed)
        truth = design.truth(agent, task, condition, est.protocol)
        rows.append({
            "agent": agent, "condition": condition, "task": task, "family": group["family"].iloc[0],
            "weight": design.weight(task), "n_stages": len(group), "baseline_model": model,
            "p_expected": baseline.p_expected, "mc_se": baseline.mc_se,
            "needs_compatibility": baseline.needs_compatibility,
            "true_p_expected": truth.p_expected if truth else None,
        })
    return design.stamp(pd.DataFrame(rows))


def observed_success(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """r̂_i = passed_i / reached_i per stage and P̂_observed per task, from natural rollouts."""
    rows = []
    for est in declared_estimands(design.study):
        for t in task_outcomes(design, checkpoint, natural, est):
            e = estimate_task(t, est.zero_rule)
            truth = design.truth(agent, t.name, est.condition, est.protocol)
            for s in design.task(t.name).stages:
                rows.append({
                    "agent": agent, "condition": est.condition, "task": t.name, "family": t.family,
                    "stage": s.name, "stage_index": s.index, "reached": e.reached[s.index],
                    "passed": e.passed[s.index], "r_hat": e.r[s.index],
                    "true_r": truth.r[s.index] if truth else None,
                    "m0": int(t.natural_depths.size), "k0": int((t.natural_depths == t.n_stages).sum()),
                    "p_observed": e.p_observed, "true_p_observed": truth.p_observed if truth else None,
                })
    return design.stamp(pd.DataFrame(rows))


def check_registered_expected(design: StudyDesign, outcomes: list[TaskOutcomes], estimand: Estimand,
                              registered: pd.DataFrame) -> dict[str, float]:
    """The registered P_expected of every task, checked against a recomputation from the same trials.

    Γ is composed from the registered prediction; a registered value that the trials do not
    reproduce (a changed table, another baseline model) must stop the residual, not bend it.
    """
    mine = registered[(registered["prereg_sha256"] == design.prereg_sha256)
                      & (registered["condition"] == estimand.condition)]
    values = dict(zip(mine["task"], mine["p_expected"]))
    for t in outcomes:
        if t.name not in values:
            raise MissingTrials(f"no registered expected_success for task {t.name!r} ({estimand.condition}) of "
                                f"pre-registration {design.prereg_sha256[:12]}: materialize expected_success first")
        task = design.task(t.name)
        q = list(estimate_task(t, estimand.zero_rule).q)
        again = task_p_expected(task, q, estimand.baseline_model, design.study.seed)
        # The simulator draws from its seed: equal inputs give the identical number, so any gap is a change.
        if not np.isclose(values[t.name], again.p_expected, rtol=1e-9, atol=1e-12):
            raise ExpectedMismatch(
                f"registered P_expected of task {t.name!r} ({estimand.condition}) is {values[t.name]:.6g}, but "
                f"its checkpoint trials give {again.p_expected:.6g} under {estimand.baseline_model}: the stored "
                "expected_success does not belong to these trials; re-materialize stage_estimates and "
                "expected_success")
        product = p_expected(q, "product").p_expected
        if estimand.baseline_model == "checkpoint_simulator" and again.mc_se is not None and \
                abs(again.p_expected - product) > 4 * again.mc_se:
            raise ExpectedMismatch(
                f"task {t.name!r}: the checkpoint simulator gives P_expected {again.p_expected:.4g}, the product "
                f"{product:.4g}; the residual intervals resample the product, so this study's graph (retries, "
                "branches) cannot be bootstrapped yet: use baseline_model 'product'")
    return values


def residual_frame(design: StudyDesign, agent: str, outcomes: list[TaskOutcomes], estimand: Estimand) -> pd.DataFrame:
    """Γ̂ with intervals per task, family and overall under one estimand, with the sim truth of the same."""
    study = design.study
    rows = residual_table(outcomes, zero_rule=estimand.zero_rule, n_boot=study.bootstrap.n_boot,
                          seed=study.bootstrap.seed, level=study.bootstrap.level,
                          quadrant_thresholds=study.quadrant)
    # Truth of the same estimand: over the tasks the estimate kept (the `exclude` rule drops some).
    kept = [t for t in outcomes if not estimate_task(t, estimand.zero_rule).excluded]
    truths = {t.name: design.truth(agent, t.name, estimand.condition, estimand.protocol) for t in kept}
    weights = {t.name: t.weight for t in outcomes}
    families = {t.name: t.family for t in outcomes}
    table = pd.DataFrame([r.model_dump() for r in rows])
    table.insert(0, "condition", estimand.condition)
    table.insert(0, "agent", agent)
    table["true_gamma"] = [
        _true_gamma(scope, name, truths, weights, families) for scope, name in zip(table["scope"], table["name"])
    ]
    for column in ("stage_terms", "stage_term_ci"):
        if column in table:
            table[column] = [json.dumps(v) if v is not None else None for v in table[column]]
    return table


def horizon_residuals(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                      expected: pd.DataFrame) -> pd.DataFrame:
    """Γ̂ with intervals for every task, family and overall, per condition, from the registered P_expected."""
    frames = []
    for est in declared_estimands(design.study):
        outcomes = task_outcomes(design, checkpoint, natural, est)
        registered = check_registered_expected(design, outcomes, est, expected)
        table = residual_frame(design, agent, outcomes, est)
        is_task = table["scope"] == "task"
        table.loc[is_task, "p_expected"] = table.loc[is_task, "name"].map(registered)
        frames.append(table)
    return design.stamp(pd.concat(frames, ignore_index=True))


def _true_gamma(scope: str, name: str, truths: dict, weights: dict, families: dict) -> float | None:
    """Truth of the same estimand: compose within task, aggregate with the same weights."""
    if any(t is None for t in truths.values()):
        return None
    members = {"task": [name], "family": [t for t in truths if families[t] == name], "all": list(truths)}[scope]
    if not members or any(m not in truths for m in members):
        return None  # an excluded task (or a family of them) has no estimate to compare with
    w = np.array([weights[t] for t in members])
    p_exp = float(np.dot(w, [truths[t].p_expected for t in members]) / w.sum())
    p_obs = float(np.dot(w, [truths[t].p_observed for t in members]) / w.sum())
    return float(np.log(p_exp / p_obs))


def current_residuals(design: StudyDesign, residuals: pd.DataFrame) -> pd.DataFrame:
    """The rows of this pre-registration and its declared agents; every declared agent must be there.

    A store may hold other study versions or agents (an output directory reused, a shared Dagster
    instance); a report must never mix them in, nor silently leave an agent out.
    """
    mine = residuals[(residuals["prereg_sha256"] == design.prereg_sha256)] if len(residuals) else residuals
    declared = [a.id for a in design.study.agents]
    missing = [a for a in declared if a not in set(mine["agent"] if len(mine) else [])]
    if missing:
        raise MissingTrials(f"no horizon_residuals of pre-registration {design.prereg_sha256[:12]} for agents "
                            f"{missing}: materialize horizon_residuals for them first")
    return mine[mine["agent"].isin(declared)]
