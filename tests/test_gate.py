"""Protects the order of the method across runs: nothing downstream of a table is computed while one of its
blocking checks failed or never ran, however the run is launched, and nothing of an agent before setup."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import pytest
from dagster import (
    AssetKey, AssetSelection, DagsterInstance, MultiPartitionKey, build_sensor_context, evaluate_automation_conditions,
    materialize,
)

from hrbench.lineage import check_lines, check_record_key, read_record, record_key, verify
from hrbench.steps import StudyFailed
from hrbench.storage import store_for
from pipelines.builder import build_definitions
from pipelines.materialize import QUIET, launch_step, run_study
from tests.conftest import TINY, TINY_STUDY, store_table, stored_table

CHECKPOINT = "tables/checkpoint_trials/steady/tiny-chain.parquet"
PAIR = str(MultiPartitionKey({"agent": "steady", "task": "tiny-chain"}))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, DagsterInstance]:
    out = tmp_path_factory.mktemp("gated-study")
    instance = DagsterInstance.ephemeral()
    run_study(TINY_STUDY, out, instance=instance, progress=False)
    return out, instance


def _fail_checkpoint_quality(out: Path, instance: DagsterInstance) -> None:
    """A checkpoint table that lost a trial (its lineage record made to match, as if written so), then its
    blocking GX suite run for real through Dagster: it fails, and writes that verdict."""
    store = store_for(out)
    table = stored_table(out, CHECKPOINT)
    store_table(out, CHECKPOINT, table.iloc[1:])
    record = read_record(store, "checkpoint_trials", ("steady", "tiny-chain"))
    record.sha256 = hashlib.sha256(store.get(CHECKPOINT)).hexdigest()
    store.put(record_key("checkpoint_trials", ("steady", "tiny-chain")), record.model_dump_json().encode())
    defs = build_definitions(TINY_STUDY, out)
    checked = AssetKey(TINY.asset_key("checkpoint_trials"))
    checks = [c for c in defs.asset_checks if {k.asset_key for k in c.check_keys} == {checked}]
    result = materialize([defs.get_assets_def(checked), *checks], instance=instance, resources=defs.resources,
                         selection=AssetSelection.checks_for_assets(checked), raise_on_error=False, run_config=QUIET,
                         # a partition key is refused when no asset is selected; a range is what a UI launch sends
                         tags={"dagster/asset_partition_range_start": PAIR, "dagster/asset_partition_range_end": PAIR})
    verdicts = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert verdicts["data_quality"] is False and verdicts["hashes_match_stored_registration"] is True


def _materializations(instance: DagsterInstance, *path: str) -> int:
    return len(instance.fetch_materializations(AssetKey(TINY.asset_key("/".join(path))), limit=1000).records)


def test_a_failed_blocking_check_stops_every_launch_path_until_it_passes(study):
    out, instance = study
    _fail_checkpoint_quality(out, instance)
    before = {a: _materializations(instance, *a) for a in (("baseline", "stage_estimates"),
                                                           ("baseline", "expected_success"),
                                                           ("baseline", "natural_trials"))}
    defs = build_definitions(TINY_STUDY, out)

    # as the UI launches a job: the step job of the next step, on the agent's partition
    result = defs.resolve_job_def(TINY.name("expected_success_job")).execute_in_process(
        instance=instance, partition_key="steady", raise_on_error=False, run_config=QUIET)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "blocking check data_quality failed" in failure.step_failure_data.error.message

    # as a single-run backfill executes: one run over a range of partitions of a downstream asset
    tags = {"dagster/asset_partition_range_start": "steady|tiny-chain",
            "dagster/asset_partition_range_end": "steady|tiny-chain"}
    with pytest.raises(StudyFailed, match="checkpoint_trials/steady/tiny-chain: blocking check data_quality failed"):
        launch_step(instance, TINY.name("natural_trials_job"), tags, TINY_STUDY, out)

    # the agent sensor's tick asks for the failed step again, not for anything after it
    sensor = defs.get_sensor_def(TINY.name("agent_files_sensor"))
    requests = sensor(build_sensor_context(instance=instance)).run_requests
    assert [(r.job_name, r.tags["hrbench/agent"]) for r in requests] == [(TINY.name("checkpoint_trials_job"), "steady")]

    after = {a: _materializations(instance, *a) for a in before}
    assert after == before  # nothing downstream was materialized by any of them

    # verify and lineage name the table and the check
    problems, _ = verify(out)
    assert [(p.path, "blocking check data_quality failed" in p.problem) for p in problems] == [(CHECKPOINT, True)]
    lines = "\n".join(check_lines(store_for(out)))
    assert "NOT PASSED" in lines and "checkpoint_trials/steady/tiny-chain: blocking check data_quality failed" in lines

    # `hrbench run` re-runs the failed step first (its trials come back from the journal), then goes on
    earlier = {r.run_id for r in instance.get_runs()}
    run_study(TINY_STUDY, out, instance=instance, progress=False)
    assert verify(out)[0] == []
    assert "passed on all" in "\n".join(check_lines(store_for(out)))
    runs = [r.job_name for r in reversed(instance.get_runs()) if r.run_id not in earlier]
    assert runs[0] == TINY.name("checkpoint_trials_job"), runs  # the repair came before anything downstream


def test_a_check_that_never_ran_blocks_like_a_failed_one(study):
    out, instance = study
    # as if expected_success had been materialized by a run that left its checks out (possible from the UI)
    store_for(out).delete(check_record_key("baseline/expected_success", ("rotting",), "data_quality"))
    defs = build_definitions(TINY_STUDY, out)
    result = defs.resolve_job_def(TINY.name("natural_trials_job")).execute_in_process(
        instance=instance, raise_on_error=False, run_config=QUIET,
        partition_key=str(MultiPartitionKey({"agent": "rotting", "task": "tiny-chain"})))
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "baseline/expected_success/rotting: blocking check data_quality never ran" in \
        failure.step_failure_data.error.message
    assert [p.path for p in verify(out)[0]] == ["tables/baseline/expected_success/rotting.parquet"]


def test_what_the_automation_sensor_requests_past_a_failed_check_is_refused(study):
    out, instance = study
    defs = build_definitions(TINY_STUDY, out)
    cursor = evaluate_automation_conditions(defs, instance).cursor
    launch_step(instance, TINY.name("checkpoint_trials_job"), {"dagster/asset_partition_range_start": PAIR,
                                                    "dagster/asset_partition_range_end": PAIR}, TINY_STUDY, out)
    _fail_checkpoint_quality(out, instance)
    stage_estimates = AssetKey(TINY.asset_key("baseline/stage_estimates"))
    # Dagster's automation asks for the estimates of the updated trials (it does not weigh partitioned checks)...
    requested = evaluate_automation_conditions(defs, instance, cursor=cursor).get_requested_partitions(stage_estimates)
    assert requested == {"steady"}
    before = len(instance.fetch_materializations(stage_estimates, limit=1000).records)
    # ...and the run that request starts is refused by the asset
    result = materialize(list(defs.assets) + list(defs.asset_checks), instance=instance, resources=defs.resources,
                         selection=AssetSelection.assets(stage_estimates), partition_key="steady",
                         raise_on_error=False, run_config=QUIET)
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "checkpoint_trials/steady/tiny-chain: blocking check data_quality failed" in \
        failure.step_failure_data.error.message
    assert len(instance.fetch_materializations(stage_estimates, limit=1000).records) == before


def _backfill(context, instance: DagsterInstance, backfill_id: str, asset: AssetKey, agent: str):
    """One backfill of `asset` for `agent`, as the UI's "Materialize" over partitions submits it, run to its end by
    the backfill daemon's own iteration (runs launched through the code server, each in its own process)."""
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.storage.dagster_run import RunsFilter
    from dagster._daemon.backfill import execute_backfill_iteration

    instance.add_backfill(PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id, asset_graph=context.create_request_context().asset_graph, partition_names=[agent],
        asset_selection=[asset], backfill_timestamp=time.time(), tags={}, dynamic_partitions_store=instance,
        all_partitions=False, title=None, description=None, run_config=None))
    for _ in range(60):
        list(execute_backfill_iteration(context, logging.getLogger("backfill")))
        runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id}))
        if runs and all(r.is_finished for r in runs):
            return runs
        time.sleep(1)
    raise AssertionError(f"backfill {backfill_id} did not finish")


