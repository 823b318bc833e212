"""From trial tables to the method's tables: stage estimates, expected, observed, residuals.

Thin glue between stored trial rows and the pure estimators in `hrbench.stats`;
every number is computed there. Every estimator takes its estimand (`Estimand`: the
condition whose natural rollouts are observed, the checkpoint protocol whose trials give
q̂, the zero rule and the baseline model) as an argument, so any number can be recomputed
under another admissible choice. Sim agents' closed-form truth is attached beside the
estimates so the pipeline can be checked against it.

Trials whose last attempt had no result (hrbench.exits: `harness_error`, `verifier_error`) are
missing, not failed: they are left out of every denominator (as the depth paper does, App. I), so
every estimator uses m_used, and each table carries m_planned, m_used and m_missing beside the
estimates. A task with a cell (a checkpoint unit, or its natural rollouts) that has no trial with
a result has no estimate: its rows say so (m_used 0) and the aggregates go on without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from hrbench.claims import claims_table, mark_contrast_claims, mark_residual_claims
from hrbench.design import StudyDesign, segments, unit_name
from hrbench.exits import is_missing
from hrbench.protocol import CheckpointProtocol, Decomposition, Study
from hrbench.schemas import INTERVENTION_CONTRASTS
from hrbench.stats import (
    StageGraph, TaskOutcomes, estimate_task, p_expected, paired_difference, residual_table, smoothed_proportion,
    wilson_interval,
)
from hrbench.stats.baselines import Baseline, BaselineKind
from hrbench.stats.data import ZeroRule
from hrbench.stats.estimate import rule_note
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
    decomposition: Decomposition = "stages"

    @classmethod
    def declared(cls, study: Study, condition: str) -> "Estimand":
        """The pre-registered estimand of a condition."""
        return cls(condition=condition, protocol=study.checkpoint_protocol(condition), zero_rule=study.zero_rule,
                   baseline_model=study.baseline_model)


def declared_estimands(study: Study) -> list[Estimand]:
    return [Estimand.declared(study, c) for c in study.condition_names]


def _missing_mask(trials: pd.DataFrame) -> pd.Series:
    return trials["exit_reason"].map(is_missing).astype(bool) if len(trials) else pd.Series([], dtype=bool)


def _valid(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[~_missing_mask(trials)] if len(trials) else trials


def missing_trials(trials: pd.DataFrame) -> int:
    """Trials whose last attempt had no result (left out of every estimate; the next run retries them)."""
    return int(_missing_mask(trials).sum()) if len(trials) else 0


def _by_key(rows: pd.DataFrame, keys: list[str], value: str) -> dict[tuple, np.ndarray]:
    """`value` of the rows per key, in trial_index order (one pass over the table, not one filter per key)."""
    rows = rows.sort_values("trial_index")
    found: dict[tuple, list] = {}
    for *key, v in zip(*(rows[k].tolist() for k in keys), rows[value].tolist()):
        found.setdefault(tuple(key), []).append(v)
    return {k: np.asarray(v, dtype=np.int64) for k, v in found.items()}


class _CheckpointPasses:
    """0/1 outcomes of this study version's valid checkpoint trials under one protocol, per (task, unit)."""

    def __init__(self, design: StudyDesign, checkpoint: pd.DataFrame, protocol: CheckpointProtocol):
        self.design, self.phash = design, protocol.protocol_hash()
        rows = checkpoint[(checkpoint["prereg_sha256"] == design.prereg_sha256)
                          & (checkpoint["protocol"] == self.phash)]
        self._rows = rows.groupby(["task", "stage"]).size().to_dict() if len(rows) else {}
        self._passes = _by_key(_valid(rows), ["task", "stage"], "passed")

    def of(self, task: str, decomposition: Decomposition = "stages") -> tuple[np.ndarray, ...]:
        """Per checkpoint unit (stage, or merged segment) of a task, in path order: the outcomes of its
        trials with a result (m_used of them; empty when every one is missing)."""
        units = [unit_name(u) for u in segments(self.design.task(task), decomposition)]
        absent = [u for u in units if not self._rows.get((task, u))]
        if absent:
            raise MissingTrials(f"no checkpoint trials of pre-registration {self.design.prereg_sha256[:12]} "
                                f"(protocol {self.phash}) for task {task!r}, stages {absent}: materialize "
                                "checkpoint_trials for that partition")
        return tuple(self._passes.get((task, u), np.zeros(0, dtype=np.int64)) for u in units)


