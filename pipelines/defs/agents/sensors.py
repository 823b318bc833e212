"""The agent sensor: watches the study's agents (inline or `config:` files) and backfills a new one.

Its cursor maps agent id -> the hash its registration would have. Each tick re-reads the study
file, so an agent added after the code location loaded is seen: it gets a partition, then the
runs of its next unfinished step, one step per tick. Nothing of an agent is requested before the
study's setup step (audit, pre-registration) is done, and a step is done only once its blocking
checks passed on its tables (hrbench/steps.py); the assets themselves refuse to run past a failed or
missing check however they are launched (hrbench/gate.py), so the sensor's order is a convenience,
not the guarantee. A step whose run failed, or never
launched, is requested again, at most MAX_ATTEMPTS times. A changed agent (same id, other
config or program) is refused, not re-run; a removed agent keeps its tables. Finished steps are
read from the lineage records under OUT, so an agent materialized by `hrbench run` is not redone.
HRBENCH_SENSOR_INTERVAL sets the seconds between ticks (default 30).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster import (
    DagsterRunStatus, DefaultSensorStatus, RunsFilter, JobDefinition, MultiPartitionsDefinition, RunRequest, SensorDefinition, SensorEvaluationContext, SensorResult, SkipReason,
    sensor,
)

from dagster._core.storage.tags import PARENT_RUN_ID_TAG, WILL_RETRY_TAG

from hrbench.catalogue import StudyNames
from hrbench.preregistration import load_registration
from hrbench.protocol import StudyError
from hrbench.steps import next_step, report_stale, step_done, steps_for
from hrbench.tasks.model import TaskError
from assets.partitions import agents_of
from pipelines.defs.study.jobs import SETUP_TAG, step_tags
from resources.storage import storage_from_env
from resources.study import StudyResource

MAX_ATTEMPTS = 3
IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED]


def _count(context: SensorEvaluationContext, job: str, tags: dict[str, str], statuses: list) -> int:
    # `job` is the study's own (StudyNames): runs of another study in the instance are not counted
    return context.instance.get_runs_count(RunsFilter(job_name=job, tags=tags, statuses=statuses))


def _dagster_retries(context: SensorEvaluationContext, run) -> bool:
    """The failed `run` is one Dagster's run retries will launch again (deploy/dagster.yaml: a worker that died).
    With run retries on, Dagster stores the failure first and tags the run `dagster/will_retry` a moment later:
    a run without the tag yet is still Dagster's to decide, not a failure for the sensor to retry beside it."""
    will_retry = run.tags.get(WILL_RETRY_TAG)
    return will_retry == "true" or (will_retry is None and context.instance.run_retries_enabled)


def _in_flight(context: SensorEvaluationContext, job: str, tags: dict[str, str]) -> bool:
    """A run of the job with these tags is queued or running, or failed and Dagster's run retries will launch it
    again (its retry not created yet). The sensor retrying such a run too would start a second run of the step
    beside Dagster's retry."""
    if _count(context, job, tags, IN_FLIGHT):
        return True
    failed = context.instance.get_runs(RunsFilter(job_name=job, tags=tags, statuses=[DagsterRunStatus.FAILURE]))
    return any(_dagster_retries(context, r) and not context.instance.get_runs_count(
        RunsFilter(tags={PARENT_RUN_ID_TAG: r.run_id})) for r in failed)


def _failures(context: SensorEvaluationContext, job: str, tags: dict[str, str]) -> int:
    """Failed runs of the job with these tags that Dagster will not retry (its retries of one run count once)."""
    failed = context.instance.get_runs(RunsFilter(job_name=job, tags=tags, statuses=[DagsterRunStatus.FAILURE]))
    return sum(not _dagster_retries(context, r) for r in failed)


