"""Protects retention: old failed runs go with their logs, old successful runs keep their event logs (the
materialization history) but lose their compute logs; the schedule runs only when a retention is set."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from dagster import DagsterInstance, DefaultScheduleStatus

from hrbench.catalogue import StudyNames
from pipelines.defs.operations.retention import build_retention_job, build_retention_schedule, purge
from tests.deploy.printing_job import failing_job, printing_job


NAMES = StudyNames.of("tiny")


def _log_dirs(instance: DagsterInstance, run_id: str) -> list[Path]:
    return [p for p in Path(instance.root_directory).rglob("*") if p.is_dir() and p.name == run_id]


def test_old_failed_runs_and_all_old_compute_logs_are_purged(tmp_path: Path):
    with DagsterInstance.local_temp(tempdir=str(tmp_path)) as instance:
        kept = printing_job.execute_in_process(instance=instance)
        gone = failing_job.execute_in_process(instance=instance, raise_on_error=False)
        assert _log_dirs(instance, kept.run_id) and _log_dirs(instance, gone.run_id)  # compute logs captured

        assert purge(instance, datetime.now(timezone.utc) - timedelta(days=1)).runs_deleted == 0  # nothing that old
        purged = purge(instance, datetime.now(timezone.utc) + timedelta(seconds=1))
        assert (purged.runs_deleted, purged.compute_logs_deleted) == (1, 2)
        assert instance.get_run_by_id(gone.run_id) is None and not instance.all_logs(gone.run_id)
        assert instance.get_run_by_id(kept.run_id) is not None and instance.all_logs(kept.run_id)
        assert not _log_dirs(instance, kept.run_id) and not _log_dirs(instance, gone.run_id)


def test_the_retention_job_runs_on_the_instance(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HRBENCH_RETENTION_DAYS", "0")
    with DagsterInstance.local_temp(tempdir=str(tmp_path)) as instance:
        old = failing_job.execute_in_process(instance=instance, raise_on_error=False)
        result = build_retention_job(NAMES).execute_in_process(instance=instance)
        assert result.success
        assert instance.get_run_by_id(old.run_id) is None and instance.get_run_by_id(result.run_id) is not None
    assert build_retention_schedule(NAMES, build_retention_job(NAMES)).default_status == DefaultScheduleStatus.RUNNING
    monkeypatch.delenv("HRBENCH_RETENTION_DAYS")
    assert build_retention_schedule(NAMES, build_retention_job(NAMES)).default_status == DefaultScheduleStatus.STOPPED