@dataclass(frozen=True)
class TrialCounts:
    """Planned and used trials of one task under one estimand: its checkpoint units' and its natural rollouts'."""

    checkpoint_planned: int
    checkpoint_used: tuple[int, ...]  # per checkpoint unit, in path order
    natural_planned: int
    natural_used: int

    @property
    def estimable(self) -> bool:
        """Every cell has at least one trial with a result."""
        return min(self.checkpoint_used) > 0 and self.natural_used > 0

    @property
    def m_planned(self) -> int:
        return self.checkpoint_planned * len(self.checkpoint_used) + self.natural_planned

    @property
    def m_used(self) -> int:
        return sum(self.checkpoint_used) + self.natural_used


def _natural_of(design: StudyDesign, natural: pd.DataFrame, condition: str) -> pd.DataFrame:
    return natural[(natural["prereg_sha256"] == design.prereg_sha256) & (natural["condition"] == condition)]


def _task_trials(design: StudyDesign, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                 estimand: Estimand) -> list[tuple[Task, tuple[np.ndarray, ...], np.ndarray, TrialCounts]]:
    """Per task: checkpoint outcomes per unit and natural depths of the trials with a result, and the counts."""
    condition = estimand.condition
    nat = _natural_of(design, natural, condition)
    rows_of = nat.groupby("task").size().to_dict() if len(nat) else {}
    depths_of = _by_key(_valid(nat), ["task"], "stages_passed")
    passes_of = _CheckpointPasses(design, checkpoint, estimand.protocol)
    found = []
    for task in design.tasks:
        if not rows_of.get(task.name):
            raise MissingTrials(f"no natural trials of pre-registration {design.prereg_sha256[:12]} for task "
                                f"{task.name!r} ({condition}): materialize natural_trials for that partition")
        depths = depths_of.get((task.name,), np.zeros(0, dtype=np.int64))
        passes = passes_of.of(task.name, estimand.decomposition)
        counts = TrialCounts(design.study.trials.checkpoint, tuple(int(p.size) for p in passes),
                             design.study.trials.natural, int(depths.size))
        found.append((task, passes, depths, counts))
    return found


def trial_counts(design: StudyDesign, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                 estimand: Estimand) -> dict[str, TrialCounts]:
    """m_planned and m_used of every task's cells under one estimand."""
    return {task.name: counts for task, _, _, counts in _task_trials(design, checkpoint, natural, estimand)}


def task_outcomes(design: StudyDesign, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                  estimand: Estimand) -> list[TaskOutcomes]:
    """Per-task trial outcomes (trials with a result) of one agent under one estimand, stages in path order.

    A task with a cell whose every trial is missing has no estimate and is left out (its rows say so)."""
    outcomes, missing = [], 0
    for task, passes, depths, counts in _task_trials(design, checkpoint, natural, estimand):
        missing += counts.m_planned - counts.m_used
        if not counts.estimable:
            continue
        # A rollout passed a merged unit when it passed the unit's last stage.
        ends = np.array([u[-1].index + 1 for u in segments(task, estimand.decomposition)])
        outcomes.append(TaskOutcomes(
            name=task.name, family=task.family, weight=design.weight(task.name), checkpoint_passes=passes,
            natural_depths=(depths[:, None] >= ends[None, :]).sum(axis=1),
        ))
    if not outcomes:
        raise MissingTrials(f"every task of {estimand.condition} has a cell whose trials are all missing (no "
                            f"result: harness or verifier errors); re-run the same command: {missing} trial(s) "
                            "will be retried")
    return outcomes