def _request(context: SensorEvaluationContext, job: str, tags: dict[str, str], key: str,
             partition_tags: dict[str, str]) -> RunRequest | None:
    """A run of the step job `job`, under a new key per failure Dagster does not retry itself (a run that failed, or never
    launched, is requested again up to MAX_ATTEMPTS times); None once it failed that often, or while a run of it
    is in flight."""
    if _in_flight(context, job, tags):
        return None
    failures = _failures(context, job, tags)
    if failures >= MAX_ATTEMPTS:
        context.log.warning(f"{key}: {job} failed {failures} times; not retried (see those runs, fix the "
                            "cause, then re-execute one from the UI)")
        return None
    return RunRequest(job_name=job, run_key=f"{key}:{failures}", tags={**partition_tags, **tags})


def build_agent_sensor(names: StudyNames, study_path: str | Path, out_dir: str | Path,
                       agent_task: MultiPartitionsDefinition, jobs: list[JobDefinition]) -> SensorDefinition:
    study = StudyResource(study_path=str(Path(study_path).resolve()), out_dir=str(Path(out_dir).resolve()),
                          progress=False, storage=storage_from_env())
    agents = agents_of(agent_task)  # the study's own agent partitions (StudyNames.agents)
    task_names = agent_task.get_partitions_def_for_dimension("task").get_partition_keys()

    @sensor(name=names.name("agent_files_sensor"), jobs=jobs, minimum_interval_seconds=int(os.environ.get("HRBENCH_SENSOR_INTERVAL", "30")),
            default_status=DefaultSensorStatus.RUNNING,
            description="Watches the study's agents (added / changed / removed) and requests the runs of a new "
                        "agent's partitions, step by step; the study report once every agent is done.")
    def agent_files_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        try:
            run = study.run()
        except (StudyError, TaskError) as exc:
            return SkipReason(f"study file unusable: {exc}")
        before: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        current = {a.id: run.design.registration(a.id).agent_sha256 for a in run.study.agents}
        refused = []
        for agent, sha in current.items():
            stored = load_registration(run.out_dir, agent)
            if stored is not None and stored.prereg_sha256 == run.prereg_sha256 and stored.agent_sha256 != sha:
                refused.append(agent)
                context.log.warning(f"agent {agent!r} changed (registered {stored.agent_sha256[:12]}, now {sha[:12]}): "
                                    "not run; a changed agent is a new agent — give it a new id")
        for agent in sorted(set(before) - set(current)):
            context.log.info(f"agent {agent!r} left the study file; its tables stay as they are")
        known = set(context.instance.get_dynamic_partitions(agents.name))
        new = [a for a in current if a not in known and a not in refused]
        setup = steps_for(run.study)[0]
        if not step_done(run, setup, None, None):
            # no agent's work before the audit and the pre-registration: request the setup step (again if it failed),
            # unless a setup of this study is under way however it was launched (the UI, the refresh schedule)
            tags = {"hrbench/prereg_sha256": run.prereg_sha256[:16]}
            request = None if _in_flight(context, names.name(setup.job), {SETUP_TAG: run.study.name}) else \
                _request(context, names.name(setup.job), tags, f"setup:{run.prereg_sha256[:16]}", {})
            return SensorResult(run_requests=[request] if request else [], cursor=json.dumps(current, sort_keys=True),
                                dynamic_partitions_requests=[agents.build_add_request(new)] if new else [])
        requests, busy = [], False
        for agent, sha in current.items():
            step = None if agent in refused else next_step(run, agent, sha)
            if step is None:
                continue
            tags = {"hrbench/agent": agent, "hrbench/agent_sha256": sha[:16]}
            if _in_flight(context, names.name(step.job), tags):
                busy = True  # its run is queued or running: the next step waits for it
                continue
            endpoint = run.design.registration(agent).config.get("base_url")  # one run per endpoint (dagster.yaml)
            endpoint_tags = {"hrbench/endpoint": str(endpoint)} if endpoint else {}
            request = _request(context, names.name(step.job), tags, f"{agent}:{step.job}:{sha[:16]}", {**step_tags(step, agent, task_names), **endpoint_tags})
            if request:
                requests.append(request)
        if not requests and not busy and not refused and report_stale(run):
            requests.append(RunRequest(job_name=names.name(steps_for(run.study)[-1].job),
                                       run_key=f"report:{json.dumps(sorted(current.items()))}"))
        return SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True),
                            dynamic_partitions_requests=[agents.build_add_request(new)] if new else [])

    return agent_files_sensor
