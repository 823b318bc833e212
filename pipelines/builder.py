"""Build the Dagster Definitions of one study (its task names shape the partitions).

The assets and checks come from `assets/`; each domain under `pipelines/defs/` contributes its jobs, schedules,
sensors and executor;
`pipelines/definitions.py` is the code location that calls this, one per study. Every Dagster name the study
defines carries its namespace (`StudyNames`: asset keys `<study>/...`, jobs, sensors, schedules and the agents'
partitions `<study>__...`), so the code locations of several studies share one instance (docs/deploy.md).
"""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions

from assets.checks import build_study_checks
from assets.partitions import agent_task_partitions
from assets.study import build_study_assets
from hrbench.catalogue import StudyNames
from hrbench.protocol import load_study
from hrbench.steps import steps_for
from hrbench.tasks.loader import load_registry
from pipelines.defs.agents.sensors import build_agent_sensor
from pipelines.defs.operations.alerts import build_failure_alert_sensor
from pipelines.defs.operations.retention import build_retention_job, build_retention_schedule
from pipelines.defs.study.executor import ExecutorSettings, step_executor
from pipelines.defs.study.jobs import build_jobs
from pipelines.defs.study.schedules import build_automation_sensor, build_schedules
from resources.storage import storage_from_env
from resources.study import StudyResource, TableIOManager


def build_definitions(study_path: str | Path, out_dir: str | Path, progress: bool = False,
                      executor: ExecutorSettings = ExecutorSettings()) -> Definitions:
    """Definitions for one study: its task partitions, assets, checks, step jobs, schedule, sensors, resources;
    the trial steps under `executor` (in-process by default)."""
    loaded = load_study(study_path)
    task_names = [t.name for t in load_registry(loaded.registry, loaded.study.tasks.include)]
    names = StudyNames.of(loaded.study.name)
    agent_task = agent_task_partitions(names, task_names)
    conditions = loaded.study.condition_names
    out = Path(out_dir).resolve()
    jobs = build_jobs(loaded.study.name, steps_for(loaded.study),
                      lambda job: step_executor(job, executor, loaded.source, Path(loaded.registry), out))
    storage = storage_from_env()  # local disk unless HRBENCH_STORE=s3 (docs/storage.md)
    retention = build_retention_job(names)
    return Definitions(
        assets=build_study_assets(names, agent_task, conditions, loaded.study.needs_prefix_rollouts,
                                  depth=loaded.study.depth is not None),
        asset_checks=build_study_checks(names, agent_task, conditions),
        jobs=[*jobs, retention],
        schedules=[*build_schedules(names, jobs[0]), build_retention_schedule(names, retention)],
        sensors=[build_agent_sensor(names, study_path, out, agent_task, jobs), build_automation_sensor(names),
                 build_failure_alert_sensor(names)],
        resources={
            "study": StudyResource(study_path=str(Path(study_path).resolve()), out_dir=str(out), progress=progress,
                                   storage=storage),
            "io_manager": TableIOManager(root=str(out), storage=storage),
        },
    )