def true_probabilities(design: StudyDesign, agent: str, task: str, estimand: Estimand) -> tuple[float, float] | None:
    """Sim truth (P_expected, P_observed) of one task under an estimand; None for non-sim agents."""
    truth = design.truth(agent, task, estimand.condition, estimand.protocol)
    if truth is None:
        return None
    if estimand.decomposition == "stages":
        return truth.p_expected, truth.p_observed
    units = segments(design.task(task), estimand.decomposition)
    return math.prod(design.unit_truth(agent, task, u, estimand.protocol) for u in units), truth.p_observed


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
        passes_of = _CheckpointPasses(design, checkpoint, est.protocol)
        for task in design.tasks:
            truth = design.truth(agent, task.name, est.condition, est.protocol)
            for s, passes in zip(task.stages, passes_of.of(task.name)):
                k, m = int(passes.sum()), int(passes.size)  # m: m_used, the trials with a result
                low, high = wilson_interval(k, m, design.study.bootstrap.level) if m else (None, None)
                planned = design.study.trials.checkpoint
                rows.append({
                    "agent": agent, "condition": est.condition, "protocol": phash, "task": task.name,
                    "family": task.family, "stage": s.name, "stage_index": s.index, "k": k, "m": m,
                    "m_planned": planned, "m_missing": planned - m,
                    "q_hat": smoothed_proportion(k, m, est.zero_rule) if m else None, "q_ci_low": low,
                    "q_ci_high": high, "true_q": truth.q[s.index] if truth else None,
                })
    return design.stamp(pd.DataFrame(rows))


def expected_success(design: StudyDesign, agent: str, estimates: pd.DataFrame) -> pd.DataFrame:
    """P_expected per condition and task, from the stage estimates, under the declared baseline model."""
    model = design.study.baseline_model
    rows = []
    for (condition, task), group in estimates.groupby(["condition", "task"], sort=False):
        t = design.task(task)
        est = Estimand.declared(design.study, condition)
        q = group.sort_values("stage_index")["q_hat"]
        # a stage whose every trial is missing has no q̂, so the task has no prediction
        baseline = task_p_expected(t, list(q), model, design.study.seed) if q.notna().all() else None
        truth = design.truth(agent, task, condition, est.protocol)
        rows.append({
            "agent": agent, "condition": condition, "task": task, "family": group["family"].iloc[0],
            "weight": design.weight(task), "n_stages": len(group), "baseline_model": model,
            "p_expected": baseline.p_expected if baseline else None, "mc_se": baseline.mc_se if baseline else None,
            "needs_compatibility": baseline.needs_compatibility if baseline else None,
            "true_p_expected": truth.p_expected if truth else None,
        })
    return design.stamp(pd.DataFrame(rows))


