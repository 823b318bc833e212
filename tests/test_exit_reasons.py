"""Protects "every exit reason handled everywhere" (issue 21): one enumeration (hrbench.exits), and every
consumer of trial rows — analysis, the dense-reward failure taxonomy, the report's tables and figures,
summary.json, the data-quality suites, lineage, resume and the CLI's tables — given tables holding every
reason, without crashing and with no-result reasons left out of the estimates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import pytest

from hrbench import analysis, quality
from hrbench.cli import _missing_lines, _residual_table
from hrbench.exits import ALL_EXIT_REASONS, EXIT_REASONS, NO_RESULT_REASONS, ExitKind, ExitReason, exit_kind, is_missing
from hrbench.harness.records import TrialRecord
from hrbench.lineage import _verify_against_journal
from hrbench.report import figures
from hrbench.report.context import dense_summary, raw_counts
from hrbench.report.summary import write_summary
from hrbench.simulate import simulated_trials
from hrbench.stats.dense import FAILURE_TYPES, failure_summary, failure_type
from hrbench.storage import store_for
from hrbench.structure.tables import dense_table
from hrbench.study_run import StudyRun
from tests.conftest import as_stored

AGENT = "steady"
TASKS = ["gradebook-pipeline", "expense-ledger"]


def test_one_enumeration_with_a_kind_for_every_reason():
    assert set(EXIT_REASONS) == set(get_args(ExitReason)) == set(ALL_EXIT_REASONS)
    assert NO_RESULT_REASONS == {"harness_error", "verifier_error"}
    assert exit_kind("passed") is ExitKind.passed and exit_kind("limit_exceeded") is ExitKind.agent_failure
    with pytest.raises(ValueError, match="unknown exit reason 'exploded'; expected one of passed"):
        exit_kind("exploded")


@pytest.mark.parametrize("reason", ALL_EXIT_REASONS)
def test_the_failure_taxonomy_types_every_reason(reason: str):
    kind = failure_type(reason, 0.0)
    assert kind in FAILURE_TYPES
    assert (kind == "harness_error") == is_missing(reason)  # no result is never the agent's failure type
    assert failure_type(reason, 1.0) == ("harness_error" if is_missing(reason) else "passed")


@pytest.fixture(scope="module")
def every_reason(tmp_path_factory) -> tuple[StudyRun, pd.DataFrame, pd.DataFrame]:
    """A sim study's trial tables where each exit reason ends one trial of some cell (every cell keeps
    others with a result), as the harness writes them."""
    folder = tmp_path_factory.mktemp("exits")
    study = folder / "study.yaml"
    study.write_text(f"name: exits\ntasks: {{include: {TASKS}}}\n"
                     "agents: [{id: steady, kind: sim, sim: {skill: 0.85}}]\n"
                     "trials: {checkpoint: 10, natural: 20}\nbootstrap: {n_boot: 200, seed: 1}\n"
                     "retries: {max_missing_share: 0.2}\n")
    run = StudyRun.from_file(study, folder / "out", progress=False)
    checkpoint, natural = as_stored(run.design, AGENT,
                                    *simulated_trials(run.design, run.runner, AGENT, np.random.default_rng(5)))

    def spread(frame: pd.DataFrame, n_stages: dict[str, int]) -> pd.DataFrame:
        frame = frame.copy()
        for i, reason in enumerate(ALL_EXIT_REASONS):
            row = frame.index[(i * 7) % len(frame)]
            passed = reason == "passed"
            frame.loc[row, ["exit_reason", "passed", "error"]] = [reason, passed, f"{reason} in this row"]
            full = n_stages[frame.loc[row, "task"]] if frame.loc[row, "kind"] == "natural" else 1
            frame.loc[row, "stages_passed"] = full if passed else 0
        outcomes = [json.dumps([{"stage": s, "reward": float(p)}]) for s, p in zip(frame["stage"], frame["passed"])]
        return frame.assign(started_at="2026-01-01T12:00:00.000+00:00", stage_outcomes_json=outcomes)

    stages = {t.name: t.n_stages for t in run.design.tasks}
    checkpoint, natural = spread(checkpoint, stages), spread(natural, stages)
    assert set(checkpoint["exit_reason"]) == set(natural["exit_reason"]) == set(ALL_EXIT_REASONS)
    return run, checkpoint, natural


def test_the_analysis_summary_and_cli_take_every_reason(every_reason, tmp_path: Path):
    run, checkpoint, natural = every_reason
    design, est = run.design, analysis.Estimand.declared(run.study, "baseline")
    stages = analysis.stage_estimates(design, AGENT, checkpoint, [est])
    expected = analysis.expected_success(design, AGENT, stages)
    observed = analysis.observed_success(design, AGENT, checkpoint, natural, [est])
    residuals = analysis.horizon_residuals(design, AGENT, checkpoint, natural, expected, [est])
    resources = analysis.resource_accounting(design, AGENT, checkpoint, natural)
    sweep = analysis.sensitivity_sweep(design, AGENT, checkpoint, natural)
    assert stages["m_missing"].sum() == observed.groupby("task")["m0_missing"].first().sum() == 2
    assert residuals[residuals["scope"] == "all"]["m_missing"].iloc[0] == 4
    assert resources["missing_trials"].sum() == 4
    tables = analysis.ReportTables(residuals=residuals, contrasts=pd.DataFrame(), sweep=sweep, resources=resources)
    summary = json.loads(write_summary(design, tables, tmp_path / "summary.json").read_text())
    assert summary["residuals"][0]["m_missing"] is not None
    assert _residual_table(summary).row_count >= 1
    assert any("missing trials steady baseline: 4 of" in line for line in _missing_lines(summary))


def test_the_quality_suites_take_every_reason(every_reason):
    run, checkpoint, natural = every_reason
    specs = [s for t in TASKS for s in run.runner.checkpoint_specs(AGENT, t)]
    verdict = quality.check_trials("checkpoint_trials", checkpoint, specs, run.prereg_sha256, run.study.retries)
    assert verdict.success, verdict.description()


def test_the_report_tables_and_figures_take_every_reason(every_reason):
    run, _, natural = every_reason
    records = [TrialRecord(**{k: v for k, v in r.items() if k in TrialRecord.model_fields})
               for r in natural.to_dict("records")]
    dense = pd.DataFrame([r.model_dump() for r in dense_table(records, run.design.tasks)])
    assert set(dense["exit_reason"]) == set(ALL_EXIT_REASONS)
    row = dense_summary(dense).iloc[0]
    assert row["missing"] == 2 and row["runs"] == len(natural) - 2  # no-result runs are not averaged
    assert failure_summary(list(dense["exit_reason"]), dense["reward"]).counts["harness_error"] == 2
    observed = analysis.observed_success(run.design, AGENT, every_reason[1], natural,
                                         [analysis.Estimand.declared(run.study, "baseline")])
    counts = raw_counts(pd.DataFrame(), observed, natural)
    assert counts["natural missing"].sum() == 2
    survival = figures.survival_table(natural)
    assert survival[survival["k"] == 0]["n"].iloc[0] == len(natural) - 2


def test_lineage_and_resume_take_every_reason(every_reason, tmp_path: Path):
    run, checkpoint, _ = every_reason
    store = store_for(tmp_path)
    for (agent, task), rows in checkpoint.groupby(["agent", "task"]):
        journaled = rows[~rows["exit_reason"].map(is_missing)]  # what the runner journals as results
        key = f"journal/{run.prereg_sha256[:16]}/checkpoint/{agent}/{task}.jsonl"
        store.put(key, "".join(json.dumps({k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}) + "\n"
                               for r in journaled.to_dict("records")).encode())
    problems: list[str] = []
    compared = _verify_against_journal(store, "checkpoint_trials", checkpoint, lambda _t, p: problems.append(p))
    assert problems == [] and compared == len(checkpoint) - 2
