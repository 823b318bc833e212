"""The run launcher of a one-host deployment: Dagster's DefaultRunLauncher, plus the health check run monitoring
needs to notice a run worker that died.

DefaultRunLauncher starts each run in a process of the code server and cannot say whether that process still
lives, so a worker killed with the daemon (or by the OOM killer) left its run STARTED forever, holding a queue
slot. The worker records its pid in the run's first engine event ("Started process for run (pid: N)"); this
launcher reports the worker FAILED once that process is gone (or is another process that got the pid), so the
daemon's run monitoring marks the run failed and run retries launch it again (deploy/dagster.yaml). The check
reads /proc of this host: it holds when the code server runs on the daemon's host, as the workspace's
`python_module` location does (the daemon starts it).
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterEventType, DagsterRun, DefaultRunLauncher
from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus

# A worker process starts a moment before it records its pid; a process that started later than this after the
# record is another process that reused the pid.
PID_REUSE_SLACK_SECONDS = 5.0


class MonitoredRunLauncher(DefaultRunLauncher):
    """DefaultRunLauncher whose run workers the daemon's run monitoring can check (same-host code servers)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        started = worker_start(self._instance, run.run_id)
        if started is None:
            # no worker has recorded itself yet; run monitoring's start timeout covers a worker that never starts
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker not started yet")
        pid, recorded_at = started
        if process_alive_since(pid, recorded_at):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker pid {pid} is alive")
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run worker pid {pid} is gone (killed, or its host "
                                                          "restarted): the run did not finish")


def worker_start(instance, run_id: str) -> tuple[int, float] | None:
    """(pid, unix time) the run's worker recorded in its engine event, or None before it has."""
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        metadata = record.dagster_event.engine_event_data.metadata if record.dagster_event else {}
        if "pid" in metadata and "Started process for run" in (record.dagster_event.message or ""):
            return int(metadata["pid"].value), record.timestamp
    return None


def process_alive_since(pid: int, not_after: float) -> bool:
    """The process `pid` is running (not a zombie) and started no later than `not_after` (+ slack)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # fields after the command name (which may hold spaces and parentheses): state is the 3rd, start time the 22nd
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return False
    boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= not_after + PID_REUSE_SLACK_SECONDS