def observed_success(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                     estimands: list[Estimand] | None = None) -> pd.DataFrame:
    """r̂_i = passed_i / reached_i per stage and P̂_observed per task, from natural rollouts with a result
    (m0 of the m0_planned; a task without an estimate has its rows, with no numbers)."""
    rows = []
    for est in estimands or declared_estimands(design.study):
        counts = trial_counts(design, checkpoint, natural, est)
        found = {t.name: t for t in task_outcomes(design, checkpoint, natural, est)}
        for task in design.tasks:
            t, c = found.get(task.name), counts[task.name]
            e = estimate_task(t, est.zero_rule) if t else None
            truth = design.truth(agent, task.name, est.condition, est.protocol)
            for s in task.stages:
                rows.append({
                    "agent": agent, "condition": est.condition, "task": task.name, "family": task.family,
                    "stage": s.name, "stage_index": s.index, "reached": e.reached[s.index] if e else None,
                    "passed": e.passed[s.index] if e else None, "r_hat": e.r[s.index] if e else None,
                    "true_r": truth.r[s.index] if truth else None,
                    "m0": c.natural_used, "m0_planned": c.natural_planned,
                    "m0_missing": c.natural_planned - c.natural_used,
                    "k0": int((t.natural_depths == t.n_stages).sum()) if t else None,
                    "p_observed": e.p_observed if e else None,
                    "true_p_observed": truth.p_observed if truth else None,
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
                          level=study.bootstrap.level, quadrant_thresholds=study.quadrant)
    table = pd.DataFrame([r.model_dump() for r in rows])
    table.insert(0, "condition", estimand.condition)
    table.insert(0, "agent", agent)
    truth = true_gammas(design, agent, outcomes, estimand)
    table["true_gamma"] = [truth(scope, name) for scope, name in zip(table["scope"], table["name"])]
    kept = [t for t in outcomes if not estimate_task(t, estimand.zero_rule).excluded]
    table["true_gamma_sampled"] = [_sampled_truth(design, agent, estimand, scope, name, kept)
                                   for scope, name in zip(table["scope"], table["name"])]

    def members(scope: str, name: str) -> list[TaskOutcomes]:
        return [t for t in kept if scope == "all" or (t.name if scope == "task" else t.family) == name]

    # Where the declared rule moved a shown estimate off the raw ratio at a 0 or m count, the row says so.
    table["rule_note"] = [rule_note(members(s, n), estimand.zero_rule, _number(pe), _number(po), _number(g))
                          for s, n, pe, po, g in zip(table["scope"], table["name"], table["p_expected"],
                                                     table["p_observed"], table["gamma"])]
    for column in ("stage_terms", "stage_term_ci"):
        if column in table:
            table[column] = [json.dumps(v) if v is not None else None for v in table[column]]
    return table


def _number(x: object) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def horizon_residuals(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame,
                      expected: pd.DataFrame, estimands: list[Estimand] | None = None) -> pd.DataFrame:
    """Γ̂ with intervals for every task, family and overall, per condition, from the registered P_expected."""
    frames = []
    for est in estimands or declared_estimands(design.study):
        outcomes = task_outcomes(design, checkpoint, natural, est)
        registered = check_registered_expected(design, outcomes, est, expected)
        table = residual_frame(design, agent, outcomes, est)
        is_task = table["scope"] == "task"
        table.loc[is_task, "p_expected"] = table.loc[is_task, "name"].map(registered)
        table = _with_trial_counts(design, table, trial_counts(design, checkpoint, natural, est))
        if est == Estimand.declared(design.study, est.condition):  # claims are about the declared estimand only
            table = mark_residual_claims(design.study, table, outcomes, est.zero_rule)
        frames.append(table)
    return design.stamp(pd.concat(frames, ignore_index=True))


def _with_trial_counts(design: StudyDesign, table: pd.DataFrame, counts: dict[str, TrialCounts]) -> pd.DataFrame:
    """m_planned, m_used and m_missing of every row (its tasks' checkpoint and natural trials), and a row with
    no estimate for each task (and family) that has none because a cell's trials are all missing."""
    agent, condition = table["agent"].iloc[0], table["condition"].iloc[0]
    have = set(zip(table["scope"], table["name"]))
    extra = [{"agent": agent, "condition": condition, "scope": scope, "name": name,
              "family": family if scope == "task" else None, "n_tasks": 0, "flags": []}
             for scope, name, family in [("task", t.name, t.family) for t in design.tasks]
             + [("family", f, None) for f in dict.fromkeys(t.family for t in design.tasks)]
             if (scope, name) not in have]
    if extra:
        table = pd.concat([table, pd.DataFrame(extra)], ignore_index=True)

    def members(scope: str, name: str) -> list[str]:
        return [t.name for t in design.tasks if scope == "all" or (scope == "task" and t.name == name)
                or (scope == "family" and t.family == name)]

    planned = [sum(counts[t].m_planned for t in members(s, n)) for s, n in zip(table["scope"], table["name"])]
    used = [sum(counts[t].m_used for t in members(s, n)) for s, n in zip(table["scope"], table["name"])]
    return table.assign(m_planned=planned, m_used=used, m_missing=[p - u for p, u in zip(planned, used)])


def true_gammas(design: StudyDesign, agent: str, outcomes: list[TaskOutcomes],
                estimand: Estimand) -> Callable[[str, str], float | None]:
    """Truth of the same estimand per (scope, name): compose within task, aggregate with the same weights,
    over the tasks the estimate kept (the `exclude` rule drops some)."""
    kept = [t for t in outcomes if not estimate_task(t, estimand.zero_rule).excluded]
    truths = {t.name: true_probabilities(design, agent, t.name, estimand) for t in kept}
    weights = {t.name: t.weight for t in outcomes}
    families = {t.name: t.family for t in outcomes}

    def gamma(scope: str, name: str) -> float | None:
        if any(t is None for t in truths.values()):
            return None
        members = {"task": [name], "family": [t for t in truths if families[t] == name], "all": list(truths)}[scope]
        if not members or any(m not in truths for m in members):
            return None  # an excluded task (or a family of them) has no estimate to compare with
        w = np.array([weights[t] for t in members])
        p_exp = float(np.dot(w, [truths[t][0] for t in members]) / w.sum())
        p_obs = float(np.dot(w, [truths[t][1] for t in members]) / w.sum())
        return float(np.log(p_exp / p_obs))

    return gamma


def _sampled_truth(design: StudyDesign, agent: str, estimand: Estimand, scope: str, name: str,
                   kept: list[TaskOutcomes]) -> float | None:
    """Truth of the tasks-sampled interval of a family/all row (sim agents only; task rows: None).

    Each family's tasks stand for tasks of the same structures with the agent's declared skill
    spread (`StudyDesign.population_truth`); family means are combined with the same declared
    weights, as the estimate is. Equals `true_gamma` when the agent declares no skill spread.
    """
    if scope == "task" or estimand.decomposition != "stages":
        return None
    members = [t for t in kept if scope == "all" or t.family == name]
    pops = [design.population_truth(agent, t.name, estimand.condition, estimand.protocol) for t in members]
    if not members or any(p is None for p in pops):
        return None
    w = np.array([t.weight for t in members])
    return float(np.log(np.dot(w, [p[0] for p in pops]) / np.dot(w, [p[1] for p in pops])))


def current_residuals(design: StudyDesign, residuals: pd.DataFrame, table: str = "horizon_residuals") -> pd.DataFrame:
    """The rows of this pre-registration and its declared agents; every declared agent must be there.

    A store may hold other study versions or agents (an output directory reused, a shared Dagster
    instance); a report must never mix them in, nor silently leave an agent out.
    """
    mine = residuals[(residuals["prereg_sha256"] == design.prereg_sha256)] if len(residuals) else residuals
    declared = [a.id for a in design.study.agents]
    missing = [a for a in declared if a not in set(mine["agent"] if len(mine) else [])]
    if missing:
        raise MissingTrials(f"no {table} of pre-registration {design.prereg_sha256[:12]} for agents "
                            f"{missing}: materialize {table} for them first")
    return mine[mine["agent"].isin(declared)]


@dataclass(frozen=True)
class ReportTables:
    """What the report and summary.json show: this pre-registration's rows only."""

    residuals: pd.DataFrame
    contrasts: pd.DataFrame
    sweep: pd.DataFrame
    resources: pd.DataFrame
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)  # hrbench.claims.claims_table
    equivalence_margin: float | None = None  # the study's (claims.equivalence_margin)

    @property
    def sensitivity(self) -> pd.DataFrame:
        return sensitivity_verdicts(self.sweep, self.equivalence_margin) if len(self.sweep) else pd.DataFrame()


