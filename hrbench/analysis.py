"""From trial tables to the method's tables: stage estimates, expected, observed, residuals.

Thin glue between stored trial rows and the pure estimators in `hrbench.stats`;
every number is computed there. Sim agents' closed-form truth is attached beside
the estimates so the pipeline can be checked against it.

Trials that ended in `harness_error` have no valid result and are left out of every
denominator (as the depth paper does, App. I); their number is reported beside the estimates.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hrbench.stats import (
    QuadrantThresholds, TaskOutcomes, estimate_task, residual_table, smoothed_proportion, wilson_interval,
)
from hrbench.agents.sim import population_truth
from hrbench.protocol import SimAgentSpec
from hrbench.study_run import StudyRun


class MissingTrials(ValueError):
    """Trials this pre-registration needs are not in the tables (says which to materialize)."""


def _checkpoint_passes(run: StudyRun, checkpoint: pd.DataFrame, condition: str, task: str) -> tuple[np.ndarray, ...]:
    """0/1 outcomes per stage of this study version's checkpoint trials, stages in path order."""
    phash = run.study.checkpoint_protocol(condition).protocol_hash()
    rows = _valid(checkpoint[(checkpoint["prereg_sha256"] == run.prereg_sha256) & (checkpoint["protocol"] == phash)
                             & (checkpoint["task"] == task)])
    stages = run.task(task).stages
    passes = tuple(rows[rows["stage"] == s.name].sort_values("trial_index")["passed"].to_numpy(dtype=np.int64)
                   for s in stages)
    missing = [s.name for s, p in zip(stages, passes) if p.size == 0]
    if missing:
        raise MissingTrials(f"no valid checkpoint trials of pre-registration {run.prereg_sha256[:12]} (protocol "
                            f"{phash}) for task {task!r}, stages {missing}: materialize checkpoint_trials for that "
                            "partition (trials that ended in harness_error are retried on the next run)")
    return passes


