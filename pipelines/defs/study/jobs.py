"""Named asset jobs: one per step of a study, in the order the method requires.

Each job runs in one process (trials are parallel inside a step) and, through the single-run
backfill policy of its assets, over many partitions at once: a study of any size takes the same
runs per step. `hrbench run` launches these jobs; so do the agent sensor and the UI.
"""

from __future__ import annotations

import os
from typing import Callable, Literal

from dagster import AssetKey, AssetSelection, ExecutorDefinition, JobDefinition, define_asset_job, in_process_executor
from pydantic import BaseModel

from hrbench.protocol import Study

MAX_RUNTIME_TAG = "dagster/max_runtime"  # read by the daemon's run monitoring (deploy/dagster.yaml)
SETUP_TAG = "hrbench/setup"
DAY = 24 * 3600


class Step(BaseModel):
    """A study step: its job, the assets it materializes and how its runs are partitioned."""

    job: str
    assets: list[str]  # asset keys in their user string form: a condition's assets are `<condition>/<name>`
    partitioned: Literal["none", "agent", "agent_task"]
    label: str


def study_steps(conditions: list[str], prefix_rollouts: bool = False, depth: bool = False) -> list[Step]:
    """The steps of a study with these conditions: each condition's branch runs in the step of its kind
    (a condition's asset is `<condition>/<name>`); matched and solution-conditioned checkpoints need their
    prefix rollouts first;
    a study that declares `depth:` measures it in the setup step (`task_depth`)."""

    def per_condition(*names: str) -> list[str]:
        return [f"{c}/{n}" for c in conditions for n in names]

    contrasts = ["intervention_contrasts"] if len(conditions) > 1 else []
    return [
        Step(job="study_setup_job", assets=["task_catalog", "verifier_audit", "preregistration",
                                            *(["task_depth"] if depth else [])], partitioned="none",
             label="catalog, audit" + (", pre-registration and depth" if depth else " and pre-registration")),
        Step(job="agent_registration_job", assets=["agent_registration"], partitioned="agent", label="registration"),
        Step(job="checkpoint_trials_job", assets=[*(["prefix_rollouts"] if prefix_rollouts else []),
                                                  "checkpoint_trials"], partitioned="agent_task",
             label="checkpoint trials"),
        Step(job="expected_success_job", assets=per_condition("stage_estimates", "expected_success"),
             partitioned="agent", label="expected success"),
        Step(job="natural_trials_job", assets=per_condition("natural_trials"), partitioned="agent_task",
             label="natural trials"),
        Step(job="horizon_residuals_job", assets=[*per_condition("observed_success", "horizon_residuals"), *contrasts,
                                                  "sensitivity_sweep", "resource_accounting"],
             partitioned="agent", label="residuals, contrasts and sensitivity"),
        Step(job="study_report_job", assets=["study_report"], partitioned="none", label="report"),
    ]


def max_runtime_seconds() -> int:
    """HRBENCH_MAX_RUNTIME (seconds, default a day): run monitoring fails a step's run that takes longer (a hung
    model endpoint, a stuck sandbox); run retries then launch it again, resuming from the trial journals."""
    value = os.environ.get("HRBENCH_MAX_RUNTIME", str(DAY))
    if not value.isdigit() or int(value) <= 0:
        raise ValueError(f"HRBENCH_MAX_RUNTIME={value!r}: give a positive number of seconds")
    return int(value)


def agent_steps(steps: list[Step]) -> list[Step]:
    """The steps run once per agent (all but setup and report)."""
    return [s for s in steps if s.partitioned != "none"]


def build_jobs(study_name: str, steps: list[Step],
               executor_for: Callable[[str], ExecutorDefinition] = lambda job: in_process_executor) -> list[JobDefinition]:
    """The step jobs of a study, tagged with its name (runs are found by it in the UI); `executor_for` a job's
    name gives its executor (pipelines/defs/study/executor.py)."""
    return [
        define_asset_job(step.job, selection=AssetSelection.assets(*[AssetKey.from_user_string(a) for a in step.assets]),
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


def steps_for(study: Study) -> list[Step]:
    """The steps of this study (its conditions, and prefix rollouts if a protocol is matched or solution-conditioned)."""
    return study_steps(study.condition_names, study.needs_prefix_rollouts, study.depth is not None)