def current_tables(design: StudyDesign, residuals: pd.DataFrame, contrasts: pd.DataFrame,
                   sweep: pd.DataFrame, resources: pd.DataFrame) -> ReportTables:
    """Residuals (every declared condition), contrasts and the sweep of this pre-registration and its agents."""
    residuals = current_residuals(design, residuals)
    missing = sorted(set(design.study.condition_names) - set(residuals["condition"]))
    if missing:
        raise MissingTrials(f"no horizon_residuals of conditions {missing}: materialize them first")
    interventions = len(design.study.condition_names) > 1
    contrasts = current_residuals(design, contrasts, "intervention_contrasts") if interventions else contrasts
    return ReportTables(
        residuals=residuals,
        contrasts=contrasts,
        sweep=current_residuals(design, sweep, "sensitivity_sweep"),
        resources=current_residuals(design, resources, "resource_accounting"),
        claims=claims_table(design.study, residuals, contrasts),
        equivalence_margin=design.study.claims.equivalence_margin,
    )


# -- interventions and sensitivity ------------------------------------------------------------------


def intervention_contrasts(design: StudyDesign, agent: str, checkpoint: pd.DataFrame,
                           natural: pd.DataFrame) -> pd.DataFrame:
    """ΔΓ(I) = Γ(baseline) − Γ(I) per condition, task, family and overall, with paired intervals over tasks.

    Each side keeps its own P_expected and P_observed (paper §3.3); the pairing redraws the same
    tasks for both sides (stats.paired_difference). Task rows carry the change of every stage term
    ln(q̂_i / r̂_i), so a contrast says at which stage the intervention moved the residual.
    """
    study = design.study
    base = Estimand.declared(study, "baseline")
    base_outcomes = task_outcomes(design, checkpoint, natural, base)
    frames = []
    for condition in study.condition_names:
        if condition == "baseline":
            continue
        est = Estimand.declared(study, condition)
        outcomes = task_outcomes(design, checkpoint, natural, est)
        # pairs of tasks estimable on both sides (a task with all trials of a cell missing has no Γ)
        both = {t.name for t in base_outcomes} & {t.name for t in outcomes}
        paired_base = [t for t in base_outcomes if t.name in both]
        outcomes = [t for t in outcomes if t.name in both]
        shared = est.protocol.protocol_hash() == base.protocol.protocol_hash()
        rows = paired_difference(paired_base, outcomes, zero_rule=study.zero_rule, n_boot=study.bootstrap.n_boot,
                                 level=study.bootstrap.level, shared_checkpoint=shared)
        truth, base_truth = true_gammas(design, agent, outcomes, est), true_gammas(design, agent, paired_base, base)
        terms = {a.name: _term_changes(a, b, study.zero_rule) for a, b in zip(paired_base, outcomes)}
        table = pd.DataFrame([r.model_dump() for r in rows]).rename(columns={"delta": "delta_gamma"})
        table.insert(0, "condition", condition)
        table.insert(0, "agent", agent)
        # As for residual rows: the tasks-fixed truth (of trial_ci_*, and of a task row's ci_*) and the
        # tasks-sampled one (of a family/all row's ci_*), each beside the interval that targets it.
        table["true_delta_gamma"] = [_difference(base_truth(s, n), truth(s, n))
                                     for s, n in zip(table["scope"], table["name"])]
        kept_base = [t for t in paired_base if not estimate_task(t, base.zero_rule).excluded]
        kept = [t for t in outcomes if not estimate_task(t, est.zero_rule).excluded]
        table["true_delta_gamma_sampled"] = [
            _difference(_sampled_truth(design, agent, base, s, n, kept_base), _sampled_truth(design, agent, est, s, n, kept))
            for s, n in zip(table["scope"], table["name"])]
        table["delta_stage_terms"] = [json.dumps(terms[n]) if s == "task" else None
                                      for s, n in zip(table["scope"], table["name"])]
        table["shared_checkpoint"] = shared
        frames.append(mark_contrast_claims(study, table, condition, base_outcomes, outcomes, shared))
    if not frames:
        return design.stamp(pd.DataFrame(columns=INTERVENTION_CONTRASTS.unstamped))
    return design.stamp(pd.concat(frames, ignore_index=True))


