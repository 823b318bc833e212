"""Protects the code location as a Dagster engineer reads it: groups, code versions, jobs, schedule, sensors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from dagster import AssetKey, DefaultScheduleStatus, DefaultSensorStatus

from hrbench.preregistration import code_version
from pipelines.builder import build_definitions
from hrbench.protocol import load_study
from hrbench.steps import steps_for
from hrbench.catalogue import table_key
from tests.conftest import TINY, TINY_STUDY

REPO = Path(__file__).resolve().parents[2]


def test_assets_have_groups_code_versions_automation_and_batched_backfills(tmp_path: Path):
    defs = build_definitions(TINY_STUDY, tmp_path)
    graph = defs.resolve_asset_graph()
    groups = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        groups[key.path[-1]] = node.group_name
        assert node.code_version == code_version().label, key
        assert node.automation_condition is not None, key
        if node.partitions_def is not None:
            assert node.backfill_policy is not None and node.backfill_policy.max_partitions_per_run is None, key
    assert "default" not in groups.values()
    assert groups["checkpoint_trials"] == "trials" and groups["horizon_residuals"] == "estimates"
    assert groups["natural_trials"] == "trials" and groups["sensitivity_sweep"] == "estimates"
    steps = steps_for(load_study(TINY_STUDY).study)
    assert {j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")} == \
        {TINY.name(s.job) for s in steps} | {TINY.name("instance_retention_job")}  # the step jobs, and the housekeeping
    # every asset is in exactly one step job (the per-condition branch and the new assets included)
    in_steps = [a for s in steps for a in s.assets]
    assert sorted(in_steps) == sorted(table_key(k.path) for k in graph.get_all_asset_keys())
    assert {k.path[0] for k in graph.get_all_asset_keys()} == {"tiny"}  # every key in the study's namespace


def test_the_report_has_every_table_it_reads_upstream(tmp_path: Path):
    """Issue 22: the natural trials, stage estimates, observed success and task depth the report reads from the
    stores are its upstream assets, beside the residuals and aggregates it loads."""
    study = yaml.safe_load(TINY_STUDY.read_text())
    study.update(tasks={"registry": str(TINY_STUDY.parent.parent / "registry")}, conditions=["baseline", "context_reset"],
                 depth={"agents": ["steady"]})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    graph = build_definitions(path, tmp_path / "out").resolve_asset_graph()
    parents = {table_key(k.path) for k in graph.get(AssetKey(TINY.asset_key("study_report"))).parent_keys}
    per_condition = ("natural_trials", "stage_estimates", "observed_success", "horizon_residuals")
    assert parents == {*(f"{c}/{n}" for c in ("baseline", "context_reset") for n in per_condition), "task_depth",
                       "intervention_contrasts", "sensitivity_sweep", "resource_accounting"}


def test_schedule_and_automation_are_off_unless_the_deployment_opts_in(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("HRBENCH_SCHEDULE", raising=False)
    monkeypatch.delenv("HRBENCH_AUTOMATION", raising=False)
    defs = build_definitions(TINY_STUDY, tmp_path)
    schedule = next(iter(defs.schedules))
    sensors = {s.name: s for s in defs.sensors}
    assert schedule.default_status == DefaultScheduleStatus.STOPPED
    assert sensors[TINY.name("study_automation_sensor")].default_status == DefaultSensorStatus.STOPPED
    assert sensors[TINY.name("agent_files_sensor")].default_status == DefaultSensorStatus.RUNNING
    monkeypatch.setenv("HRBENCH_SCHEDULE", "15 2 * * *")
    monkeypatch.setenv("HRBENCH_AUTOMATION", "1")
    defs = build_definitions(TINY_STUDY, tmp_path)
    schedule = next(iter(defs.schedules))
    assert schedule.default_status == DefaultScheduleStatus.RUNNING and schedule.cron_schedule == "15 2 * * *"
    assert {s.name: s for s in defs.sensors}[TINY.name("study_automation_sensor")].default_status == DefaultSensorStatus.RUNNING


def test_definitions_validate_without_warnings_from_our_code(tmp_path: Path):
    env = {**os.environ, "HRBENCH_OUT": str(tmp_path / "out"), "PYTHONWARNINGS": "always"}
    result = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
                            cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    ours = [line for line in output.splitlines() if "Warning" in line
            and re.search(r"/(hrbench|pipelines|resources)/[\w/]+\.py:\d+", line)]
    assert not ours, ours
