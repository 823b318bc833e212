"""The steps of a study, in the order the method requires, and whether each is done.

Which step comes next and whether one is finished is decided here, from the stored tables, their
lineage records and the verdicts their blocking checks wrote beside them (hrbench/gate.py; no Dagster):
`hrbench run` (pipelines/materialize.py) skips the steps that are done, the agent sensor (pipelines/defs/agents/sensors.py) requests an agent's next unfinished step,
and the step jobs (pipelines/defs/study/jobs.py) are built from the same list.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from hrbench.catalogue import (
    CHECKPOINT, EXPECTED, HORIZON_RESIDUALS, INTERVENTION_CONTRASTS, NATURAL, PREFIX_ROLLOUTS, REGISTRATION, REPORT,
    REPORT_ASSET, RESIDUALS, SETUP, TABLES, TASK_DEPTH, TRIAL_TABLES,
)
from hrbench.exits import is_missing
from hrbench.lineage import check_problems
from hrbench.lineage import read_record, stored_sha256
from hrbench.protocol import Study
from hrbench.stores import SUMMARY_KEY
from hrbench.study_run import StudyRun


class StudyFailed(RuntimeError):
    """A step of the study failed; the message says which and why, and where the full log is."""


class Step(BaseModel):
    """A study step: its job, the assets it materializes and how its runs are partitioned."""

    job: str
    assets: list[str]  # asset keys in their user string form: a condition's assets are `<condition>/<name>`
    partitioned: Literal["none", "agent", "agent_task"]
    label: str


def study_steps(conditions: list[str], prefix_rollouts: bool = False, depth: bool = False) -> list[Step]:
    """The steps of a study with these conditions, each with the catalogue's tables its job writes: a condition's
    own tables (`<condition>/<name>`) first, condition by condition, then the shared ones. Matched and
    solution-conditioned checkpoints need their prefix rollouts first; a study that declares `depth:` measures
    it in the setup step (`task_depth`); a study of the baseline alone has no contrasts."""
    left_out = {t.name for t, wanted in ((PREFIX_ROLLOUTS, prefix_rollouts), (TASK_DEPTH, depth),
                                         (INTERVENTION_CONTRASTS, len(conditions) > 1)) if not wanted}

    def step(job: str, label: str) -> Step:
        tables = [t for t in TABLES if t.step == job and t.name not in left_out]
        assets = [t.key(c) for c in conditions for t in tables if t.per_condition]
        return Step(job=job, assets=assets + [t.key() for t in tables if not t.per_condition],
                    partitioned=tables[0].partitioned, label=label)

    return [
        step(SETUP, "catalog, audit" + (", pre-registration and depth" if depth else " and pre-registration")),
        step(REGISTRATION, "registration"),
        step(CHECKPOINT, "checkpoint trials"),
        step(EXPECTED, "expected success"),
        step(NATURAL, "natural trials"),
        step(RESIDUALS, "residuals, contrasts and sensitivity"),
        Step(job=REPORT, assets=[REPORT_ASSET], partitioned="none", label="report"),
    ]


def agent_steps(steps: list[Step]) -> list[Step]:
    """The steps run once per agent (all but setup and report)."""
    return [s for s in steps if s.partitioned != "none"]


def steps_for(study: Study) -> list[Step]:
    """The steps of this study (its conditions, and prefix rollouts if a protocol is matched or solution-conditioned)."""
    return study_steps(study.condition_names, study.needs_prefix_rollouts, study.depth is not None)


def step_done(run: StudyRun, step: Step, agent: str | None, agent_sha256: str | None) -> bool:
    """Every table of the step exists, intact, under this protocol and this agent registration, its blocking
    checks passed on it, and no trial in it is missing (its last attempt had no result, hrbench.exits: running
    the step again retries it)."""
    partitions = {"none": [()], "agent": [(agent,)],
                  "agent_task": [(agent, t.name) for t in run.design.tasks]}[step.partitioned]
    store = run.stores.tables
    for asset in step.assets:
        if asset == REPORT_ASSET:
            return not report_stale(run)
        for partition in partitions:
            record = read_record(store.store, asset, partition)
            if record is None or record.prereg_sha256 != [run.prereg_sha256] or \
                    (agent is not None and record.agent_sha256 != [agent_sha256]):
                return False
            if stored_sha256(store.store, store.key(asset, partition)) != record.sha256:
                return False
            if check_problems(store.store, asset, partition):
                return False
            if asset.split("/")[-1] in TRIAL_TABLES and store.read(asset, partition)["exit_reason"].map(is_missing).any():
                return False
    return True


def next_step(run: StudyRun, agent: str, agent_sha256: str) -> Step | None:
    """The agent's first per-agent step that is not done (None: all are)."""
    return next((s for s in agent_steps(steps_for(run.study)) if not step_done(run, s, agent, agent_sha256)), None)


def report_stale(run: StudyRun) -> bool:
    """summary.json is missing, lacks a declared agent, or is older than a residual table."""
    summary = run.stores.fetch(SUMMARY_KEY)
    if summary is None:
        return True
    agents = {r["agent"] for r in json.loads(summary.read_text()).get("residuals", [])}
    if agents != {a.id for a in run.study.agents}:
        return True
    # When each residual table was written, from its lineage record (the store keeps no file times).
    store = run.stores.store
    written = [read_record(store, HORIZON_RESIDUALS.key(c), (a.id,)) for c in run.study.condition_names
               for a in run.study.agents]
    newest = max((datetime.fromisoformat(r.written_at).timestamp() for r in written if r), default=0.0)
    return newest > summary.stat().st_mtime