def _term_changes(base: TaskOutcomes, other: TaskOutcomes, zero_rule: ZeroRule) -> list[float | None]:
    a, b = estimate_task(base, zero_rule).stage_terms, estimate_task(other, zero_rule).stage_terms
    return [_difference(x, y) for x, y in zip(a, b)]


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else float(a - b)


SWEEP_DIMENSIONS = ("protocol", "baseline_model", "zero_rule", "decomposition")


def sensitivity_estimands(study: Study) -> list[Estimand]:
    """Every admissible choice for the baseline condition.

    Baseline models and zero rules only recompute from the same trials, so every combination is in
    the set; checkpoint protocols and decompositions each need trials of their own, so they vary one
    at a time around the declared ones (an admissible protocol under the declared decomposition, an
    admissible decomposition under the declared protocol).
    """
    models = list(dict.fromkeys([study.baseline_model, *study.sensitivity.baseline_models]))
    rules = list(dict.fromkeys([study.zero_rule, *study.sensitivity.zero_rules]))
    declared = study.checkpoint_protocol("baseline")
    runs = [(p, "stages") for p in study.admissible_protocols()] + \
        [(declared, d) for d in study.decompositions() if d != "stages"]
    return [Estimand(condition="baseline", protocol=p, zero_rule=z, baseline_model=b, decomposition=d)
            for p, d in runs for b in models for z in rules]


