"""Protects `hrbench import harbor` (issue 24): Harbor job folders, in Harbor's layout, as the study's own
trial rows, with Harbor's semantics (min_reward early stops not reached, errored trials missing, a
retried trial its last attempt), sealed by the pre-registration, refused when a task changed."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from hrbench.design import StudyDesign
from hrbench.harbor_io.jobs import HarborImportError, harbor_checksum
from hrbench.harbor_io.imports import import_statements
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from tests.conftest import TINY_TASK
from tests.harbor.harbor_jobs import T0, gated_chain, step, study_file, trial, write_job

AGENTS = [{"id": "steady", "kind": "sim", "sim": {"skill": 0.9}}, {"id": "shaky", "kind": "sim", "sim": {"skill": 0.5}}]
MAP = {"terminus@openai/gpt-5": "steady", "claude-code": "shaky"}


def _jobs(tmp_path: Path, task: Path) -> list[Path]:
    at = [T0 + timedelta(minutes=m) for m in range(11)]
    gpt, claude = ("terminus", "openai/gpt-5"), ("claude-code", "anthropic/claude-sonnet")
    a = write_job(tmp_path / "jobs" / "job-a", [
        ("t0", trial(task, "t0", *gpt, at[0], [step("make", 1, at[0], (10, 5)), step("double", 1, at[0]),
                                               step("report", 1, at[0])])),
        # make fails but meets its gate (min_reward 0.0): the rollout goes on, its later stages recorded
        ("t1", trial(task, "t1", *gpt, at[1], [step("make", 0, at[1]), step("double", 1, at[1]),
                                               step("report", 1, at[1])])),
        # double scores 0.2 < min_reward 0.5: Harbor stops; report is not reached (no step result)
        ("t2", trial(task, "t2", *gpt, at[2], [step("make", 1, at[2]), step("double", 0.2, at[2])])),
        # the environment never came up: no result, a missing trial
        ("t3", trial(task, "t3", *gpt, at[3], [], error="EnvironmentStartTimeoutError")),
        # retried: the first attempt errored, the second (finished later) is the trial
        ("t4-attempt-1", trial(task, "t4", *gpt, at[4], [step("make", 1, at[4])], error="DaytonaError")),
        ("t4-attempt-2", trial(task, "t4", *gpt, at[5], [step("make", 1, at[5]), step("double", 1, at[5]),
                                                         step("report", 0, at[5])])),
    ])
    b = write_job(tmp_path / "jobs" / "job-b", [
        ("c0", trial(task, "c0", *claude, at[6], [step("make", 1, at[6]), step("double", 1, at[6]),
                                                  step("report", 1, at[6])])),
        ("c1", trial(task, "c1", *claude, at[7], [step("make", 0, at[7]), step("double", 0, at[7]),
                                                  step("report", 0, at[7])])),
        # the container died during double: no result for it, so the trial is missing, not failed
        ("c2", trial(task, "c2", *claude, at[9], [step("make", 1, at[9]), step("double", None, at[9],
                                                                               error="RuntimeError")])),
        ("x0", trial(task, "x0", "aider", "openai/gpt-4o", at[8], [step("make", 1, at[8])])),  # not mapped
    ])
    return [a, b]


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    task = gated_chain(tmp_path / "registry", TINY_TASK)
    jobs = _jobs(tmp_path, task)
    study = study_file(tmp_path / "study.yaml", tmp_path / "registry", AGENTS,
                       [{"kind": "natural", "harbor_jobs": [str(j) for j in jobs], "agents": MAP}],
                       trials={"checkpoint": 1, "natural": 5})
    return study, task, jobs


def test_harbor_trials_become_natural_rows_with_harbors_semantics(imported, tmp_path: Path):
    study, _, _ = imported
    design = StudyDesign.from_file(study)
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    rows = sorted(runner.run_natural_trials("steady", "tiny-chain"), key=lambda r: r.trial_index)
    summary = [(r.passed, r.stages_passed, r.stopped_stage, r.exit_reason) for r in rows]
    assert summary == [
        (True, 3, None, "passed"),
        (False, 0, "make", "failed"),  # went on past make (gate met), still 0 stages passed in a row
        (False, 1, "double", "failed"),  # early stop under min_reward
        (False, 0, "make", "harness_error"),  # errored: missing, never a failure
        (False, 2, "report", "failed"),  # the retried trial's last attempt
    ]
    stages = [[o["stage"] for o in json.loads(r.stage_outcomes_json)] for r in rows]
    assert stages[1] == ["make", "double", "report"] and stages[2] == ["make", "double"]  # report not reached
    made = json.loads(rows[1].stage_outcomes_json)[0]
    assert made["met_min_reward"] is True and json.loads(rows[2].stage_outcomes_json)[1]["met_min_reward"] is False
    assert rows[0].tokens_in == 10 and rows[0].tokens_out == 5 and rows[0].cost_usd == pytest.approx(0.03)
    assert json.loads(rows[0].rewards_json) == {"make": {"reward": 1.0}, "double": {"reward": 1.0},
                                                "report": {"reward": 1.0}}
    assert rows[0].recorded_at.startswith("2026-03-11T20:00:30") and rows[0].trajectory_path.startswith("trajectories/")
    assert (tmp_path / "out" / rows[0].trajectory_path).is_file()
    assert "EnvironmentStartTimeoutError" in rows[3].error
    shaky = sorted(runner.run_natural_trials("shaky", "tiny-chain"), key=lambda r: r.trial_index)
    assert [r.exit_reason for r in shaky] == ["passed", "failed", "harness_error"] + ["harness_error"] * 2
    assert "RuntimeError" in shaky[2].error and "not a trial #4" in shaky[3].error  # 3 imported of m_0 = 5
    # Harbor ran report after double failed its gate (the job says so); hrbench's rollout stops there
    assert [o["stage"] for o in json.loads(shaky[1].stage_outcomes_json)] == ["make", "double"]


def test_the_jobs_are_sealed_by_the_pre_registration_and_unused_trials_are_named(imported):
    study, _, jobs = imported
    design = StudyDesign.from_file(study)
    sealed = design.preregistration.sealed_inputs
    assert "job-a/t0/result.json" in sealed and "job-b/config.json" in sealed
    before = design.prereg_sha256
    (jobs[0] / "t2" / "result.json").write_text((jobs[0] / "t2" / "result.json").read_text().replace("0.2", "0.7"))
    assert StudyDesign.from_file(study).prereg_sha256 != before  # an edited outcome is another study version
    assert any("agent aider@openai/gpt-4o is not mapped" in u for u in design.imported.unused)


def test_a_trial_of_a_changed_task_is_refused_naming_both_checksums(imported):
    study, task, _ = imported
    ran = harbor_checksum(task)
    (task / "steps" / "make" / "instruction.md").write_text("a different instruction\n")
    with pytest.raises(HarborImportError) as caught:
        StudyDesign.from_file(study).imported  # noqa: B018
    assert ran in str(caught.value) and harbor_checksum(task) in str(caught.value)


def test_the_report_says_the_rollouts_were_recorded_before_the_pre_registration(imported):
    study, _, _ = imported
    design = StudyDesign.from_file(study)
    lines = import_statements(design.study, design.imported, "2026-12-03T10:00:00+00:00")
    assert len(lines) == 1 and "steady, shaky" not in lines[0]
    assert "recorded by Harbor from 2026-03-11T20:00:30+00:00" in lines[0]
    assert "8 of them were recorded before this study was pre-registered (2026-12-03T10:00:00+00:00)" in lines[0]
    assert "before" not in import_statements(design.study, design.imported, "2026-01-01T00:00:00+00:00")[0]


def test_hrbench_import_harbor_checks_and_declares_the_import(tmp_path: Path):
    task = gated_chain(tmp_path / "registry", TINY_TASK)
    jobs = _jobs(tmp_path, task)
    study = study_file(tmp_path / "study.yaml", tmp_path / "registry", AGENTS)
    args = [sys.executable, "-m", "hrbench.cli", "import", "harbor", *map(str, jobs), "--study", str(study),
            "--agent", "terminus@openai/gpt-5=steady", "--agent", "claude-code=shaky", "--write"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not imported: job-b/x0" in proc.stdout
    declared = yaml.safe_load(study.read_text())["imports"][0]
    assert declared["agents"] == {"terminus@openai/gpt-5": "steady", "claude-code": "shaky"}
    assert StudyDesign.from_file(study).study.imported("steady", "natural") is not None
    (task / "task.toml").write_text((task / "task.toml").read_text() + "\n# edited\n")
    refused = subprocess.run(args[:-1], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "checksum" in refused.stderr and len(refused.stderr.splitlines()) <= 2
