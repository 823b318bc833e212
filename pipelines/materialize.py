"""Materialize a whole study in-process, in the order the method requires.

Order: catalog -> audit -> preregistration -> checkpoint trials (every agent x task)
-> stage estimates -> expected success -> natural trials -> observed -> residuals
-> report. Each step is a Dagster run on a persistent instance under OUT/.dagster,
so `hrbench ui --out OUT` shows the lineage, and a killed run resumes from the
trial journals.
"""

from __future__ import annotations

from pathlib import Path

from dagster import AssetSelection, DagsterEventType, DagsterInstance, MultiPartitionKey, materialize
from rich.console import Console

from hrbench.study_run import StudyRun
from pipelines.builder import build_definitions
from pipelines.defs.study.partitions import AGENTS


# Dagster's console logger at DEBUG drowns the progress bars; the event log keeps everything.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class StudyFailed(RuntimeError):
    """A step of the study failed; the message says which and why."""


def instance_for(out_dir: Path) -> DagsterInstance:
    home = out_dir / ".dagster"
    home.mkdir(parents=True, exist_ok=True)
    return DagsterInstance.local_temp(tempdir=str(home))


def run_study(study_path: str | Path, out_dir: str | Path, console: Console | None = None,
              instance: DagsterInstance | None = None, progress: bool = True) -> StudyRun:
    """Run every asset of the study; returns the StudyRun whose out_dir holds the results."""
    console = console or Console(stderr=True)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    defs = build_definitions(study_path, out, progress=progress)
    run = StudyRun.from_file(study_path, out, progress)
    run.check_out_dir()  # fail before any work if OUT holds another study version
    instance = instance or instance_for(out)
    agents = [a.id for a in run.study.agents]
    known = set(instance.get_dynamic_partitions(AGENTS.name))
    instance.add_dynamic_partitions(AGENTS.name, [a for a in agents if a not in known])
    assets = list(defs.assets or []) + list(defs.asset_checks or [])
    resources = defs.resources

    def step(names: list[str], partition: str | None = None, label: str = "") -> None:
        result = materialize(assets, selection=AssetSelection.assets(*names), partition_key=partition,
                             instance=instance, resources=resources, raise_on_error=False, run_config=QUIET,
                             tags={"hrbench/study": run.study.name})
        failed_checks = [e for e in result.get_asset_check_evaluations() if not e.passed]
        if not result.success or failed_checks:
            reasons = [f"check {e.check_name}: {e.description}" for e in failed_checks]
            for event in result.all_events:
                if event.event_type == DagsterEventType.STEP_FAILURE and event.step_failure_data.error:
                    reasons.append(event.step_failure_data.error.message.strip())
            raise StudyFailed(f"{label or ','.join(names)} failed:\n" + "\n".join(reasons))

    console.print(f"[bold]study[/] {run.study.name}  tasks={len(run.tasks)} agents={len(agents)}  out={out}")
    step(["task_catalog", "verifier_audit", "preregistration"], label="catalog, audit and pre-registration")
    console.print(f"pre-registered: prereg_sha256={run.prereg_sha256}")
    for agent in agents:
        for task in run.tasks:
            step(["checkpoint_trials"], str(MultiPartitionKey({"agent": agent, "task": task.name})),
                 f"checkpoint trials {agent}/{task.name}")
        step(["stage_estimates", "expected_success"], agent, f"expected success {agent}")
        for task in run.tasks:
            step(["natural_trials"], str(MultiPartitionKey({"agent": agent, "task": task.name})),
                 f"natural trials {agent}/{task.name}")
        step(["observed_success", "horizon_residuals"], agent, f"residuals {agent}")
        console.print(f"  agent {agent}: done")
    step(["study_report"], label="report")
    return run