@pytest.mark.slow  # ~60 s: a study, a code server and two backfills' runs in their own processes
def test_a_backfill_past_a_failed_check_is_refused_until_it_passes(tmp_path: Path, monkeypatch):
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.workspace.load_target import ModuleTarget

    out = tmp_path / "out"
    monkeypatch.setenv("HRBENCH_STUDY", str(TINY_STUDY))
    monkeypatch.setenv("HRBENCH_OUT", str(out))
    direct = {"run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"},
              "telemetry": {"enabled": False}}
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "home"), overrides=direct) as instance:
        run_study(TINY_STUDY, out, instance=instance, progress=False)
        _fail_checkpoint_quality(out, instance)
        stage_estimates = AssetKey(TINY.asset_key("baseline/stage_estimates"))
        before = len(instance.fetch_materializations(stage_estimates, limit=1000).records)
        target = ModuleTarget(module_name="pipelines.definitions", attribute="defs",
                              working_directory=str(Path(__file__).resolve().parent.parent), location_name="hrbench")
        with create_test_daemon_workspace_context(target, instance) as context:
            (refused,) = _backfill(context, instance, "past-a-failed-check", stage_estimates, "steady")
            assert refused.status.value == "FAILURE"
            failures = [e.dagster_event.step_failure_data.error.message for e in instance.all_logs(refused.run_id)
                        if e.dagster_event and e.dagster_event.is_step_failure]
            assert any("checkpoint_trials/steady/tiny-chain: blocking check data_quality failed" in m for m in failures)
            assert len(instance.fetch_materializations(stage_estimates, limit=1000).records) == before

            launch_step(instance, TINY.name("checkpoint_trials_job"), {"dagster/asset_partition_range_start": PAIR,
                                                            "dagster/asset_partition_range_end": PAIR}, TINY_STUDY, out)
            (passed,) = _backfill(context, instance, "after-it-passed", stage_estimates, "steady")
            assert passed.status.value == "SUCCESS"
            assert len(instance.fetch_materializations(stage_estimates, limit=1000).records) == before + 1


def test_the_sensor_starts_no_agent_before_setup(tmp_path: Path):
    defs = build_definitions(TINY_STUDY, tmp_path)
    instance = DagsterInstance.ephemeral()
    sensor = defs.get_sensor_def(TINY.name("agent_files_sensor"))
    result = sensor(build_sensor_context(instance=instance))
    assert [r.job_name for r in result.run_requests] == [TINY.name("study_setup_job")]
    # and an agent's registration launched anyway (from the UI) refuses before setup
    instance.add_dynamic_partitions(TINY.agents, ["steady"])
    run = defs.resolve_job_def(TINY.name("agent_registration_job")).execute_in_process(
        instance=instance, partition_key="steady", raise_on_error=False, run_config=QUIET)
    assert not run.success and not (tmp_path / "registrations").exists()
    failure = next(e for e in run.all_events if e.is_step_failure)
    assert "no pre-registration stored" in failure.step_failure_data.error.message
