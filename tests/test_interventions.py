"""Protects the intervention contrasts and the sensitivity verdicts on tables with known truth."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hrbench import analysis
from hrbench.catalogue import INTERVENTION_CONTRASTS, SENSITIVITY_SWEEP
from hrbench.design import StudyDesign
from hrbench.protocol import INTERVENTIONS_STUDY
from hrbench.runner import TrialRunner
from hrbench.simulate import simulated_trials
from hrbench.stores import StudyStores
from tests.conftest import as_stored


def _sweep(intervals: list[tuple[float, float, float]], dims: list[dict] | None = None) -> pd.DataFrame:
    rows = []
    for i, (gamma, low, high) in enumerate(intervals):
        dim = (dims or [{}] * len(intervals))[i]
        rows.append({"agent": "a", "scope": "all", "name": "all", "gamma": gamma, "ci_low": low, "ci_high": high,
                     "true_gamma": 0.0, "protocol": dim.get("protocol", "declared"),
                     "baseline_model": dim.get("baseline_model", "product"), "zero_rule": dim.get("zero_rule", "jeffreys"),
                     "decomposition": dim.get("decomposition", "stages")})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("intervals, margin, verdict, direction", [
    ([(0.8, 0.2, 1.4), (0.5, 0.1, 0.9)], None, "different", "positive"),
    ([(-0.8, -1.4, -0.2), (-0.5, -0.9, -0.1)], 0.5, "different", "negative"),
    ([(0.1, -0.3, 0.5), (-0.1, -0.4, 0.2)], None, "inconclusive", None),  # contains 0, no margin: no null claim
    ([(0.1, -0.3, 0.5), (-0.1, -0.4, 0.2)], 0.6, "equivalent", None),  # every interval inside ±0.6
    ([(0.1, -0.3, 0.5), (-0.1, -0.4, 0.2)], 0.45, "inconclusive", None),  # one interval reaches past the margin
    ([(0.8, 0.2, 1.4), (0.2, -0.2, 0.6)], 1.0, "inconclusive", None),  # one choice loses the sign; 1.4 > margin
    ([(0.8, 0.2, 1.4), (-0.8, -1.4, -0.2)], None, "inconclusive", None),  # signs disagree
])
def test_a_verdict_holds_only_if_every_choice_agrees(intervals, margin, verdict, direction):
    row = analysis.sensitivity_verdicts(_sweep(intervals), margin).iloc[0]
    assert (row["verdict"], row["direction"]) == (verdict, direction)


def test_the_driver_is_the_choice_that_moves_gamma_most():
    dims = [{"zero_rule": "jeffreys"}, {"zero_rule": "haldane"}, {"protocol": "history=compacted"},
            {"protocol": "history=compacted", "zero_rule": "haldane"}]
    row = analysis.sensitivity_verdicts(_sweep([(1.0, 0.5, 1.5), (1.05, 0.5, 1.5), (0.4, 0.1, 0.7),
                                                (0.45, 0.1, 0.8)], dims)).iloc[0]
    assert row["driver"] == "protocol" and row["gamma_min"] == 0.4 and row["gamma_max"] == 1.05
    flat = analysis.sensitivity_verdicts(_sweep([(0.3, 0.1, 0.5), (0.3, 0.1, 0.5)], dims[:2])).iloc[0]
    assert flat["driver"] == "none"


@pytest.fixture(scope="module")
def rotting(tmp_path_factory):
    design = StudyDesign.from_file(INTERVENTIONS_STUDY)
    runner = TrialRunner(design, StudyStores(tmp_path_factory.mktemp("out")), progress=False)
    checkpoint, natural = simulated_trials(design, runner, "sim-rotting", np.random.default_rng(11))
    return design, checkpoint, natural


def test_contrasts_pair_each_condition_with_the_baseline_and_carry_their_truth(rotting):
    design, checkpoint, natural = rotting
    contrasts = analysis.intervention_contrasts(design, "sim-rotting", checkpoint, natural)
    assert set(contrasts["condition"]) == {"context_reset", "state_repair", "compaction"}
    # the columns the asset stores (stamped with the agent's hash): its catalogue schema's
    assert INTERVENTION_CONTRASTS.table_schema.problems(*as_stored(design, "sim-rotting", contrasts)) == []
    expected = analysis.expected_success(design, "sim-rotting",
                                         analysis.stage_estimates(design, "sim-rotting", checkpoint))
    residuals = analysis.horizon_residuals(design, "sim-rotting", checkpoint, natural, expected)
    gamma = residuals[residuals["scope"] == "all"].set_index("condition")["gamma"]
    truth = residuals[residuals["scope"] == "all"].set_index("condition")["true_gamma"]
    sampled = residuals[residuals["scope"] == "all"].set_index("condition")["true_gamma_sampled"]
    for row in contrasts[contrasts["scope"] == "all"].itertuples():
        # Each side keeps its own prediction: ΔΓ is the difference of the two residuals.
        assert row.delta_gamma == pytest.approx(gamma["baseline"] - gamma[row.condition])
        assert row.true_delta_gamma == pytest.approx(truth["baseline"] - truth[row.condition])
        # The headline (tasks: sampled) interval has the population truth beside it.
        assert row.ci_estimand == "tasks: sampled"
        assert row.true_delta_gamma_sampled == pytest.approx(sampled["baseline"] - sampled[row.condition])
    assert contrasts[contrasts["scope"] == "task"]["true_delta_gamma_sampled"].isna().all()
    reset = contrasts[(contrasts["condition"] == "context_reset") & (contrasts["scope"] == "task")].iloc[0]
    terms = json.loads(reset["delta_stage_terms"])
    # The stage-wise changes add up to the task's ΔΓ (Γ = Σ ln(q̂_i / r̂_i) on a fixed path).
    assert len(terms) == design.task(reset["name"]).n_stages and sum(terms) == pytest.approx(reset["delta_gamma"])


def test_the_sweep_covers_every_admissible_choice(rotting):
    design, checkpoint, natural = rotting
    sweep = analysis.sensitivity_sweep(design, "sim-rotting", checkpoint, natural)
    assert SENSITIVITY_SWEEP.table_schema.problems(*as_stored(design, "sim-rotting", sweep)) == []
    overall = sweep[sweep["scope"] == "all"]
    # 2 protocols (stages) + 1 decomposition (declared protocol), each × 3 baseline models × 2 zero rules.
    assert len(overall) == (2 + 1) * 3 * 2
    assert set(overall["decomposition"]) == {"stages", "pairs"} and set(overall["protocol"]) == {"declared",
                                                                                                 "history=compacted"}
    # The truth follows the estimand: merging stages or compacting the checkpoint history lowers the prediction.
    by = overall.groupby(["protocol", "decomposition"])["true_gamma"].first()
    assert by[("declared", "stages")] > by[("declared", "pairs")] > 0
    assert by[("declared", "stages")] > by[("history=compacted", "stages")] > 0


def test_rows_the_zero_rule_moved_off_the_raw_ratio_say_so_and_sums_of_raw_ratios_do_not(rotting):
    """Issue 25: a task row whose P's the declared rule moved at a count of 0 or m carries a one-line
    `rule_note` with the reported and raw values; family and overall rows of several tasks (raw sums) none."""
    design, checkpoint, natural = rotting
    expected = analysis.expected_success(design, "sim-rotting",
                                         analysis.stage_estimates(design, "sim-rotting", checkpoint))
    residuals = analysis.horizon_residuals(design, "sim-rotting", checkpoint, natural, expected)
    tasks = residuals[residuals["scope"] == "task"]
    noted = tasks[tasks["rule_note"].notna()]
    assert 0 < len(noted) <= len(tasks)
    for r in noted.itertuples():
        assert r.rule_note.startswith(f"{design.study.zero_rule} reads") and f"P_exp {r.p_expected:.3f} (raw " in r.rule_note
    assert residuals[(residuals["scope"] != "task") & (residuals["n_tasks"] > 1)]["rule_note"].isna().all()
