"""A study's tables without a sandbox: the tiny study's sim agents drawn in closed form, then the real analysis.

Every GX test shares one process-wide context (hrbench.quality.gx builds it once), so only the
first validation pays for importing great_expectations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from hrbench import analysis
from hrbench.design import StudyDesign
from hrbench.runner import TrialRunner
from hrbench.simulate import simulated_trials
from hrbench.study_run import StudyRun
from tests.conftest import TINY_STUDY, as_stored

AGENT, CONDITION = "steady", "baseline"
# when the prediction was fixed; every natural trial below starts a minute or more later
EXPECTED_AT = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


@dataclass
class StudyTables:
    design: StudyDesign
    runner: TrialRunner
    checkpoint: pd.DataFrame
    natural: pd.DataFrame
    stage_estimates: pd.DataFrame
    expected: pd.DataFrame
    observed: pd.DataFrame
    residuals: pd.DataFrame

    @property
    def prereg(self) -> str:
        return self.design.prereg_sha256


def _as_run(trials: pd.DataFrame, first: datetime) -> pd.DataFrame:
    """What the harness adds to a drawn trial: when it started, and each stage's reward."""
    outcomes = [json.dumps([{"stage": "s", "reward": float(p)}]) for p in trials["passed"]]
    starts = [(first + timedelta(seconds=i)).isoformat(timespec="milliseconds") for i in range(len(trials))]
    return trials.assign(stage_outcomes_json=outcomes, started_at=starts)


@pytest.fixture(scope="session")
def study_tables(tmp_path_factory) -> StudyTables:
    run = StudyRun.from_file(TINY_STUDY, tmp_path_factory.mktemp("quality-out"), progress=False)
    design, runner = run.design, run.runner
    checkpoint, natural = simulated_trials(design, runner, AGENT, np.random.default_rng(7))
    checkpoint = _as_run(checkpoint, EXPECTED_AT - timedelta(hours=1))
    natural = _as_run(natural, EXPECTED_AT + timedelta(minutes=1))
    estimands = [analysis.Estimand.declared(design.study, CONDITION)]
    estimates = analysis.stage_estimates(design, AGENT, checkpoint, estimands)
    expected = analysis.expected_success(design, AGENT, estimates)
    observed = analysis.observed_success(design, AGENT, checkpoint, natural, estimands)
    residuals = analysis.horizon_residuals(design, AGENT, checkpoint, natural, expected, estimands)
    return StudyTables(design, runner, *as_stored(design, AGENT, checkpoint, natural, estimates, expected, observed,
                                                  residuals))
