"""The design of a study: the study file, its tasks and its pre-registration (no output, no trials).

Everything here is decided before a trial runs; the stores (`stores.py`) and the trial runner
(`runner.py`) take a design, and the estimators in `analysis.py` read only the design.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from hrbench.agents.sim import SimTruth, population_truth, segment_truth, sim_truth
from hrbench.agents.specs import SimAgentSpec
from hrbench.envs.registry import backend_for_task
from hrbench.harbor_io.imports import ImportedTrials, match_imports, sealed_inputs
from hrbench.preregistration import AgentRegistration, Preregistration, freeze, register_agent
from hrbench.protocol import CheckpointProtocol, Decomposition, LoadedStudy, load_study
from hrbench.tasks.loader import load_registry
from hrbench.tasks.model import Stage, Task


def segments(task: Task, decomposition: Decomposition) -> list[tuple[Stage, ...]]:
    """The checkpoint units of a task: every stage, or adjacent pairs (an odd last stage alone)."""
    if decomposition == "stages":
        return [(s,) for s in task.stages]
    return [tuple(task.stages[i:i + 2]) for i in range(0, task.n_stages, 2)]


def unit_name(unit: tuple[Stage, ...]) -> str:
    """The `stage` of a checkpoint trial over these stages: the stage name, or names joined by '+'."""
    return "+".join(s.name for s in unit)


class StudyDesign:
    """A validated study, its tasks (loaded once), their frozen pre-registration and its agents' registrations."""

    def __init__(self, loaded: LoadedStudy):
        self.loaded = loaded
        self.study = loaded.study

    @classmethod
    def from_file(cls, study_path: str | Path) -> "StudyDesign":
        return cls(load_study(study_path))

    @functools.cached_property
    def tasks(self) -> list[Task]:
        return load_registry(self.loaded.registry, self.study.tasks.include)

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"study {self.study.name!r} has no task {name!r}")

    @functools.cached_property
    def preregistration(self) -> Preregistration:
        return freeze(self.study, self.tasks, sealed_inputs(self.study, self.loaded.source.parent) or None)

    @functools.cached_property
    def imported(self) -> ImportedTrials:
        """The trials of the study's Harbor imports by cell (identities only, checked against the tasks:
        HarborImportError on a changed task)."""
        from hrbench.harbor_io.export import checkpoint_task_checksums  # only studies importing checkpoints

        needs = any(e.kind == "checkpoint" for e in self.study.imports)
        return match_imports(self.study, self.tasks, self.loaded.source.parent,
                             checkpoint_task_checksums(self.tasks) if needs else None)

    @property
    def prereg_sha256(self) -> str:
        return self.preregistration.prereg_sha256

    def registration(self, agent: str) -> AgentRegistration:
        """The agent's registration under this protocol (agents register separately: adding one keeps the
        protocol hash)."""
        return register_agent(self.preregistration, self.study.agent(agent))

    def weight(self, task: str) -> float:
        return self.study.tasks.weights.get(task, 1.0)

    def stamp(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The table, tied to this pre-registration by its first column."""
        frame.insert(0, "prereg_sha256", self.prereg_sha256)
        return frame

    def catalog(self) -> pd.DataFrame:
        """One row per stage: the task's structure, work W, dependency depth, weights and the backend its
        trials run on (the study's, or each task's own under `backend: auto`)."""
        rows = []
        for t in self.tasks:
            for s in t.stages:
                rows.append({
                    "task": t.name, "family": t.family, "structure": t.structure, "n_stages": t.n_stages,
                    "stage": s.name, "stage_index": s.index, "depends_on": ",".join(s.depends_on),
                    "stage_weight": s.weight, "task_weight": self.weight(t.name), "work_lines": t.work,
                    "dependency_depth": t.dependency_depth, "docker_only": t.docker_only,
                    "backend": backend_for_task(self.study.backend, t), "task_version": t.version,
                    "content_sha256": t.content_hash(),
                })
        return self.stamp(pd.DataFrame(rows))

    def unit_truth(self, agent: str, task: str, unit: tuple[Stage, ...], protocol: CheckpointProtocol) -> float | None:
        """True pass probability of a checkpoint unit (a stage or a merged segment); None for non-sim agents."""
        spec = self.study.agent(agent)
        if not isinstance(spec, SimAgentSpec):
            return None
        if len(unit) == 1:
            return sim_truth(spec.sim, self.task(task), self.study.condition("baseline"), protocol).q[unit[0].index]
        return segment_truth(spec.sim, self.task(task), [s.index for s in unit], protocol)

    def truth(self, agent: str, task: str, condition: str = "baseline",
              protocol: CheckpointProtocol | None = None) -> SimTruth | None:
        """Closed-form truth of a sim agent on a task under a condition (and a checkpoint protocol,
        default the condition's); None for other agents."""
        spec = self.study.agent(agent)
        if not isinstance(spec, SimAgentSpec):
            return None
        return sim_truth(spec.sim, self.task(task), self.study.condition(condition),
                         protocol or self.study.checkpoint_protocol(condition))

    def population_truth(self, agent: str, task: str, condition: str = "baseline",
                         protocol: CheckpointProtocol | None = None) -> tuple[float, float] | None:
        """(E P_expected, E P_observed) of a sim agent over the population of tasks of this task's
        structure (its declared skill spread); None for other agents."""
        spec = self.study.agent(agent)
        if not isinstance(spec, SimAgentSpec):
            return None
        return population_truth(spec.sim, self.task(task), self.study.condition(condition),
                                protocol or self.study.checkpoint_protocol(condition))
