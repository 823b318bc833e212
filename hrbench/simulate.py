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
