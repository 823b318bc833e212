"""Depth D and work W of a study's tasks: the table behind the `task_depth` asset.

The study's `depth:` section names the model set (agents of the study, the first measured in
full) and the tasks; each task is measured in Appendix B's run order through real rollouts in the
harness (:func:`hrbench.structure.depth.harness_runner`). Tasks are independent, so several are
measured at once (the study's `concurrency`); the runs of one task stay in order, as the protocol
requires. Nothing here is a statistic: one row per task, with every run the protocol made.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from hrbench.agents.factory import make_agent
from hrbench.content_cache import ContentCache, cache_key
from hrbench.design import StudyDesign
from hrbench.envs.registry import Backend, task_backend
from hrbench.protocol import Budget, StudyError
from hrbench.schemas import TASK_DEPTH
from hrbench.stores import StudyStores
from hrbench.structure.depth import CAPS, DepthEstimate, estimate_depth, harness_runner
from hrbench.structure.settings import DepthSettings
from hrbench.structure.tables import structure_row
from hrbench.tasks.audit_cache import backend_identity
from hrbench.tasks.model import Task

DEPTH_COLUMNS = TASK_DEPTH.unstamped  # the table's schema (hrbench/schemas.py)
DEPTH_CACHE = "depth"


def depth_tasks(design: StudyDesign, settings: DepthSettings) -> list[Task]:
    """The study's tasks the settings name (all when they name none), in the study's order."""
    if settings.tasks is None:
        return list(design.tasks)
    known = {t.name for t in design.tasks}
    unknown = sorted(set(settings.tasks) - known)
    if unknown:
        raise StudyError(f"depth.tasks {unknown}: not among the study's tasks; choose from {sorted(known)}")
    return [t for t in design.tasks if t.name in settings.tasks]


def _row(task: Task, estimate: DepthEstimate) -> dict:
    runs = [r.model_dump() for r in estimate.runs]
    return {**structure_row(task, estimate).model_dump(), "models": ",".join(m.model for m in estimate.models),
            "n_runs": len(runs), "runs_json": json.dumps(runs)}


def measure_study_depth(design: StudyDesign, backend: Backend, stores: StudyStores) -> pd.DataFrame:
    """One row per declared task: D (status, N), W (lines, characters, tokens), H_dep and the runs made.

    The table is stamped with the study's pre-registration hash (its first column). A study without a
    `depth:` section has nothing to measure: StudyError. A task measured before under the same
    pre-registration, agents and sandbox is not measured again (`hrbench.content_cache`): its row comes
    from the cache, and its runs' trajectories stay in the output directory of the run that made them.
    """
    study = design.study
    if study.depth is None:
        raise StudyError(f"study {study.name!r} has no `depth:` section: nothing to measure")
    settings = study.depth
    ids = settings.agents or [a.id for a in study.agents]
    budget = Budget(max_turns=None, timeout_sec=settings.timeout_sec, task_timeout_sec=settings.timeout_sec,
                    memory_mb=study.checkpoint.budget.memory_mb)
    label = ("depth" + design.prereg_sha256)[:16]  # trial keys of depth runs never collide with the study's

    cache = ContentCache(DEPTH_CACHE)

    def one(task: Task) -> dict:
        # the pre-registration covers the task's files, the study's settings and the code; the agents
        # register separately, so their specs join the key
        key = cache_key({"prereg": design.prereg_sha256, "task": task.content_hash(), "sandbox": backend_identity(task_backend(backend, task)),
                         "agents": [study.agent(i).model_dump(mode="json") for i in ids]})
        stored = cache.get(key)
        if isinstance(stored, dict):
            return stored
        models = [(i, harness_runner(task, make_agent(study.agent(i)), backend, seed=study.seed, base_budget=budget,
                                     label=label, trajectory_dir=stores.trajectory_dir, model=i)) for i in ids]
        row = _row(task, estimate_depth(models, CAPS))
        cache.put(key, row)
        return row

    tasks = depth_tasks(design, settings)
    with ThreadPoolExecutor(max_workers=max(1, min(study.concurrency, len(tasks)))) as pool:
        rows = list(pool.map(one, tasks))
    return design.stamp(pd.DataFrame(rows, columns=DEPTH_COLUMNS))
