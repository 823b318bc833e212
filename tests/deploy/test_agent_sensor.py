"""Protects "backfill a new model": adding an agent file runs exactly that agent, nothing already there changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, build_sensor_context, instance_for_test
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, ROOT_RUN_ID_TAG, WILL_RETRY_TAG

from pipelines.builder import build_definitions
from pipelines.materialize import launch_step, run_study
from tests.deploy.conftest import DEPLOY, snapshot, write_study
from tests.conftest import stored_table


def _sensor(defs):
    return defs.get_sensor_def(DEPLOY.name("agent_files_sensor"))


# slow: three agents' studies through the sensor (~100 s); scripts/test.sh runs it
@pytest.mark.slow
def test_a_new_agent_file_backfills_only_that_agent(tmp_path: Path):
    study = write_study(tmp_path, ["steady", "rotting"])
    out = tmp_path / "out"
    instance = DagsterInstance.ephemeral()
    run_study(study, out, instance=instance, progress=False)
    prereg_before = (out / "preregistration.json").read_bytes()
    old = snapshot(out, ["steady", "rotting"])
    assert len(old) > 10 and any("journal" in k for k in old)
    runs_before = {r.run_id for r in instance.get_runs()}

    # the user adds a model: one more agent file, one more line in the study
    write_study(tmp_path, ["steady", "rotting", "third"])
    defs = build_definitions(study, out)
    sensor = _sensor(defs)
    cursor, ticks, requested = None, 0, []
    while True:
        ticks += 1
        assert ticks < 12, "the sensor never finished the new agent"
        result = sensor(build_sensor_context(instance=instance, cursor=cursor))
        cursor = result.cursor
        for request in result.dynamic_partitions_requests:
            assert list(request.partition_keys) == ["third"]  # the old agents have their partitions
            instance.add_dynamic_partitions(DEPLOY.agents, list(request.partition_keys))
        if not result.run_requests:
            break
        for request in result.run_requests:
            partition_tags = {k: v for k, v in request.tags.items() if "partition" in k}
            if request.job_name != DEPLOY.name("study_report_job"):
                assert request.tags["hrbench/agent"] == "third"
                assert partition_tags and all(v.split("|")[0] == "third" for v in partition_tags.values()), request
            else:
                assert not partition_tags
            requested.append(request.job_name)
            launch_step(instance, request.job_name, {**request.tags, "dagster/run_key": request.run_key or ""},
                        study, out)
    assert requested == [DEPLOY.name(j) for j in ("agent_registration_job", "checkpoint_trials_job", "expected_success_job",
                                                  "natural_trials_job", "horizon_residuals_job", "study_report_job")]
    assert json.loads(cursor) .keys() == {"steady", "rotting", "third"}

    for kind in ("checkpoint_trials", "baseline/natural_trials"):
        table = stored_table(out, f"tables/{kind}/third/tiny-chain.parquet")
        assert len(table) and set(table["agent"]) == {"third"}
    assert snapshot(out, ["steady", "rotting"]) == old  # tables and journals byte-identical: nothing re-ran
    assert (out / "preregistration.json").read_bytes() == prereg_before  # the protocol did not change
    new_runs = [r for r in instance.get_runs() if r.run_id not in runs_before]
    assert len(new_runs) == len(requested)  # one run per step, whatever the number of tasks
    summary = json.loads((out / "summary.json").read_text())
    assert {r["agent"] for r in summary["residuals"]} == {"steady", "rotting", "third"}
    # and the next tick has nothing left to do
    assert not sensor(build_sensor_context(instance=instance, cursor=cursor)).run_requests


def test_a_changed_agent_is_refused_not_rerun(tmp_path: Path):
    study = write_study(tmp_path, ["steady"])
    out = tmp_path / "out"
    instance = DagsterInstance.ephemeral()
    run_study(study, out, instance=instance, progress=False)
    before = snapshot(out, ["steady"])
    changed = yaml.safe_load((tmp_path / "agents" / "steady.yaml").read_text())
    changed["sim"]["skill"] = 0.5
    (tmp_path / "agents" / "steady.yaml").write_text(yaml.safe_dump(changed))
    result = _sensor(build_definitions(study, out))(build_sensor_context(instance=instance))
    assert not result.run_requests
    from hrbench.protocol import StudyError

    with pytest.raises(StudyError, match="a changed agent is a new agent"):
        run_study(study, out, instance=instance, progress=False)
    assert snapshot(out, ["steady"]) == before


def test_a_step_under_way_or_awaiting_dagsters_retry_is_not_requested_again(tmp_path: Path):
    """One run of a step at a time: the sensor requests none beside a setup launched from the UI (or the refresh
    schedule), nor beside a failed run that Dagster's run retries will launch again (its worker died), nor in the
    moment between Dagster storing that failure and tagging the run `dagster/will_retry`."""
    study = write_study(tmp_path, ["steady"])
    defs = build_definitions(study, tmp_path / "out")
    sensor = _sensor(defs)
    setup = defs.resolve_job_def(DEPLOY.name("study_setup_job"))
    with instance_for_test(overrides={"run_retries": {"enabled": True, "max_retries": 2}}) as instance:
        assert [r.job_name for r in sensor(build_sensor_context(instance=instance)).run_requests] == [setup.name]

        # launched from the UI: the job's own tags, none of the sensor's
        ui_run = instance.create_run_for_job(job_def=setup, tags=setup.tags)
        assert not sensor(build_sensor_context(instance=instance)).run_requests

        # a failed run not tagged yet (Dagster stores the failure, then decides on a retry): Dagster's to decide
        untagged = instance.create_run_for_job(job_def=setup, tags=setup.tags, status=DagsterRunStatus.FAILURE)
        instance.delete_run(ui_run.run_id)
        assert WILL_RETRY_TAG not in instance.get_run_by_id(untagged.run_id).tags
        assert not sensor(build_sensor_context(instance=instance)).run_requests
        instance.delete_run(untagged.run_id)

        # its worker was killed; run monitoring failed it and Dagster will retry it (deploy/dagster.yaml run_retries)
        ui_run = instance.create_run_for_job(job_def=setup, tags=setup.tags)
        instance.report_run_failed(ui_run, message="run worker pid 1 is gone")
        assert instance.get_run_by_id(ui_run.run_id).tags[WILL_RETRY_TAG] == "true"
        assert not sensor(build_sensor_context(instance=instance)).run_requests
        retry = instance.create_run_for_job(job_def=setup, tags={**setup.tags, PARENT_RUN_ID_TAG: ui_run.run_id,
                                                                 ROOT_RUN_ID_TAG: ui_run.run_id})
        assert not sensor(build_sensor_context(instance=instance)).run_requests

        # Dagster's retries are used up: the sensor requests the step again
        instance.report_run_failed(retry, message="run worker pid 2 is gone")
        instance.add_run_tags(retry.run_id, {WILL_RETRY_TAG: "false"})
        assert [r.job_name for r in sensor(build_sensor_context(instance=instance)).run_requests] == [setup.name]
