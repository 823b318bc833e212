"""When stale work is redone: a schedule for the study's setup, and the automation sensor.

Both are off unless the deployment opts in (docs/deploy.md): HRBENCH_SCHEDULE (a cron string)
turns the schedule on; HRBENCH_AUTOMATION=1 turns on the sensor that evaluates every asset's
automation condition (eager on new or updated inputs, and on a changed `code_version`).
A changed code version is a new study version, so in the same output directory the setup step
refuses it with a message; what the automation mostly does is finish new agents and retry
trials that ended in a harness error.
"""

from __future__ import annotations

import os

from dagster import (
    AssetSelection, AutomationConditionSensorDefinition, DefaultScheduleStatus, DefaultSensorStatus, JobDefinition,
    ScheduleDefinition,
)

from hrbench.catalogue import StudyNames

NIGHTLY = "0 3 * * *"


def build_schedules(names: StudyNames, setup_job: JobDefinition) -> list[ScheduleDefinition]:
    cron = os.environ.get("HRBENCH_SCHEDULE")
    return [ScheduleDefinition(
        name=names.name("study_refresh_schedule"), job=setup_job, cron_schedule=cron or NIGHTLY,
        default_status=DefaultScheduleStatus.RUNNING if cron else DefaultScheduleStatus.STOPPED,
        description="Re-audits the tasks and re-checks the pre-registration; the automation sensor then "
                    "re-materializes whatever that makes stale.",
    )]


def build_automation_sensor(names: StudyNames) -> AutomationConditionSensorDefinition:
    on = os.environ.get("HRBENCH_AUTOMATION", "") in ("1", "true", "yes")
    return AutomationConditionSensorDefinition(
        # the study's own assets (its namespace), not every asset the repository holds
        names.name("study_automation_sensor"), target=AssetSelection.key_prefixes([names.namespace]), minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING if on else DefaultSensorStatus.STOPPED,
        description="Evaluates the assets' automation conditions (stale inputs or code version).",
    )
