"""Protects issue 21's acceptance on real sandboxes and real verifiers: a verifier killed on its first call
of each trial costs one more attempt inside the same run (none missing, outcomes those of a quiet run);
a verifier that never leaves a reward makes its task's cells missing — shown with m_missing in the
tables, summary.json and the report — while the other task's estimates are unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from hrbench import analysis, runner
from hrbench.exits import NO_RESULT_REASONS
from hrbench.harness.records import records_table
from hrbench.harness.trajectory import read_trajectory
from hrbench.report.context import ReportInputs
from hrbench.report.html import render_report, report_header
from hrbench.report.summary import write_summary
from hrbench.study_run import StudyRun
from tests.conftest import FIXTURES
from tests.faults import FirstCallKiller, slow_verifier_registry

AGENT = "flaky"


def _study(folder: Path, registry: Path, extra: str = "", include: list[str] | None = None) -> Path:
    study = folder / "study.yaml"
    study.write_text(f"name: transient\ntasks: {{registry: {registry}{f', include: {include}' if include else ''}}}\n"
                     f"agents: [{{id: {AGENT}, kind: sim, sim: {{skill: 0.8}}}}]\n"
                     "trials: {checkpoint: 3, natural: 3}\nbootstrap: {n_boot: 200, seed: 1}\nconcurrency: 1\n"
                     + extra)
    return study


def _checkpoint_rows(out: Path, registry: Path, extra: str = "") -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    run = StudyRun.from_file(_study(out, registry, extra), out / "out", progress=False)
    return records_table(run.runner.run_checkpoint_trials(AGENT, "tiny-chain")).set_index("trial_key")


def test_a_verifier_killed_on_its_first_call_per_trial_is_retried_in_the_same_run(tmp_path: Path, monkeypatch):
    registry = slow_verifier_registry(FIXTURES / "registry", tmp_path / "registry")
    quiet = _checkpoint_rows(tmp_path / "quiet", registry)
    killer = FirstCallKiller()
    monkeypatch.setattr(runner, "run_checkpoint_trial", killer.wrap(runner.run_checkpoint_trial, lambda spec: spec.key))
    killer.start()
    try:
        rows = _checkpoint_rows(tmp_path / "faulty", registry, "retries: {max_attempts: 3, backoff_sec: 0}\n")
    finally:
        killer.stop.set()
        killer.join(timeout=5)
    assert killer.killed >= len(rows) // 2, killer.killed  # the test proved something: verifiers died
    assert not rows["exit_reason"].isin(["verifier_error", "harness_error"]).any()  # one run, no missing
    assert rows["passed"].tolist() == quiet["passed"].tolist()  # the same outcomes: same keys, same draws
    assert rows["exit_reason"].tolist() == quiet["exit_reason"].tolist()
    retried = rows[rows["attempts"] > 1]
    # each killed first call once (a verifier killed after writing its reward still had its result)
    assert len(rows) // 2 <= len(retried) <= killer.killed and (rows["attempts"] <= 2).all()
    out = tmp_path / "faulty" / "out"
    for earlier, path in zip(retried["earlier_attempts_json"], retried["trajectory_path"]):
        [attempt] = json.loads(earlier)  # a verifier_error, or a harness_error when the killed verifier built
        assert attempt["exit_reason"] in NO_RESULT_REASONS  # the oracle state: either is kept, neither counts
        if attempt["exit_reason"] == "verifier_error":  # a sandbox that failed to start wrote no trajectory
            assert (out / attempt["trajectory_path"]).is_file() and ".attempt-1." in attempt["trajectory_path"]
        assert read_trajectory(out / path)["extra"]["earlier_attempts"] == [attempt]


def _broken_registry(root: Path) -> Path:
    """tiny-chain, and a copy of it whose `double` verifier never writes a reward."""
    registry = root / "registry"
    shutil.copytree(FIXTURES / "registry" / "tiny-chain", registry / "tiny-chain")
    broken = registry / "tiny-broken"
    shutil.copytree(FIXTURES / "registry" / "tiny-chain", broken)
    toml = broken / "task.toml"
    toml.write_text(toml.read_text().replace('name = "tiny-chain"', 'name = "tiny-broken"'))
    (broken / "steps" / "double" / "tests" / "test.sh").write_text("#!/bin/bash\necho 'checker crashed' >&2\n")
    return registry


def _analysed(run: StudyRun) -> dict[str, pd.DataFrame]:
    design, est = run.design, analysis.Estimand.declared(run.study, "baseline")
    checkpoint = pd.concat([records_table(run.runner.run_checkpoint_trials(AGENT, t.name)) for t in design.tasks],
                           ignore_index=True)
    natural = pd.concat([records_table(run.runner.run_natural_trials(AGENT, t.name)) for t in design.tasks],
                        ignore_index=True)
    stages = analysis.stage_estimates(design, AGENT, checkpoint, [est])
    expected = analysis.expected_success(design, AGENT, stages)
    return {"checkpoint": checkpoint, "natural": natural, "stages": stages,
            "observed": analysis.observed_success(design, AGENT, checkpoint, natural, [est]),
            "residuals": analysis.horizon_residuals(design, AGENT, checkpoint, natural, expected, [est])}


def test_a_verifier_that_always_fails_leaves_its_tasks_cells_missing_and_the_others_unchanged(tmp_path: Path):
    registry = _broken_registry(tmp_path)
    tolerant = "retries: {max_attempts: 2, backoff_sec: 0, max_missing_share: 1}\n"
    both = StudyRun.from_file(_study(tmp_path, registry, tolerant), tmp_path / "both", progress=False)
    alone_dir = tmp_path / "alone"
    alone_dir.mkdir()
    alone = StudyRun.from_file(_study(alone_dir, registry, tolerant, include=["tiny-chain"]), alone_dir / "out",
                               progress=False)
    got, reference = _analysed(both), _analysed(alone)

    broken = got["checkpoint"][got["checkpoint"]["task"] == "tiny-broken"]
    double = broken[broken["stage"] == "double"]
    assert (double["exit_reason"] == "verifier_error").all() and (double["attempts"] == 2).all()
    res = got["residuals"].set_index(["scope", "name"])
    assert res.loc[("task", "tiny-broken"), "m_missing"] >= 3 and pd.isna(res.loc[("task", "tiny-broken"), "gamma"])
    stages = got["stages"].set_index(["task", "stage"])
    assert stages.loc[("tiny-broken", "double"), "m"] == 0 and pd.isna(stages.loc[("tiny-broken", "double"), "q_hat"])
    ref = reference["residuals"].set_index(["scope", "name"])
    for column in ("gamma", "p_expected", "p_observed", "trial_ci_low", "trial_ci_high", "m_used"):
        assert res.loc[("task", "tiny-chain"), column] == ref.loc[("task", "tiny-chain"), column], column

    tables = analysis.ReportTables(residuals=got["residuals"], contrasts=pd.DataFrame(), sweep=pd.DataFrame(),
                                   resources=pd.DataFrame())
    summary = json.loads(write_summary(both.design, tables, tmp_path / "summary.json").read_text())
    row = next(r for r in summary["residuals"] if r["scope"] == "task" and r["name"] == "tiny-broken")
    assert row["m_missing"] >= 3 and row["gamma"] is None
    html = render_report(report_header(both.design), ReportInputs(
        residuals=got["residuals"], stage_estimates=got["stages"], observed=got["observed"], natural=got["natural"]))
    assert "m_missing" in html and "tiny-broken" in html


def test_an_audit_whose_verifiers_were_killed_is_audited_again(tmp_path: Path, monkeypatch):
    registry = slow_verifier_registry(FIXTURES / "registry", tmp_path / "registry")
    run = StudyRun.from_file(_study(tmp_path, registry, "retries: {backoff_sec: 0}\n"), tmp_path / "out", progress=False)
    monkeypatch.setenv("HRBENCH_CACHE_DIR", "off")  # every audit runs (a passing one is cached by content)
    killer = FirstCallKiller(every=True)  # every verifier of the task's first audit dies: it cannot pass
    monkeypatch.setattr(runner, "cached_audit", killer.wrap(runner.cached_audit, lambda task, *_: task.name))
    killer.start()
    try:
        rows = run.runner.audit()
    finally:
        killer.stop.set()
        killer.join(timeout=5)
    assert killer.killed >= 1
    # the first audit lost a verification's result (a killed verifier can also miss, or die after its reward):
    # then it ran again; either way the audit passes
    lost = any(runner._without_result(r) for r in killer.first_results["tiny-chain"])
    assert killer.calls == {"tiny-chain": 2 if lost else 1}
    assert all(r.ok for r in rows), [r.problem for r in rows]
