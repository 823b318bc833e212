"""Plan a study before spending money: trials needed per task, checked by simulation.

Anticipated q_i and P_obs come, in order of preference, from a pilot's tables
(`--pilot OUT`), from the closed-form truth of sim agents, or from values the
user states (`--q`, `--p-obs`). The numbers are computed in `hrbench.stats.planning`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from hrbench.stats.planning import min_detectable_gamma, plan_trials, simulate_half_width
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
