"""Protects the deployment's reliability settings (deploy/dagster.yaml): the instance it describes loads, retries
only runs whose worker failed, bounds run time, fails runs whose worker died, and queues a second run of an agent."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRun
from dagster._core.events import EngineEventData
from dagster._core.launcher.base import WorkerStatus
from dagster._core.run_coordinator.queued_run_coordinator import RunQueueConfig
from dagster._utils.tags import TagConcurrencyLimitsCounter

from pipelines.launcher import MonitoredRunLauncher, process_alive_since

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def deploy_instance(tmp_path: Path):
    """deploy/dagster.yaml as written, but for its storage: SQLite under the test's directory, not PostgreSQL."""
    config = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    config["storage"] = {"sqlite": {"base_dir": str(tmp_path / "storage")}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        yield instance


def test_runs_are_retried_only_when_their_worker_failed(deploy_instance: DagsterInstance):
    assert deploy_instance.run_retries_enabled and deploy_instance.run_retries_max_retries == 2
    assert not deploy_instance.run_retries_retry_on_asset_or_op_failure  # a failed check is not retried
    assert deploy_instance.run_monitoring_enabled and deploy_instance.run_monitoring_max_runtime_seconds == 86400
    assert deploy_instance.run_monitoring_max_resume_run_attempts == 0  # DefaultRunLauncher cannot resume in place
    assert isinstance(deploy_instance.run_launcher, MonitoredRunLauncher)
    assert deploy_instance.run_launcher.supports_check_run_worker_health


def _run(instance: DagsterInstance, **tags: str) -> DagsterRun:
    return instance.add_run(DagsterRun(job_name="checkpoint_trials_job", run_id=str(uuid.uuid4()), tags=tags))


@pytest.mark.parametrize("tag", ["hrbench/agent", "dagster/partition", "dagster/partition/agent", "hrbench/endpoint",
                                 "hrbench/setup"])
def test_a_second_run_on_an_agent_waits_in_the_queue(deploy_instance: DagsterInstance, tag: str):
    queue: RunQueueConfig = deploy_instance.get_concurrency_config().run_queue_config
    running = _run(deploy_instance, **{tag: "steady"})
    counter = TagConcurrencyLimitsCounter(queue.tag_concurrency_limits, [running])
    assert counter.is_blocked(_run(deploy_instance, **{tag: "steady"}))  # the same agent (or endpoint): waits
    assert not counter.is_blocked(_run(deploy_instance, **{tag: "rotting"}))  # another: starts
    assert queue.max_concurrent_runs == 4


def test_the_sandbox_pool_bounds_steps_across_runs(deploy_instance: DagsterInstance):
    pools = deploy_instance.get_concurrency_config().pool_config
    assert pools.default_pool_limit == 2 and pools.pool_granularity.value == "op"


def test_run_monitoring_sees_a_dead_run_worker(deploy_instance: DagsterInstance):
    launcher = deploy_instance.run_launcher
    run = _run(deploy_instance)
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING  # no worker yet: the start timeout's
    worker = subprocess.Popen(["sleep", "120"])
    try:
        # what a run worker records first (dagster/_grpc/impl.py)
        deploy_instance.report_engine_event(f"Started process for run (pid: {worker.pid}).", run,
                                            EngineEventData.in_process(worker.pid))
        assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
        worker.kill()
        deadline = time.monotonic() + 10
        while ") Z " not in Path(f"/proc/{worker.pid}/stat").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launcher.check_run_worker_health(run).status == WorkerStatus.FAILED  # dead, not yet reaped
    finally:
        worker.kill()
        worker.wait()
    health = launcher.check_run_worker_health(run)  # gone
    assert health.status == WorkerStatus.FAILED and str(worker.pid) in health.msg


def test_a_reused_pid_is_not_the_run_worker():
    worker = subprocess.Popen(["sleep", "120"])
    try:
        assert process_alive_since(worker.pid, time.time())
        assert not process_alive_since(worker.pid, time.time() - 3600)  # started long after the worker recorded it
    finally:
        worker.kill()
        worker.wait()


def test_the_s3_instance_is_the_plain_one_with_compute_logs_in_the_bucket():
    plain = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    s3 = yaml.safe_load((REPO / "deploy" / "dagster-s3.yaml").read_text())
    compute_logs = s3.pop("compute_logs")
    assert s3 == plain
    assert compute_logs["class"] == "S3ComputeLogManager" and compute_logs["config"]["bucket"] == {"env": "HRBENCH_S3_BUCKET"}


def test_compute_logs_land_in_the_study_bucket(tmp_path: Path, moto_s3, monkeypatch):
    """A run's step output on deploy/dagster-s3.yaml's instance is uploaded to the bucket (moto's S3 server)."""
    import boto3
    from dagster import execute_job, reconstructable

    from tests.deploy.printing_job import printing_job

    endpoint, bucket = moto_s3
    monkeypatch.setenv("HRBENCH_S3_BUCKET", bucket)
    monkeypatch.setenv("HRBENCH_S3_ENDPOINT_URL", endpoint)
    config = yaml.safe_load((REPO / "deploy" / "dagster-s3.yaml").read_text())
    config["storage"] = {"sqlite": {"base_dir": str(tmp_path / "storage")}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    job = reconstructable(printing_job)
    with DagsterInstance.from_config(str(tmp_path)) as instance, execute_job(job, instance) as result:
        assert result.success
        run_id = result.run_id
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="dagster-compute-logs/").get("Contents", [])]
    assert any(run_id in k for k in keys), keys
    out = [k for k in keys if k.endswith(".out")]
    assert any(b"step output for the bucket" in client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in out)
