"""Plan a study before spending money: trials needed per task, checked by simulation.

Anticipated q_i and P_obs come, in order of preference, from a pilot's tables
(`--pilot OUT`), from the closed-form truth of sim agents, or from values the
user states (`--q`, `--p-obs`). The numbers are computed in `hrbench.stats.planning`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from typing import Callable

from pydantic import BaseModel

import numpy as np

from hrbench.stats import TaskOutcomes, paired_difference, residual_table, simulate_task
from hrbench.stats.claims import claim_level, t_interval_rescaled
from hrbench.stats.planning import (
    HeadlineWidth,
    calibrated_range_warnings,
    linearized_truth,
    min_detectable_gamma,
    natural_conditionals,
    plan_trials,
    predicted_families_half_width,
    predicted_half_width,
    simulate_half_width,
    sized_families,
    trial_variance_terms,
)
from hrbench.stats.cluster import FAMILY_LEVEL_MIN
from hrbench.stats.data import ZeroRule
from hrbench.analysis import task_p_expected
from hrbench.catalogue import OBSERVED_SUCCESS, STAGE_ESTIMATES
from hrbench.design import StudyDesign
from hrbench.stores import StudyStores


class Anticipated(BaseModel):
    agent: str
    task: str
    source: str  # "pilot" | "sim truth" | "stated"
    q: list[float]
    p_obs: float


class PlanRow(BaseModel):
    agent: str
    task: str
    source: str
    p_expected: float
    p_obs: float
    m_stage: int
    m0: int
    half_width_delta: float
    half_width_simulated: float
    simulated_over_delta: float
    declared_m_stage: int
    declared_m0: int
    min_detectable_gamma: float  # at the declared trials, 80% power


def anticipated(design: StudyDesign, pilot: Path | None, q: list[float] | None, p_obs: float | None) -> list[Anticipated]:
    """Anticipated q_i and P_obs for every (agent, task) of the study."""
    pilot_q = pilot_obs = None
    if pilot is not None:
        # the baseline's estimates: the plan sizes the study's primary estimand
        pilot_q = StudyStores(pilot).read_all(STAGE_ESTIMATES.key("baseline"))
        pilot_obs = StudyStores(pilot).read_all(OBSERVED_SUCCESS.key("baseline"))
        if pilot_q.empty or pilot_obs.empty:
            raise ValueError(f"{pilot} holds no stage_estimates or observed_success tables: give the output "
                             "directory of a finished pilot run")
    rows = []
    for spec in design.study.agents:
        for task in design.tasks:
            if pilot_q is not None and pilot_obs is not None:
                sq = pilot_q[(pilot_q.agent == spec.id) & (pilot_q.task == task.name) & (pilot_q.condition == "baseline")]
                so = pilot_obs[(pilot_obs.agent == spec.id) & (pilot_obs.task == task.name)
                               & (pilot_obs.condition == "baseline")]
                if len(sq) and len(so):
                    rows.append(Anticipated(agent=spec.id, task=task.name, source="pilot",
                                            q=list(sq.sort_values("stage_index")["q_hat"]),
                                            p_obs=float(so["p_observed"].iloc[0])))
                    continue
            truth = design.truth(spec.id, task.name)
            if truth is not None:
                rows.append(Anticipated(agent=spec.id, task=task.name, source="sim truth", q=truth.q,
                                        p_obs=truth.p_observed))
            elif q is not None and p_obs is not None:
                stage_q = q if len(q) == task.n_stages else [q[0]] * task.n_stages
                rows.append(Anticipated(agent=spec.id, task=task.name, source="stated", q=stage_q, p_obs=p_obs))
            else:
                raise ValueError(f"no anticipated values for agent {spec.id!r} on {task.name!r}: "
                                 "give --pilot OUT or --q and --p-obs")
    return rows


def plan_study(design: StudyDesign, half_width: float, inputs: list[Anticipated], n_sims: int = 4000,
               seed: int = 0) -> list[PlanRow]:
    """Delta-method trial counts for each (agent, task), each checked by simulating that plan."""
    study = design.study
    ratio = study.trials.natural / study.trials.checkpoint
    rows = []
    for a in inputs:
        plan = plan_trials(a.q, a.p_obs, half_width, study.bootstrap.level, ratio)
        sim = simulate_half_width(a.q, a.p_obs, plan.m_stage, plan.m0, study.bootstrap.level, n_sims, seed,
                                  study.zero_rule)
        rows.append(PlanRow(
            agent=a.agent, task=a.task, source=a.source, p_expected=task_p_expected(design.task(a.task), a.q, study.baseline_model, study.seed).p_expected,
            p_obs=a.p_obs,
            m_stage=plan.m_stage, m0=plan.m0, half_width_delta=plan.half_width_delta,
            half_width_simulated=sim.half_width, simulated_over_delta=sim.ratio_to_delta,
            declared_m_stage=study.trials.checkpoint, declared_m0=study.trials.natural,
            min_detectable_gamma=min_detectable_gamma(a.q, a.p_obs, study.trials.checkpoint, study.trials.natural,
                                                      0.8, study.bootstrap.level),
        ))
    return rows


class FamilySizing(BaseModel):
    """The number of families whose families-resampled headline (docs/statistics.md §7.6) reaches a target
    half-width at the declared trials and tasks per family, predicted and checked by simulation."""

    families_needed: int | None  # None: more than MAX_TASKS_FACTOR × the declared families
    tasks: int | None  # the tasks of that design
    half_width_predicted: float | None
    half_width_simulated: float | None  # mean over simulated studies of that design
    ratio: float | None  # simulated / predicted
    n_sims: int


class ClaimPlan(BaseModel):
    """One confirmatory claim's interval at the declared design: predicted, simulated, and its power.

    Headline (`kind` residual: Γ of the `all` row under a condition) and contrasts (ΔΓ(I) of the `all`
    row), tasks sampled within family, at the study's level; powers at the claims' adjusted level.
    """

    agent: str
    kind: str  # "residual" | "contrast"
    condition: str
    truth: float  # of these tasks (sim truth or anticipated)
    shared_checkpoint: bool
    half_width_predicted: float
    half_width_simulated: float
    ratio: float  # simulated / predicted
    df: float
    power_different: float  # share of simulated studies whose adjusted interval excludes 0
    power_equivalent: float | None  # … lies inside ±margin (None: no margin declared)
    tasks_needed: int | None  # tasks (same family mix) for the target half-width at these trials (None: > 20×)
    half_width_sized_predicted: float | None  # at tasks_needed: predicted …
    half_width_sized_simulated: float | None  # … and the mean over simulated studies of that size
    sized_ratio: float | None  # simulated / predicted at tasks_needed
    m_needed: int | None  # m_i for the target at these tasks (None: the tasks' spread alone is wider)
    # residual claims: the families (each like the declared ones, with their tasks) the target needs when families
    # are resampled (≥ FAMILY_LEVEL_MIN of them), predicted and simulated; None for contrasts (no family level)
    families: FamilySizing | None = None


def _condition_inputs(design: StudyDesign, agent: str, condition: str) -> list[Anticipated] | None:
    """Anticipated q_i and P_obs of every task under a condition: sim truth only (None for other agents)."""
    rows = []
    for task in design.tasks:
        truth = design.truth(agent, task.name, condition)
        if truth is None:
            return None
        rows.append(Anticipated(agent=agent, task=task.name, source="sim truth", q=truth.q, p_obs=truth.p_observed))
    return rows


def _arrays(design: StudyDesign, inputs: list[Anticipated]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    q = [np.asarray(a.q, np.float64) for a in inputs]
    return q, np.array([float(np.prod(x)) for x in q]), np.array([a.p_obs for a in inputs]), \
        np.array([design.weight(a.task) for a in inputs])


def _simulate(design: StudyDesign, inputs: list[Anticipated], rng: np.random.Generator) -> list[TaskOutcomes]:
    """One simulated study of these tasks (a task repeated by `_sized` is another task of the same kind)."""
    study = design.study
    return [simulate_task(f"{a.task}#{j}", design.task(a.task).family, a.q,
                          natural_conditionals(np.asarray(a.q, np.float64), a.p_obs),
                          study.trials.checkpoint, study.trials.natural, rng, weight=design.weight(a.task))
            for j, a in enumerate(inputs)]


#: How far `hrbench plan` looks for the number of tasks that reaches a target (× the declared tasks).
MAX_TASKS_FACTOR = 20


def _sized(families: list[str], step: int) -> list[int]:
    """Indices of the declared tasks (their ``families``) with each family grown to ⌈step · n_f / n_min⌉ tasks by
    repeating its own tasks in turn: the same family mix (``step`` = n_min: the declared tasks). Tasks sampled: a
    family's tasks stand for its population, so more of them are more draws of the same kinds."""
    by_family: dict[str, list[int]] = {}
    for i, f in enumerate(families):
        by_family.setdefault(f, []).append(i)
    n_min = min(len(v) for v in by_family.values())
    return [ix[i % len(ix)] for ix in by_family.values() for i in range(math.ceil(step * len(ix) / n_min - 1e-9))]


