"""Protects the estimand seam: one P_expected, the residual built on the registered prediction,
and every estimator recomputable under another admissible choice."""

from __future__ import annotations

import numpy as np
import pytest

from hrbench import analysis
from hrbench.analysis import Estimand, ExpectedMismatch
from hrbench.design import StudyDesign
from hrbench.protocol import DEMO_STUDY
from hrbench.runner import TrialRunner
from hrbench.simulate import simulated_trials
from hrbench.stats import StageGraph, p_expected
from hrbench.stores import StudyStores


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    design = StudyDesign.from_file(DEMO_STUDY)
    runner = TrialRunner(design, StudyStores(tmp_path_factory.mktemp("out")), progress=False)
    agent = design.study.agents[-1].id
    checkpoint, natural = simulated_trials(design, runner, agent, np.random.default_rng(3))
    expected = analysis.expected_success(design, agent, analysis.stage_estimates(design, agent, checkpoint))
    return design, agent, checkpoint, natural, expected


def test_p_expected_dispatches_on_the_baseline_model():
    q = [0.9, 0.8, 0.95]
    assert p_expected(q, "product").p_expected == pytest.approx(0.684)
    assert not p_expected(q, "product").needs_compatibility
    assert p_expected(q, "oracle_scaffolded").needs_compatibility
    sim = p_expected(q, "checkpoint_simulator", StageGraph.path(q), seed=1)
    assert sim.kind == "checkpoint_simulator" and abs(sim.p_expected - 0.684) < 4 * sim.mc_se
    assert p_expected(q, "checkpoint_simulator", seed=1) == sim  # seeded: the same number again


def test_residuals_are_built_on_the_registered_prediction(tables):
    design, agent, checkpoint, natural, expected = tables
    frame = analysis.horizon_residuals(design, agent, checkpoint, natural, expected)
    tasks = frame[(frame["scope"] == "task") & (frame["condition"] == "baseline")]
    registered = expected[expected["condition"] == "baseline"].set_index("task")["p_expected"]
    assert np.allclose(tasks.set_index("name")["p_expected"], registered.loc[tasks["name"]])


def test_a_registered_prediction_the_trials_do_not_reproduce_stops_the_residual(tables):
    design, agent, checkpoint, natural, expected = tables
    tampered = expected.copy()
    first = tampered.index[tampered["condition"] == "baseline"][0]
    tampered.loc[first, "p_expected"] *= 1.05
    with pytest.raises(ExpectedMismatch, match=f"task {tampered.loc[first, 'task']!r}.*re-materialize"):
        analysis.horizon_residuals(design, agent, checkpoint, natural, tampered)


def test_the_estimand_is_an_argument_not_read_from_the_study(tables):
    design, agent, checkpoint, natural, _ = tables
    declared = Estimand.declared(design.study, "baseline")
    other = declared.model_copy(update={"zero_rule": "haldane"})
    outcomes = analysis.task_outcomes(design, checkpoint, natural, declared)
    a = analysis.residual_frame(design, agent, outcomes, declared)
    b = analysis.residual_frame(design, agent, outcomes, other)
    assert set(a["zero_rule"]) == {"jeffreys"} and set(b["zero_rule"]) == {"haldane"}
    assert not np.allclose(a["gamma"].astype(float), b["gamma"].astype(float))
