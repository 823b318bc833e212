"""Named asset jobs: one per step of a study (hrbench/steps.py), in the order the method requires.

Each job runs in one process (trials are parallel inside a step) and, through the single-run
backfill policy of its assets, over many partitions at once: a study of any size takes the same
runs per step. `hrbench run` launches these jobs; so do the agent sensor and the UI.
"""

from __future__ import annotations

import os
from typing import Callable

from dagster import AssetKey, AssetSelection, ExecutorDefinition, JobDefinition, define_asset_job, in_process_executor

from hrbench.catalogue import StudyNames
from hrbench.steps import Step

MAX_RUNTIME_TAG = "dagster/max_runtime"  # read by the daemon's run monitoring (deploy/dagster.yaml)
SETUP_TAG = "hrbench/setup"
DAY = 24 * 3600


def max_runtime_seconds() -> int:
    """HRBENCH_MAX_RUNTIME (seconds, default a day): run monitoring fails a step's run that takes longer (a hung
    model endpoint, a stuck sandbox); run retries then launch it again, resuming from the trial journals."""
    value = os.environ.get("HRBENCH_MAX_RUNTIME", str(DAY))
    if not value.isdigit() or int(value) <= 0:
        raise ValueError(f"HRBENCH_MAX_RUNTIME={value!r}: give a positive number of seconds")
    return int(value)


def build_jobs(study_name: str, steps: list[Step],
               executor_for: Callable[[str], ExecutorDefinition] = lambda job: in_process_executor) -> list[JobDefinition]:
    """The step jobs of a study, named and selecting keys in its namespace (`<study>__study_setup_job`, StudyNames)
    and tagged with its name (runs are found by it in the UI); `executor_for` a step's job gives its executor
    (pipelines/defs/study/executor.py)."""
    names = StudyNames.of(study_name)
    return [
        define_asset_job(names.name(step.job),
                         selection=AssetSelection.assets(*[AssetKey(names.asset_key(a)) for a in step.assets]),
                         executor_def=executor_for(step.job),
                         tags={"hrbench/study": study_name, MAX_RUNTIME_TAG: str(max_runtime_seconds()),
                               # one setup of a study at a time (deploy/dagster.yaml): a refresh never races the first
                               **({SETUP_TAG: study_name} if "preregistration" in step.assets else {})},
                         description=f"Study step: {step.label}.")
        for step in steps
    ]


def step_tags(step: Step, agent: str | None, task_names: list[str]) -> dict[str, str]:
    """The partition tags of a step's run: one agent, or a range over every task of one agent."""
    if step.partitioned == "agent":
        return {"dagster/partition": str(agent)}
    if step.partitioned == "agent_task":
        # agent x task keys are ordered agent first, tasks in the study's order: one agent's tasks are one range.
        return {"dagster/asset_partition_range_start": f"{agent}|{task_names[0]}",
                "dagster/asset_partition_range_end": f"{agent}|{task_names[-1]}"}
    return {}