def _tasks_for(families: list[str], width_of: Callable[[list[int]], HeadlineWidth], target: float) -> list[int] | None:
    """The smallest `_sized` design whose predicted half-width is within ``target``; None beyond
    MAX_TASKS_FACTOR × the declared tasks."""
    n_min = min(families.count(f) for f in set(families))
    for step in range(n_min, MAX_TASKS_FACTOR * n_min + 1):
        idx = _sized(families, step)
        if width_of(idx).expected_half_width <= target:
            return idx
    return None


def _claim_interval(row, level: float, claim: float) -> tuple[float | None, float | None, float | None]:
    """(half-width at the study's level, adjusted low, adjusted high) of a simulated `all` row: the interval its
    claim reads (hrbench.claims.claim_interval): families resampled where the row has it, else the cluster-t."""
    low, high, df = row.ci_low, row.ci_high, row.df
    if getattr(row, "families_ci_low", None) is not None:
        low, high, df = row.families_ci_low, row.families_ci_high, row.families_df
    if low is None or high is None or df is None:
        return None, None, None
    point = row.gamma if hasattr(row, "gamma") else row.delta
    _, lo, hi = t_interval_rescaled(point, low, high, df, level, claim)
    return (high - low) / 2, lo, hi


def plan_claims(design: StudyDesign, inputs: list[Anticipated], target: float, n_sims: int = 200,
                seed: int = 0) -> list[ClaimPlan]:
    """Every confirmatory `all` claim of the study (per agent: Γ under each condition, ΔΓ of each claimed
    contrast) at the declared trials and tasks: the cluster-t half-width predicted from the tasks' spread and
    trial variances, checked by ``n_sims`` simulated studies, with the power to reach `different` and
    `equivalent`; and what the target half-width would need: the number of tasks (same family mix, tasks
    sampled; predicted, and checked by ``n_sims`` simulated studies of that size) or the trials per stage; and,
    for each Γ claim with ≥ 2 declared families, the number of families the target needs when families are
    resampled (`size_families`: predicted and simulated). Conditions other than baseline and contrasts need sim truth (other agents: baseline only, from
    ``inputs``). Empty when no family has 2 tasks."""
    study = design.study
    level, m, m0 = study.bootstrap.level, study.trials.checkpoint, study.trials.natural
    claim = claim_level(study.claims_alpha, study.n_claims)
    families = [t.family for t in design.tasks]
    if max(families.count(f) for f in set(families)) < 2:
        return []  # no family of ≥ 2 tasks: no tasks-sampled interval to plan (the rows say too-few-tasks)
    declared = list(range(len(families)))
    many_families = len(set(families)) >= FAMILY_LEVEL_MIN
    out = []
    rng = np.random.default_rng(seed)
    family_rng = np.random.default_rng([seed, 1])  # its own stream: sizing families leaves the other checks' draws as they were
    base_protocol = study.checkpoint_protocol("baseline").protocol_hash()

    def index_of(idx: list[int]) -> np.ndarray:
        names = sorted(set(families))
        return np.array([names.index(families[i]) for i in idx])

    def check(width_of: Callable[[list[int]], HeadlineWidth], simulate: Callable[[list[int]], tuple]) -> dict:
        """Predicted and simulated at the declared tasks, and at the tasks the target needs."""
        sized = _tasks_for(families, width_of, target)
        found = {"width": width_of(declared), "sims": [simulate(declared) for _ in range(n_sims)], "sized": sized}
        if sized is not None:
            found["sized_width"] = width_of(sized).expected_half_width
            found["sized_sims"] = [simulate(sized)[0] for _ in range(n_sims)]
        return found

    for spec in study.agents:
        mine = sorted((a for a in inputs if a.agent == spec.id), key=lambda a: [t.name for t in design.tasks].index(a.task))
        by_condition = {"baseline": mine}
        for c in study.condition_names[1:]:
            found = _condition_inputs(design, spec.id, c)
            if found is not None:
                by_condition[c] = found
        for condition, cond_inputs in by_condition.items():
            if condition not in study.condition_names or "all" not in study.claims.rows:
                continue

            def width_of(idx: list[int], tasks=cond_inputs) -> HeadlineWidth:
                q, pe, po, w = _arrays(design, [tasks[i] for i in idx])
                # the interval the claim reads: families resampled from FAMILY_LEVEL_MIN declared families on
                predict = predicted_families_half_width if many_families else predicted_half_width
                return predict(linearized_truth(pe, po, w), trial_variance_terms(q, pe, po, w, m, m0), index_of(idx),
                               level)

            def simulate(idx: list[int], tasks=cond_inputs) -> tuple:
                row = residual_table(_simulate(design, [tasks[i] for i in idx], rng), study.zero_rule, level=level,
                                     scopes=("all",))[0]
                return _claim_interval(row, level, claim)

            _, pe, po, w = _arrays(design, cond_inputs)
            fam = None if len(set(families)) < 2 else size_families(
                cond_inputs, families, list(w), m, m0, level, target, study.zero_rule, n_sims, family_rng)
            out.append(_claim_plan(spec.id, "residual", condition, float(np.log(pe @ w / (po @ w))), False,
                                   check(width_of, simulate), margin=study.claims.equivalence_margin,
                                   target=target, level=level, m=m).model_copy(update={"families": fam}))
        for condition in study.claimed_contrasts:
            if condition not in by_condition:
                continue
            shared = study.checkpoint_protocol(condition).protocol_hash() == base_protocol
            base, other = by_condition["baseline"], by_condition[condition]

            def width_of(idx: list[int], base=base, other=other, shared=shared) -> HeadlineWidth:
                qa, pea, poa, w = _arrays(design, [base[i] for i in idx])
                qb, peb, pob, _ = _arrays(design, [other[i] for i in idx])
                x = linearized_truth(pea, poa, w) - linearized_truth(peb, pob, w)
                tau = trial_variance_terms(qa, pea, poa, w, m, m0, not shared) + \
                    trial_variance_terms(qb, peb, pob, w, m, m0, not shared)
                return predicted_half_width(x, tau, index_of(idx), level)

            def simulate(idx: list[int], base=base, other=other, shared=shared) -> tuple:
                a = _simulate(design, [base[i] for i in idx], rng)
                b = _simulate(design, [other[i] for i in idx], rng)
                if shared:
                    b = [dataclasses.replace(tb, checkpoint_passes=ta.checkpoint_passes) for ta, tb in zip(a, b)]
                row = paired_difference(a, b, study.zero_rule, level=level, scopes=("all",), shared_checkpoint=shared)[0]
                return _claim_interval(row, level, claim)

            _, pea, poa, w = _arrays(design, base)
            _, peb, pob, _ = _arrays(design, other)
            truth = float(np.log(pea @ w / (poa @ w)) - np.log(peb @ w / (pob @ w)))
            out.append(_claim_plan(spec.id, "contrast", condition, truth, shared, check(width_of, simulate),
                                   margin=study.claims.equivalence_margin, target=target, level=level, m=m))
    return out


