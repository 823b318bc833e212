"""Trial tables drawn from a sim agent's closed-form model, without a sandbox (analysis-only).

A sim agent's real trials follow its declared model (agents/sim.py); drawing the same 0/1
outcomes directly gives tables with the same distribution in milliseconds, to check an analysis
over many seeds (benchmarks/conditions_acceptance.py) and to test the estimators on known truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hrbench.design import StudyDesign
from hrbench.harness.records import TrialRecord, TrialSpec, records_table
from hrbench.runner import TrialRunner
from hrbench.stats.data import TaskOutcomes, outcomes_from_counts


def _row(spec: TrialSpec, passed: bool, stages_passed: int) -> TrialRecord:
    return TrialRecord(**spec.model_dump(), trial_key=spec.key, passed=passed, stages_passed=stages_passed,
                       stopped_stage=None, turns=0, wall_s=0.0, agent_s=0.0, verifier_s=0.0,
                       exit_reason="passed" if passed else "failed", stage_outcomes_json="[]")


def simulated_trials(design: StudyDesign, runner: TrialRunner, agent: str,
                     rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checkpoint, natural) trial tables of a sim agent for every task, as the runner would key them."""
    checkpoint, natural = [], []
    protocols = design.study.checkpoint_protocols()
    for task in design.tasks:
        for spec in runner.checkpoint_specs(agent, task.name):
            unit = tuple(task.stage(name) for name in (spec.stage or "").split("+"))
            passed = bool(rng.random() < design.unit_truth(agent, task.name, unit, protocols[spec.protocol]))
            checkpoint.append(_row(spec, passed, int(passed)))
        for spec in runner.natural_specs(agent, task.name):
            truth = design.truth(agent, task.name, spec.condition)
            depth = 0
            while depth < task.n_stages and rng.random() < truth.r[depth]:
                depth += 1
            natural.append(_row(spec, depth == task.n_stages, depth))
    return records_table(checkpoint), records_table(natural)


def simulated_outcomes(design: StudyDesign, agent: str, rng: np.random.Generator,
                       reps: int) -> list[dict[str, list[TaskOutcomes]]]:
    """``reps`` replications of a sim agent's per-task outcomes under every declared condition (stages
    decomposition), drawn as counts: per replication {condition: outcomes of every task, in task order}.

    The same distribution as `simulated_trials` read back by `analysis.task_outcomes` (conditions whose
    checkpoint protocol is one share its trials, as the runner runs them once), without a trial row: a
    replication costs the estimators only, for Monte Carlo over hundreds of seeds (issue 25's acceptance).
    """
    study = design.study
    m, m0 = study.trials.checkpoint, study.trials.natural
    protocol_of = {c: study.checkpoint_protocol(c) for c in study.condition_names}
    checkpoint: dict[tuple[str, str], np.ndarray] = {}  # (protocol hash, task) -> k (reps, S)
    depths: dict[tuple[str, str], np.ndarray] = {}  # (condition, task) -> depth counts (reps, S + 1)
    for task in design.tasks:
        for condition, protocol in protocol_of.items():
            key = (protocol.protocol_hash(), task.name)
            if key not in checkpoint:
                q = design.truth(agent, task.name, "baseline", protocol).q
                checkpoint[key] = rng.binomial(m, np.broadcast_to(q, (reps, len(q))))
            r = np.asarray(design.truth(agent, task.name, condition).r, np.float64)
            reach = np.cumprod(np.concatenate([[1.0], r]))  # P(depth ≥ d), d = 0..S
            p_depth = reach - np.append(reach[1:], 0.0)
            depths[(condition, task.name)] = rng.multinomial(m0, p_depth / p_depth.sum(), size=reps)
    m_stages = {task.name: np.full(task.n_stages, m) for task in design.tasks}
    return [{condition: [outcomes_from_counts(task.name, task.family, checkpoint[(protocol.protocol_hash(), task.name)][i],
                                              m_stages[task.name], depths[(condition, task.name)][i],
                                              design.weight(task.name))
                         for task in design.tasks]
             for condition, protocol in protocol_of.items()}
            for i in range(reps)]
