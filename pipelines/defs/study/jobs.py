"""Named asset jobs: one per step of a study (hrbench/steps.py), in the order the method requires.

Each job runs in one process (trials are parallel inside a step) and, through the single-run
backfill policy of its assets, over many partitions at once: a study of any size takes the same
runs per step. `hrbench run` launches these jobs; so do the agent sensor and the UI.
"""

from __future__ import annotations

from typing import Callable

from dagster import AssetKey, AssetSelection, ExecutorDefinition, JobDefinition, define_asset_job, in_process_executor

from hrbench.steps import Step


def build_jobs(study_name: str, steps: list[Step],
               executor_for: Callable[[str], ExecutorDefinition] = lambda job: in_process_executor) -> list[JobDefinition]:
    """The step jobs of a study, tagged with its name (runs are found by it in the UI); `executor_for` a job's
    name gives its executor (pipelines/defs/study/executor.py)."""
    return [
        define_asset_job(step.job, selection=AssetSelection.assets(*[AssetKey.from_user_string(a) for a in step.assets]),
                         executor_def=executor_for(step.job), tags={"hrbench/study": study_name},
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