def _valid(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[trials["exit_reason"] != "harness_error"]


def harness_errors(trials: pd.DataFrame) -> int:
    """Trials without a valid result (left out of every estimate)."""
    return int((trials["exit_reason"] == "harness_error").sum()) if len(trials) else 0


def task_outcomes(run: StudyRun, checkpoint: pd.DataFrame, natural: pd.DataFrame, condition: str) -> list[TaskOutcomes]:
    """Per-task trial outcomes of one agent under one condition, stages in path order."""
    nat = _valid(natural[(natural["prereg_sha256"] == run.prereg_sha256) & (natural["condition"] == condition)])
    outcomes = []
    for task in run.tasks:
        t_nat = nat[nat["task"] == task.name]
        if t_nat.empty:
            raise MissingTrials(f"no valid natural trials of pre-registration {run.prereg_sha256[:12]} for task "
                                f"{task.name!r} ({condition}): materialize natural_trials for that partition")
        passes = _checkpoint_passes(run, checkpoint, condition, task.name)
        outcomes.append(TaskOutcomes(
            name=task.name, family=task.family, weight=run.weight(task.name), checkpoint_passes=passes,
            natural_depths=t_nat.sort_values("trial_index")["stages_passed"].to_numpy(dtype=np.int64),
        ))
    return outcomes


def stage_estimates(run: StudyRun, agent: str, checkpoint: pd.DataFrame) -> pd.DataFrame:
    """q̂_i with Wilson intervals per condition, task and stage (checkpoint trials only)."""
    rows = []
    for condition in run.study.conditions:
        phash = run.study.checkpoint_protocol(condition).protocol_hash()
        for task in run.tasks:
            truth = run.truth(agent, task.name, condition)
            for s, passes in zip(task.stages, _checkpoint_passes(run, checkpoint, condition, task.name)):
                k, m = int(passes.sum()), int(passes.size)
                low, high = wilson_interval(k, m, run.study.bootstrap.level)
                rows.append({
                    "agent": agent, "condition": condition, "protocol": phash, "task": task.name,
                    "family": task.family, "stage": s.name, "stage_index": s.index, "k": k, "m": m,
                    "q_hat": smoothed_proportion(k, m, run.study.zero_rule), "q_ci_low": low, "q_ci_high": high,
                    "true_q": truth.q[s.index] if truth else None,
                })
    return run.stamp(pd.DataFrame(rows))


def expected_success(run: StudyRun, agent: str, estimates: pd.DataFrame) -> pd.DataFrame:
    """P_expected per condition and task: the product of the stage estimates along the path."""
    rows = []
    for (condition, task), group in estimates.groupby(["condition", "task"], sort=False):
        truth = run.truth(agent, task, condition)
        rows.append({
            "agent": agent, "condition": condition, "task": task, "family": group["family"].iloc[0],
            "weight": run.weight(task), "n_stages": len(group),
            "p_expected": float(np.prod(group.sort_values("stage_index")["q_hat"].to_numpy())),
            "true_p_expected": truth.p_expected if truth else None,
        })
    return run.stamp(pd.DataFrame(rows))


def observed_success(run: StudyRun, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """r̂_i = passed_i / reached_i per stage and P̂_observed per task, from natural rollouts."""
    rows = []
    for condition in run.study.conditions:
        for t in task_outcomes(run, checkpoint, natural, condition):
            est = estimate_task(t, run.study.zero_rule)
            truth = run.truth(agent, t.name, condition)
            task = run.task(t.name)
            for s in task.stages:
                rows.append({
                    "agent": agent, "condition": condition, "task": t.name, "family": t.family,
                    "stage": s.name, "stage_index": s.index, "reached": est.reached[s.index],
                    "passed": est.passed[s.index], "r_hat": est.r[s.index],
                    "true_r": truth.r[s.index] if truth else None,
                    "m0": int(t.natural_depths.size), "k0": int((t.natural_depths == t.n_stages).sum()),
                    "p_observed": est.p_observed, "true_p_observed": truth.p_observed if truth else None,
                })
    return run.stamp(pd.DataFrame(rows))


def horizon_residuals(run: StudyRun, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """Γ̂ with intervals for every task, family and overall, per condition, with sim truth."""
    study = run.study
    frames = []
    for condition in study.conditions:
        outcomes = task_outcomes(run, checkpoint, natural, condition)
        rows = residual_table(
            outcomes, zero_rule=study.zero_rule, n_boot=study.bootstrap.n_boot, seed=study.bootstrap.seed,
            level=study.bootstrap.level,
            quadrant_thresholds=QuadrantThresholds(high=study.quadrant.high, low=study.quadrant.low),
        )
        # Truth of the same estimand: over the tasks the estimate kept (the `exclude` rule drops some).
        kept = [t for t in outcomes if not estimate_task(t, study.zero_rule).excluded]
        truths = {t.name: run.truth(agent, t.name, condition) for t in kept}
        weights = {t.name: t.weight for t in outcomes}
        families = {t.name: t.family for t in outcomes}
        table = pd.DataFrame([r.model_dump() for r in rows])
        table.insert(0, "condition", condition)
        table.insert(0, "agent", agent)
        table["true_gamma"] = [
            _true_gamma(scope, name, truths, weights, families) for scope, name in zip(table["scope"], table["name"])
        ]
        table["true_gamma_sampled"] = [
            _sampled_truth(run, agent, condition, scope, name, kept) for scope, name in zip(table["scope"], table["name"])
        ]
        for column in ("stage_terms", "stage_term_ci"):
            if column in table:
                table[column] = [json.dumps(v) if v is not None else None for v in table[column]]
        frames.append(table)
    return run.stamp(pd.concat(frames, ignore_index=True))


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


def _sampled_truth(run: StudyRun, agent: str, condition: str, scope: str, name: str,
                   kept: list[TaskOutcomes]) -> float | None:
    """Truth of the tasks-sampled interval of a family/all row (sim agents only; task rows: None).

    Each family's tasks stand for tasks of the same structures with the agent's declared skill
    spread (`population_truth`); family means are combined with the same declared weights, as
    the estimate is. Equals `true_gamma` when the agent declares no skill spread.
    """
    spec = run.study.agent(agent)
    if scope == "task" or not isinstance(spec, SimAgentSpec):
        return None
    members = [t for t in kept if scope == "all" or t.family == name]
    if not members:
        return None
    cond, protocol = run.study.condition(condition), run.study.checkpoint_protocol(condition)
    pops = [population_truth(spec.sim, run.task(t.name), cond, protocol) for t in members]
    w = np.array([t.weight for t in members])
    return float(np.log(np.dot(w, [p[0] for p in pops]) / np.dot(w, [p[1] for p in pops])))


def current_residuals(run: StudyRun, residuals: pd.DataFrame) -> pd.DataFrame:
    """The rows of this pre-registration and its declared agents; every declared agent must be there.

    A store may hold other study versions or agents (an output directory reused, a shared Dagster
    instance); a report must never mix them in, nor silently leave an agent out.
    """
    mine = residuals[(residuals["prereg_sha256"] == run.prereg_sha256)] if len(residuals) else residuals
    declared = [a.id for a in run.study.agents]
    missing = [a for a in declared if a not in set(mine["agent"] if len(mine) else [])]
    if missing:
        raise MissingTrials(f"no horizon_residuals of pre-registration {run.prereg_sha256[:12]} for agents "
                            f"{missing}: materialize horizon_residuals for them first")
    return mine[mine["agent"].isin(declared)]
