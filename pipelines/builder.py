"""Build the Dagster Definitions of one study (its task names shape the partitions).

The assets and checks come from `assets/`; each domain under `pipelines/defs/` contributes its jobs, schedules,
sensors and executor;
`pipelines/definitions.py` is the one code location that calls this.
"""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions

from assets.checks import build_study_checks
from assets.partitions import agent_task_partitions
from assets.study import build_study_assets
from hrbench.protocol import load_study
from hrbench.steps import steps_for
from hrbench.tasks.loader import load_registry
from pipelines.defs.agents.sensors import build_agent_sensor
from pipelines.defs.operations.alerts import build_failure_alert_sensor
from pipelines.defs.operations.retention import build_retention_schedule, instance_retention_job
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
    agent_task = agent_task_partitions(task_names)
    conditions = loaded.study.condition_names
    out = Path(out_dir).resolve()
    jobs = build_jobs(loaded.study.name, steps_for(loaded.study),
                      lambda job: step_executor(job, executor, loaded.source, Path(loaded.registry), out))
    storage = storage_from_env()  # local disk unless HRBENCH_STORE=s3 (docs/storage.md)
    return Definitions(
        assets=build_study_assets(agent_task, conditions, loaded.study.needs_prefix_rollouts,
                                  depth=loaded.study.depth is not None),
        asset_checks=build_study_checks(agent_task, conditions),
        jobs=[*jobs, instance_retention_job],
        schedules=[*build_schedules(jobs[0]), build_retention_schedule()],
        sensors=[build_agent_sensor(study_path, out, task_names, jobs), build_automation_sensor(),
                 build_failure_alert_sensor()],
        resources={
            "study": StudyResource(study_path=str(Path(study_path).resolve()), out_dir=str(out), progress=progress,
                                   storage=storage),
            "io_manager": TableIOManager(root=str(out), storage=storage),
        },
    )
