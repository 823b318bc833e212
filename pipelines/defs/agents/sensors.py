"""The agent sensor: watches the study's agents (inline or `config:` files) and backfills a new one.

Its cursor maps agent id -> the hash its registration would have. Each tick re-reads the study
file, so an agent added after the code location loaded is seen: it gets a partition, then the
runs of its next unfinished step, one step per tick (a step starts only after the one before it
finished, so P_expected is always fixed before natural rollouts). A step whose run failed, or never
launched, is requested again, at most MAX_ATTEMPTS times. A changed agent (same id, other
config or program) is refused, not re-run; a removed agent keeps its tables. Finished steps are
read from the lineage records under OUT, so an agent materialized by `hrbench run` is not redone.
HRBENCH_SENSOR_INTERVAL sets the seconds between ticks (default 30).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from dagster import (
    DagsterRunStatus, DefaultSensorStatus, RunsFilter, JobDefinition, RunRequest, SensorDefinition, SensorEvaluationContext, SensorResult, SkipReason,
    sensor,
)

from hrbench.lineage import TRIAL_ASSETS, read_record, stored_sha256
from hrbench.preregistration import load_registration
from hrbench.protocol import StudyError
from hrbench.study_run import StudyRun
from hrbench.tasks.model import TaskError
from pipelines.defs.study.jobs import Step, agent_steps, step_tags, steps_for
from pipelines.defs.study.partitions import AGENTS
from resources.storage import storage_from_env
from resources.study import StudyResource

MAX_ATTEMPTS = 3
IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED]


def step_done(run: StudyRun, step: Step, agent: str | None, agent_sha256: str | None) -> bool:
    """Every table of the step exists, intact, under this protocol and this agent registration, and no
    trial in it ended in a harness error (those are retried by running the step again)."""
    partitions = {"none": [()], "agent": [(agent,)],
                  "agent_task": [(agent, t.name) for t in run.design.tasks]}[step.partitioned]
    store = run.stores.tables
    for asset in step.assets:
        if asset == "study_report":
            return not report_stale(run)
        for partition in partitions:
            record = read_record(store.store, asset, partition)
            if record is None or record.prereg_sha256 != [run.prereg_sha256] or \
                    (agent is not None and record.agent_sha256 != [agent_sha256]):
                return False
            if stored_sha256(store.store, store.key(asset, partition)) != record.sha256:
                return False
            if asset.split("/")[-1] in TRIAL_ASSETS and (store.read(asset, partition)["exit_reason"] == "harness_error").any():
                return False
    return True


def next_step(run: StudyRun, agent: str, agent_sha256: str) -> Step | None:
    return next((s for s in agent_steps(steps_for(run.study)) if not step_done(run, s, agent, agent_sha256)), None)


def report_stale(run: StudyRun) -> bool:
    """summary.json is missing, lacks a declared agent, or is older than a residual table."""
    summary = run.stores.fetch("summary.json")
    if summary is None:
        return True
    agents = {r["agent"] for r in json.loads(summary.read_text()).get("residuals", [])}
    if agents != {a.id for a in run.study.agents}:
        return True
    # When each residual table was written, from its lineage record (the store keeps no file times).
    store = run.stores.store
    written = [read_record(store, f"{c}/horizon_residuals", (a.id,)) for c in run.study.condition_names
               for a in run.study.agents]
    newest = max((datetime.fromisoformat(r.written_at).timestamp() for r in written if r), default=0.0)
    return newest > summary.stat().st_mtime


def _count(context: SensorEvaluationContext, job: str, tags: dict[str, str], statuses: list) -> int:
    return context.instance.get_runs_count(RunsFilter(job_name=job, tags=tags, statuses=statuses))


def build_agent_sensor(study_path: str | Path, out_dir: str | Path, task_names: list[str],
                       jobs: list[JobDefinition]) -> SensorDefinition:
    study = StudyResource(study_path=str(Path(study_path).resolve()), out_dir=str(Path(out_dir).resolve()),
                          progress=False, storage=storage_from_env())

    @sensor(name="agent_files_sensor", jobs=jobs, minimum_interval_seconds=int(os.environ.get("HRBENCH_SENSOR_INTERVAL", "30")),
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
        known = set(context.instance.get_dynamic_partitions(AGENTS.name))
        new = [a for a in current if a not in known and a not in refused]
        requests, busy = [], False
        for agent, sha in current.items():
            step = None if agent in refused else next_step(run, agent, sha)
            if step is None:
                continue
            tags = {"hrbench/agent": agent, "hrbench/agent_sha256": sha[:16]}
            if _count(context, step.job, tags, IN_FLIGHT):
                busy = True  # its run is queued or running: the next step waits for it
                continue
            failures = _count(context, step.job, tags, [DagsterRunStatus.FAILURE])
            if failures >= MAX_ATTEMPTS:
                context.log.warning(f"agent {agent!r}: {step.job} failed {failures} times; not retried (see those "
                                    "runs, fix the cause, then re-execute one from the UI)")
                continue
            # a run that failed (or never launched) is retried under a new key, up to MAX_ATTEMPTS
            endpoint = run.design.registration(agent).config.get("base_url")  # one run per endpoint (dagster.yaml)
            requests.append(RunRequest(job_name=step.job, run_key=f"{agent}:{step.job}:{sha[:16]}:{failures}",
                                       tags={**step_tags(step, agent, task_names), **tags,
                                             **({"hrbench/endpoint": str(endpoint)} if endpoint else {})}))
        if not requests and not busy and not refused and report_stale(run):
            requests.append(RunRequest(job_name=steps_for(run.study)[-1].job,
                                       run_key=f"report:{json.dumps(sorted(current.items()))}"))
        return SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True),
                            dynamic_partitions_requests=[AGENTS.build_add_request(new)] if new else [])

    return agent_files_sensor