def sensitivity_sweep(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """Γ of the baseline condition under every admissible choice, per task, family and overall.

    The baseline models differ only in how P_expected is composed from the same q̂: on a task's path
    without retries the simulator and the oracle-scaffolded product equal the product (each checked per
    task, as in `check_registered_expected`), so one residual table serves them all.
    """
    frames, tables = [], {}
    for est in sensitivity_estimands(design.study):
        key = (est.protocol.protocol_hash(), est.zero_rule, est.decomposition)
        if key not in tables:
            outcomes = task_outcomes(design, checkpoint, natural, est)
            tables[key] = (outcomes, residual_frame(design, agent, outcomes, est))
        outcomes, table = tables[key]
        _check_model_agrees(design, outcomes, est)
        table = table[["agent", "scope", "name", "gamma", "ci_low", "ci_high", "true_gamma"]].copy()
        table.insert(2, "protocol", _protocol_label(design.study, est.protocol))
        table.insert(3, "protocol_hash", est.protocol.protocol_hash())
        table.insert(4, "baseline_model", est.baseline_model)
        table.insert(5, "zero_rule", est.zero_rule)
        table.insert(6, "decomposition", est.decomposition)
        frames.append(table)
    return design.stamp(pd.concat(frames, ignore_index=True))


# The agreement check's Monte Carlo size: a tenth of an estimate's (the tolerance is 4 of its standard
# errors, so a real disagreement above ~0.015 still fails), since it runs per task for every swept choice.
_CHECK_SIMS = 20_000


def _check_model_agrees(design: StudyDesign, outcomes: list[TaskOutcomes], est: Estimand) -> None:
    if est.baseline_model != "checkpoint_simulator":
        return
    for t in outcomes:
        q = estimate_task(t, est.zero_rule).q
        sim = p_expected(q, "checkpoint_simulator", StageGraph.path(q), n_sims=_CHECK_SIMS, seed=design.study.seed)
        if abs(sim.p_expected - p_expected(q, "product").p_expected) > 4 * (sim.mc_se or 0.0) + 1e-12:
            raise ExpectedMismatch(f"task {t.name!r}: the checkpoint simulator and the product disagree under "
                                   f"{est.decomposition}/{est.zero_rule}; the sweep resamples the product")


def _protocol_label(study: Study, protocol: CheckpointProtocol) -> str:
    """A protocol by what differs from the declared one (`declared` for itself)."""
    declared = study.checkpoint.model_dump()
    diff = {k: v for k, v in protocol.model_dump().items() if declared[k] != v and k != "budget"}
    return ",".join(f"{k}={v}" for k, v in sorted(diff.items())) or "declared"


def sensitivity_verdicts(sweep: pd.DataFrame, margin: float | None = None) -> pd.DataFrame:
    """Per agent and scope: the range of Γ over the admissible set, a verdict, and the choice that drives it.

    `different` (`direction` positive or negative): every choice's interval excludes 0 on the same side;
    `equivalent`: an equivalence margin δ is declared and every choice's interval lies inside (−δ, δ) (TOST
    at half the interval's α per side, for every admissible choice); otherwise `inconclusive` — an interval
    that merely contains 0 is not evidence of no effect (issue 25: wide intervals handed "robust null"
    to 70–90 % of rows whose true Γ was 1.8–2.1). The driver is the dimension whose choices move the
    mean Γ most (`none` when nothing moves it).
    """
    rows = []
    for (agent, scope, name), group in sweep.groupby(["agent", "scope", "name"], sort=False):
        low, high = group["ci_low"].astype(float), group["ci_high"].astype(float)
        direction = "positive" if (low > 0).all() else "negative" if (high < 0).all() else None
        if direction is not None:
            verdict = "different"
        elif margin is not None and ((low > -margin) & (high < margin)).all():
            verdict = "equivalent"
        else:
            verdict = "inconclusive"
        gamma = group["gamma"].astype(float)
        spread = {d: float(np.ptp(group.groupby(d)["gamma"].mean().to_numpy(dtype=float)))
                  for d in SWEEP_DIMENSIONS if group[d].nunique() > 1}
        driver = max(spread, key=spread.get) if spread and max(spread.values()) > 0 else "none"
        rows.append({"agent": agent, "scope": scope, "name": name, "gamma_min": float(gamma.min()),
                     "gamma_max": float(gamma.max()), "verdict": verdict, "direction": direction, "driver": driver,
                     "n_choices": int(len(group)), "true_gamma": group["true_gamma"].iloc[0]})
    return pd.DataFrame(rows)


def resource_accounting(design: StudyDesign, agent: str, checkpoint: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """Turns, tokens, wall time and cost per condition and trial kind, side by side (shared checkpoint
    trials are counted once, under every condition whose prediction uses them).

    A checkpoint protocol only the sensitivity sweep runs (another budget rule, say) gets its own
    `sensitivity` row, so the budgets' costs stand beside each other; `budget_rule` says which rule a
    checkpoint row's trials ran under."""
    study = design.study
    checkpoint = checkpoint[checkpoint["prereg_sha256"] == design.prereg_sha256]
    natural = natural[natural["prereg_sha256"] == design.prereg_sha256]
    protocols = study.checkpoint_protocols()
    used = {study.checkpoint_protocol(c).protocol_hash() for c in study.condition_names}
    sides: list[tuple[str, str, str | None]] = []
    for c in study.condition_names:
        sides += [(c, "checkpoint", study.checkpoint_protocol(c).protocol_hash()), (c, "natural", None)]
    sides += [("sensitivity", "checkpoint", h) for h in protocols if h not in used]
    rows = []
    for condition, kind, phash in sides:
        trials = checkpoint[checkpoint["protocol"] == phash] if kind == "checkpoint" \
            else natural[natural["condition"] == condition]
        rows.append({
            "agent": agent, "condition": condition, "kind": kind, "trials": int(len(trials)),
            "turns": int(trials["turns"].sum()), "tokens_in": int(trials["tokens_in"].sum()),
            "tokens_out": int(trials["tokens_out"].sum()), "wall_s": float(trials["wall_s"].sum()),
            "cost_usd": float(trials["cost_usd"].sum()), "missing_trials": missing_trials(trials),
            "shared_protocol": phash, "budget_rule": protocols[phash].budget_rule if phash else None,
        })
    return design.stamp(pd.DataFrame(rows))
