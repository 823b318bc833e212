"""Protects the asset graph end to end: order of evidence, lineage stamps, outputs, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, AssetSelection, DagsterInstance, MultiPartitionKey, materialize

from hrbench.catalogue import BY_NAME
from pipelines.builder import build_definitions
from pipelines.materialize import QUIET, run_study
from tests.conftest import FIXTURES, TINY, TINY_STUDY, stored_keys, stored_table

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-study")
    run_study(TINY_STUDY, out, instance=DagsterInstance.ephemeral(), progress=False)
    return out


def _stored_tables(out: Path) -> dict[str, str]:
    """Every stored parquet table of a study, by key, with its catalogue name."""
    keys = [k for k in stored_keys(out, "tables") if k.endswith(".parquet")]
    return {k: next(p.removesuffix(".parquet") for p in k.split("/")[1:] if p.removesuffix(".parquet") in BY_NAME)
            for k in keys}


def test_every_stored_table_matches_its_catalogue_schema(finished_study: Path):
    tables = _stored_tables(finished_study)
    for key, name in tables.items():
        assert BY_NAME[name].table_schema.problems(stored_table(finished_study, key)) == [], key
    # the tiny study writes every table but the depth, the prefix rollouts and the contrasts (one condition)
    assert set(tables.values()) == set(BY_NAME) - {"task_depth", "prefix_rollouts", "intervention_contrasts"}


def test_a_renamed_column_breaks_its_table_schema(finished_study: Path):
    for key, name in _stored_tables(finished_study).items():
        schema = BY_NAME[name].table_schema
        column = schema.names[-1]
        renamed = stored_table(finished_study, key).rename(columns={column: f"{column}_v2"})
        assert schema.problems(renamed)[:2] == [f"missing column {column!r}", f"unexpected column '{column}_v2'"], key


def test_every_table_carries_the_preregistered_hash(finished_study: Path):
    prereg = json.loads((finished_study / "preregistration.json").read_text())["prereg_sha256"]
    tables = [k for k in stored_keys(finished_study, "tables") if k.endswith(".parquet")]
    names = {k.split("/")[1].removesuffix(".parquet") for k in tables}
    assert names == {"task_catalog", "verifier_audit", "preregistration", "agent_registration", "checkpoint_trials",
                     "baseline", "sensitivity_sweep", "resource_accounting"}  # the baseline alone: its branch, no contrasts
    branch = {k.split("/")[2] for k in tables if k.startswith("tables/baseline/")}
    assert branch == {"stage_estimates", "expected_success", "natural_trials", "observed_success", "horizon_residuals"}
    registered = {p.stem: json.loads(p.read_text())["agent_sha256"] for p in (finished_study / "registrations").glob("*.json")}
    assert set(registered) == {"steady", "rotting"}
    for path in tables:
        frame = stored_table(finished_study, path)
        assert set(frame["prereg_sha256"]) == {prereg}, path
        if "agent" in frame:  # per-agent tables also carry the agent's registration
            assert {registered[a] for a in frame["agent"]} == set(frame["agent_sha256"]), path


def test_summary_has_the_documented_rows_and_truth(finished_study: Path):
    summary = json.loads((finished_study / "summary.json").read_text())
    assert summary["study"] == "tiny"
    rows = {(r["agent"], r["scope"], r["name"]): r for r in summary["residuals"]}
    assert set(rows) == {(a, s, n) for a in ("steady", "rotting")
                         for s, n in (("task", "tiny-chain"), ("family", "fixtures"), ("all", "all"))}
    for r in summary["residuals"]:
        for key in ("p_expected", "p_observed", "gamma", "trial_ci_low", "trial_ci_high", "true_gamma", "se_delta",
                    "quadrant"):
            assert r[key] is not None, key
        assert r["trial_ci_low"] <= r["gamma"] <= r["trial_ci_high"]
        # One task: its family and `all` rows have no tasks-sampled interval, and say so (issue 8).
        if r["scope"] == "task":
            assert r["ci_estimand"] == "tasks: fixed" and r["ci_low"] == r["trial_ci_low"]
        else:
            assert r["ci_estimand"] == "tasks: sampled" and r["ci_low"] is None and "too-few-tasks" in r["flags"]
    assert rows[("steady", "all", "all")]["true_gamma"] == pytest.approx(0.0)
    assert rows[("rotting", "all", "all")]["true_gamma"] > 0.5
    report = (finished_study / "report.html").read_text()
    assert "data:image/png;base64," in report and summary["prereg_sha256"] in report


def test_trial_tables_hold_exactly_the_preregistered_trials(finished_study: Path):
    study = yaml.safe_load(TINY_STUDY.read_text())
    ck = stored_table(finished_study, "tables/checkpoint_trials/rotting/tiny-chain.parquet")
    nat = stored_table(finished_study, "tables/baseline/natural_trials/rotting/tiny-chain.parquet")
    assert len(ck) == 3 * study["trials"]["checkpoint"] and ck["trial_key"].is_unique
    assert len(nat) == study["trials"]["natural"] and nat["trial_key"].is_unique
    assert set(nat["exit_reason"]) <= {"passed", "failed"}
    assert (nat["passed"] == (nat["stages_passed"] == 3)).all()


def test_natural_trials_without_expected_success_are_refused(tmp_path: Path):
    defs = build_definitions(TINY_STUDY, tmp_path)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(TINY.agents, ["steady"])
    everything = list(defs.assets) + list(defs.asset_checks)
    setup = materialize(everything, selection=AssetSelection.groups("protocol"), instance=instance,
                        resources=defs.resources, run_config=QUIET)
    registration = materialize(everything, selection=AssetSelection.assets(TINY.asset_key("agent_registration")), partition_key="steady",
                               instance=instance, resources=defs.resources, run_config=QUIET)
    assert setup.success and registration.success
    result = materialize(
        everything, selection=AssetSelection.assets(TINY.asset_key("baseline/natural_trials")),
        partition_key=str(MultiPartitionKey({"agent": "steady", "task": "tiny-chain"})),
        instance=instance, resources=defs.resources, raise_on_error=False, run_config=QUIET,
    )
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.message
    assert "baseline/natural_trials not computed" in message and "baseline/expected_success/steady: no table" in message
    assert not result.get_asset_materialization_events()
    assert not (tmp_path / "journal").exists()  # no rollout was observed ahead of the prediction


def test_definitions_load_and_sensor_adds_declared_agents(tmp_path: Path):
    from dagster import build_sensor_context

    defs = build_definitions(TINY_STUDY, tmp_path)
    instance = DagsterInstance.ephemeral()
    sensor = defs.get_sensor_def(TINY.name("agent_files_sensor"))
    result = sensor(build_sensor_context(instance=instance))
    added = [k for r in result.dynamic_partitions_requests for k in r.partition_keys]
    assert added == ["steady", "rotting"]
    # nothing is materialized yet: the study's setup comes first, no agent's step before it
    assert [r.job_name for r in result.run_requests] == [TINY.name("study_setup_job")]
    assert defs.get_assets_def(AssetKey(TINY.asset_key("baseline/natural_trials"))).partitions_def is not None


def _journal_rows(out: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (out / "journal").rglob("*.jsonl")) if (out / "journal").exists() else 0


@pytest.mark.slow  # ~60 s (a real study killed mid-run, then resumed); the slow pass runs it
def test_killed_study_resumes_without_duplicate_or_missing_trials(tmp_path: Path):
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["trials"] = {"checkpoint": 30, "natural": 30}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "pipelines.cli", "run", str(path), "--out", str(out)]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while _journal_rows(out) < 40 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up: the hardest crash
    proc.wait()
    before = _journal_rows(out)
    assert 0 < before < 2 * (90 + 30), "the run should have been killed mid-way"

    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    for agent in ("steady", "rotting"):
        ck = stored_table(out, f"tables/checkpoint_trials/{agent}/tiny-chain.parquet")
        nat = stored_table(out, f"tables/baseline/natural_trials/{agent}/tiny-chain.parquet")
        assert len(ck) == 90 and ck["trial_key"].is_unique
        assert sorted(ck.groupby("stage")["trial_index"].apply(sorted).iloc[0]) == list(range(30))
        assert len(nat) == 30 and nat["trial_key"].is_unique
        assert sorted(nat["trial_index"]) == list(range(30))
    journal_keys = [json.loads(line)["trial_key"] for p in (out / "journal").rglob("*.jsonl")
                    for line in p.read_text().splitlines() if line.strip().endswith("}")]
    assert len(journal_keys) == len(set(journal_keys)) == 2 * (90 + 30)


def test_report_command_rerenders_from_stored_tables(finished_study: Path):
    (finished_study / "report.html").unlink()
    summary_before = json.loads((finished_study / "summary.json").read_text())
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "report", str(TINY_STUDY), "--out",
                             str(finished_study)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (finished_study / "report.html").is_file()
    assert json.loads((finished_study / "summary.json").read_text()) == summary_before


def test_an_output_directory_holds_one_study_version(finished_study: Path, tmp_path: Path):
    from hrbench.protocol import StudyError

    changed = yaml.safe_load(TINY_STUDY.read_text())
    changed["tasks"]["registry"] = str(FIXTURES / "registry")
    changed["trials"]["natural"] += 1
    path = tmp_path / "v2.yaml"
    path.write_text(yaml.safe_dump(changed))
    with pytest.raises(StudyError, match="holds study version .* write the new version to a new --out"):
        run_study(path, finished_study, instance=DagsterInstance.ephemeral(), progress=False)