def size_families(inputs: list[Anticipated], families: list[str], weights: list[float], m: int, m0: int,
                  level: float, target: float, zero_rule: ZeroRule, n_sims: int,
                  rng: np.random.Generator) -> FamilySizing:
    """The fewest families (from FAMILY_LEVEL_MIN, or the declared number if more; the declared families in turn,
    each with its declared tasks: `sized_families`) whose predicted families-resampled half-width of the `all`
    row is within ``target`` at m_i = ``m``, m_0 = ``m0``; then ``n_sims`` simulated studies of that design, whose
    `all` row's families interval gives the simulated half-width. ``inputs`` (anticipated q_i, P_obs per task),
    ``families`` and ``weights`` are the declared tasks'. Raises where fewer than 2 families are declared."""
    declared = len(set(families))
    if declared < 2:
        raise ValueError("sizing the families needs at least 2 declared families (their spread)")
    q = [np.asarray(a.q, np.float64) for a in inputs]
    pe, po = np.array([float(np.prod(x)) for x in q]), np.array([a.p_obs for a in inputs])
    w = np.asarray(weights, np.float64)

    def width(n: int) -> tuple[list[int], list[str], float]:
        idx, labels = sized_families(families, n)
        names = sorted(set(labels))
        x = linearized_truth(pe[idx], po[idx], w[idx])
        tau = trial_variance_terms([q[i] for i in idx], pe[idx], po[idx], w[idx], m, m0)
        return idx, labels, predicted_families_half_width(x, tau, np.array([names.index(v) for v in labels]),
                                                          level).expected_half_width

    for n in range(max(FAMILY_LEVEL_MIN, declared), MAX_TASKS_FACTOR * declared + 1):
        idx, labels, predicted = width(n)
        if predicted <= target:
            break
    else:
        return FamilySizing(families_needed=None, tasks=None, half_width_predicted=None, half_width_simulated=None,
                            ratio=None, n_sims=n_sims)
    halves = []
    for _ in range(n_sims):
        tasks = [simulate_task(f"{inputs[i].task}#{j}", labels[j], q[i], natural_conditionals(q[i], po[i]), m, m0,
                               rng, weight=float(w[i])) for j, i in enumerate(idx)]
        row = residual_table(tasks, zero_rule, level=level, scopes=("all",))[0]
        if row.families_ci_low is not None and row.families_ci_high is not None:
            halves.append((row.families_ci_high - row.families_ci_low) / 2)
    simulated = float(np.mean(halves)) if halves else None
    return FamilySizing(families_needed=n, tasks=len(idx), half_width_predicted=predicted,
                        half_width_simulated=simulated, ratio=None if simulated is None else simulated / predicted,
                        n_sims=n_sims)


