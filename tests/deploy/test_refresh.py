"""Protects the scheduled refresh (issue 23): re-materializing a finished study through Dagster — the schedule's
own job, then every step job of every agent, as "Materialize all" does — succeeds on the local store and on S3
(moto), re-uses the stored verifier audit and re-runs no trial."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, build_schedule_context

from pipelines.builder import build_definitions
from hrbench.steps import steps_for
from pipelines.defs.study.jobs import step_tags
from pipelines.materialize import launch_step, run_study
from hrbench.protocol import load_study
from hrbench.catalogue import StudyNames
from tests.deploy.conftest import snapshot, write_study

REFRESH = StudyNames.of("refresh")  # the Dagster names of the study below

pytestmark = pytest.mark.slow  # ~40-70 s per store at a load of 20-40 on 2 cores: a study, then its refresh


@pytest.fixture(params=["local", "s3"])
def store(request, monkeypatch) -> str:
    """The study's store: its output directory, or a fresh prefix in moto's bucket."""
    monkeypatch.setenv("HRBENCH_STORE", request.param)
    if request.param == "s3":
        endpoint, bucket = request.getfixturevalue("moto_s3")
        monkeypatch.setenv("HRBENCH_S3_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("HRBENCH_S3_BUCKET", bucket)
        monkeypatch.setenv("HRBENCH_S3_PREFIX", f"refresh-{uuid.uuid4().hex[:8]}/{{out}}")
    return request.param


def _audit_reused(instance: DagsterInstance) -> bool:
    event = instance.get_latest_materialization_event(AssetKey(REFRESH.asset_key("verifier_audit")))
    return event.asset_materialization.metadata["reused"].value


def test_a_finished_study_refreshes_through_every_job(tmp_path: Path, store: str):
    study = write_study(tmp_path, ["steady"], name="refresh")
    out = (tmp_path / "out").resolve()
    instance = DagsterInstance.ephemeral()
    run_study(study, out, instance=instance, progress=False)
    assert not _audit_reused(instance)  # the first setup audited the tasks
    before = snapshot(out, ["steady"])
    assert any(k.startswith("journal/") for k in before) and any("checkpoint_trials" in k for k in before)

    # the refresh schedule's own tick, launched as the daemon would (its job, its tags)
    schedule = build_definitions(study, out).get_schedule_def(REFRESH.name("study_refresh_schedule"))
    requests = schedule.evaluate_tick(build_schedule_context(instance=instance)).run_requests
    assert [r.job_name or schedule.job_name for r in requests] == [REFRESH.name("study_setup_job")]
    launch_step(instance, schedule.job_name, dict(requests[0].tags), study, out)
    assert _audit_reused(instance)  # the stored audit (with its list-valued `notes`) read back

    # every asset again: each step job, for the agent, whatever step_done says
    tasks = _task_names(study)
    for step in steps_for(load_study(study).study):
        agent = None if step.partitioned == "none" else "steady"
        launch_step(instance, REFRESH.name(step.job), step_tags(step, agent, tasks), study, out)

    after = snapshot(out, ["steady"])
    journals = {k: v for k, v in before.items() if k.startswith("journal/")}
    assert {k: after[k] for k in journals} == journals  # not one trial ran again
    assert set(after) == set(before)


def _task_names(study: Path) -> list[str]:
    from hrbench.tasks.loader import load_registry

    loaded = load_study(study)
    return [t.name for t in load_registry(loaded.registry, loaded.study.tasks.include)]
