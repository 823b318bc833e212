"""The Dagster code location: `workspace.yaml` points here.

Settings come from the environment, or from $DAGSTER_HOME/hrbench.yaml in a deployment (pipelines/settings.py).
HRBENCH_OUT (default: ./out) is where the study's tables, journals and report go;
HRBENCH_STUDY is the study file (default: the one that made HRBENCH_OUT, recorded in
OUT/study_source.json, else the built-in demo study). HRBENCH_PROGRESS=1 shows trial
progress bars. HRBENCH_EXECUTOR=docker runs the trial steps one container per step
(pipelines/defs/study/executor.py, docs/deploy.md). `hrbench run` launches the jobs of this same code location (`step_job`),
so its runs can be re-executed from the UI. Every name the location defines carries the study's namespace
(`<study>/...` asset keys, `<study>__...` jobs, sensors, schedules, agent partitions): several studies share one
instance as one location each (deploy/workspace-studies.yaml).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from hrbench.preregistration import recorded_study_source
from hrbench.protocol import DEMO_STUDY
from pipelines.builder import build_definitions
from pipelines.defs.study.executor import ExecutorSettings
from pipelines.settings import apply_deployment_settings


def study_and_out(environment: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The study file and output directory this code location serves, from the environment."""
    out = environment.get("HRBENCH_OUT", "out")
    recorded = recorded_study_source(Path(out))
    study = environment.get("HRBENCH_STUDY") or (recorded.study_file if recorded else str(DEMO_STUDY))
    return study, out


@functools.cache
def _definitions(study: str, out: str, progress: bool, executor: ExecutorSettings) -> dg.Definitions:
    return build_definitions(study, out, progress=progress, executor=executor)


# What `hrbench run` sets for the runs it launches itself, on any instance (pipelines/materialize.py).
RUN_SCOPED = frozenset({"HRBENCH_STUDY", "HRBENCH_OUT", "HRBENCH_PROGRESS"})


def current(environment_wins: frozenset[str] = frozenset()) -> dg.Definitions:
    # $DAGSTER_HOME/hrbench.yaml: the same settings in the webserver, the daemon and their runs
    apply_deployment_settings(environment_wins)
    study, out = study_and_out()
    return _definitions(str(Path(study).resolve()), str(Path(out).resolve()), os.environ.get("HRBENCH_PROGRESS") == "1",
                        ExecutorSettings.from_env())


@dg.definitions
def defs() -> dg.Definitions:
    return current()


def step_job(name: str) -> dg.JobDefinition:
    """A study step's job (its name in the study's namespace), rebuilt from the environment: the target of
    `hrbench run`'s reconstructable jobs."""
    return current(environment_wins=RUN_SCOPED).resolve_job_def(name)