def _claim_plan(agent: str, kind: str, condition: str, truth: float, shared: bool, checked: dict,
                margin: float | None, target: float, level: float, m: int) -> ClaimPlan:
    width, sims = checked["width"], checked["sims"]
    halves = [h for h, _, _ in sims if h is not None]
    adjusted = [(lo, hi) for h, lo, hi in sims if h is not None]
    simulated = float(np.mean(halves)) if halves else float("nan")
    n = max(len(sims), 1)
    sized = [h for h in checked.get("sized_sims", []) if h is not None]
    sized_sim = float(np.mean(sized)) if sized else None
    sized_pred = checked.get("sized_width")
    return ClaimPlan(
        agent=agent, kind=kind, condition=condition, truth=truth, shared_checkpoint=shared,
        half_width_predicted=width.expected_half_width, half_width_simulated=simulated,
        ratio=simulated / width.expected_half_width, df=width.df,
        power_different=sum(lo > 0 or hi < 0 for lo, hi in adjusted) / n,
        power_equivalent=None if margin is None else sum(-margin < lo and hi < margin for lo, hi in adjusted) / n,
        tasks_needed=None if checked["sized"] is None else len(checked["sized"]),
        half_width_sized_predicted=sized_pred, half_width_sized_simulated=sized_sim,
        sized_ratio=None if sized_sim is None or not sized_pred else sized_sim / sized_pred,
        m_needed=width.trials_needed(target, level, m))


def design_warnings(design: StudyDesign) -> list[str]:
    """The declared design's departures from the calibrated range (also in the pre-registration record)."""
    sizes: dict[str, int] = {}
    for t in design.tasks:
        sizes[t.family] = sizes.get(t.family, 0) + 1
    return calibrated_range_warnings(design.study.trials.checkpoint, design.study.trials.natural, sizes)
