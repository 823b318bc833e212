"""Retention of the instance's records: a nightly job that purges what a team no longer needs.

HRBENCH_RETENTION_DAYS=N turns the schedule on. Runs that failed or were canceled more than N days ago are
deleted with their event logs and compute logs; successful runs older than that lose their compute logs (each
step's stdout/stderr) but keep their event logs, which are the assets' materialization and check history the
UI, lineage and automation read (the tables themselves live in the study's store, untouched). Sensor and
schedule ticks are purged by the daemon itself (deploy/dagster.yaml, `retention`).
"""


import os
from datetime import datetime, timedelta, timezone

from dagster import (
    DagsterInstance, DagsterRunStatus, DefaultScheduleStatus, JobDefinition, OpExecutionContext, RunsFilter,
    ScheduleDefinition, in_process_executor, job, op,
)
from pydantic import BaseModel

from hrbench.catalogue import StudyNames

DAYS = "HRBENCH_RETENTION_DAYS"
PURGED_STATUSES = [DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


class Purged(BaseModel):
    """What one purge removed."""

    runs_deleted: int
    compute_logs_deleted: int


def retention_days() -> int | None:
    """HRBENCH_RETENTION_DAYS as a whole number of days, or None when unset."""
    value = os.environ.get(DAYS)
    if not value:
        return None
    if not value.isdigit():
        raise ValueError(f"{DAYS}={value!r}: give a whole number of days")
    return int(value)


def purge(instance: DagsterInstance, before: datetime, keep_run_id: str | None = None) -> Purged:
    """Delete failed and canceled runs created before `before`; drop the compute logs of every run before it."""
    old = instance.get_run_records(RunsFilter(created_before=before))
    deleted = logs = 0
    for record in old:
        run = record.dagster_run
        if run.run_id == keep_run_id or not run.is_finished:
            continue
        instance.compute_log_manager.delete_logs(prefix=[run.run_id])
        logs += 1
        if run.status in PURGED_STATUSES:
            instance.delete_run(run.run_id)
            deleted += 1
    return Purged(runs_deleted=deleted, compute_logs_deleted=logs)


@op
def purge_old_runs(context: OpExecutionContext) -> None:
    days = retention_days()
    if days is None:
        context.log.info(f"{DAYS} is not set: nothing purged")
        return
    purged = purge(context.instance, datetime.now(timezone.utc) - timedelta(days=days), keep_run_id=context.run_id)
    context.log.info(f"older than {days} days: {purged.runs_deleted} failed or canceled runs deleted, "
                     f"compute logs of {purged.compute_logs_deleted} runs deleted")


def build_retention_job(names: StudyNames) -> JobDefinition:
    """The purge job, named in the study's namespace: each study's code location carries one (the instance is
    shared, so every location's purge removes the same runs; a second one that night finds nothing left)."""
    @job(name=names.name("instance_retention_job"), executor_def=in_process_executor,  # one op: no subprocess
         description="Deletes failed and canceled runs, and every run's compute logs, older than HRBENCH_RETENTION_DAYS.")
    def instance_retention_job() -> None:
        purge_old_runs()

    return instance_retention_job


def build_retention_schedule(names: StudyNames, retention_job: JobDefinition) -> ScheduleDefinition:
    return ScheduleDefinition(
        name=names.name("instance_retention_schedule"), job=retention_job, cron_schedule="30 4 * * *",
        default_status=DefaultScheduleStatus.RUNNING if retention_days() is not None else DefaultScheduleStatus.STOPPED,
        description=f"Nightly purge of old failed runs and compute logs (${DAYS}).")


