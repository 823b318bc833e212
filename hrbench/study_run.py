"""One study on disk: its tasks, backend, pre-registration and trial journals.

This is the single object the Dagster assets (and the CLI) call; it holds no
statistics and no Dagster.
"""

from __future__ import annotations

import functools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from hrbench.agents.factory import make_agent
from hrbench.agents.sim import SimTruth, sim_truth
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.journal import TrialJournal, run_trials
from hrbench.harness.trials import natural_protocol, run_checkpoint_trial, run_natural_trial
from hrbench.preregistration import Preregistration, freeze
from hrbench.protocol import LoadedStudy, SimAgentSpec, StudyError, load_study
from hrbench.tasks.audit import StageAudit, audit_task
from hrbench.tasks.loader import load_registry
from hrbench.tasks.model import Task


class StudyRun:
    """A study bound to an output directory (`out/`: tables, journals, snapshots, report)."""

    def __init__(self, loaded: LoadedStudy, out_dir: str | Path, progress: bool = True):
        self.loaded = loaded
        self.study = loaded.study
        self.out_dir = Path(out_dir).resolve()
        self.progress = progress
        self.backend = LocalBackend(
            cache_dir=self.out_dir / "cache", memory_mb=self.study.checkpoint.budget.memory_mb
        )

    @property
    def trajectory_dir(self) -> Path:
        """ATIF trajectories of every trial, referenced from the trial rows."""
        return self.out_dir / "trajectories"

    @classmethod
    def from_file(cls, study_path: str | Path, out_dir: str | Path, progress: bool = True) -> "StudyRun":
        return cls(load_study(study_path), out_dir, progress)

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
        return freeze(self.study, self.tasks)

    def write_preregistration(self) -> Path:
        """Freeze the protocol into OUT/preregistration.json; an output directory holds one study version.

        A changed protocol (or task, or hrbench version) is a new study version and must not
        overwrite the old one's record, so a different hash already there is an error.
        """
        self.check_out_dir()
        path = self.out_dir / "preregistration.json"
        self.preregistration.write(path)
        return path

    def check_out_dir(self) -> None:
        """Raise StudyError if the output directory already holds another study version."""
        path = self.out_dir / "preregistration.json"
        if path.is_file():
            existing = json.loads(path.read_text()).get("prereg_sha256")
            if existing != self.prereg_sha256:
                raise StudyError(
                    f"{self.out_dir} holds study version {str(existing)[:12]}, but this study is "
                    f"{self.prereg_sha256[:12]} (its protocol, tasks or hrbench version changed): "
                    "write the new version to a new --out directory")

    @property
    def prereg_sha256(self) -> str:
        return self.preregistration.prereg_sha256

    def weight(self, task: str) -> float:
        return self.study.tasks.weights.get(task, 1.0)

    # -- tables ---------------------------------------------------------------------------

    def catalog(self) -> pd.DataFrame:
        """One row per stage: the task's structure, work W, dependency depth and weights."""
        rows = []
        for t in self.tasks:
            for s in t.stages:
                rows.append({
                    "task": t.name, "family": t.family, "structure": t.structure, "n_stages": t.n_stages,
                    "stage": s.name, "stage_index": s.index, "depends_on": ",".join(s.depends_on),
                    "stage_weight": s.weight, "task_weight": self.weight(t.name), "work_lines": t.work,
                    "dependency_depth": t.dependency_depth, "docker_only": t.docker_only,
                    "content_sha256": t.content_hash(),
                })
        return self.stamp(pd.DataFrame(rows))

    def audit(self) -> list[StageAudit]:
        """Verifier audit of every task, tasks in parallel (each builds its own snapshots)."""
        with ThreadPoolExecutor(max_workers=self.study.concurrency) as pool:
            per_task = list(pool.map(lambda t: audit_task(t, self.backend), self.tasks))
        return [row for rows in per_task for row in rows]

    def stamp(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame.insert(0, "prereg_sha256", self.prereg_sha256)
        return frame

    def records_table(self, records: list[TrialRecord]) -> pd.DataFrame:
        """One row per trial; the columns exist even when there are no trials."""
        return pd.DataFrame([r.model_dump() for r in records], columns=list(TrialRecord.model_fields))

    # -- trials ---------------------------------------------------------------------------

    def _journal(self, kind: str, agent: str, task: str) -> TrialJournal:
        return TrialJournal(self.out_dir / "journal" / self.prereg_sha256[:16] / kind / agent / f"{task}.jsonl", self.out_dir)

    def checkpoint_specs(self, agent: str, task: str) -> list[TrialSpec]:
        """m_i trials per stage for every distinct checkpoint protocol the conditions need."""
        # Conditions sharing a protocol share its trials; they are labelled with the first such condition.
        protocols: dict[str, str] = {}
        for c in self.study.conditions:
            protocols.setdefault(self.study.checkpoint_protocol(c).protocol_hash(), c)
        t = self.task(task)
        return [
            TrialSpec(prereg_sha256=self.prereg_sha256, agent=agent, condition=condition, protocol=phash,
                      task=task, kind="checkpoint", stage=s.name, trial_index=i)
            for phash, condition in protocols.items()
            for s in t.stages
            for i in range(self.study.trials.checkpoint)
        ]

    def natural_specs(self, agent: str, task: str) -> list[TrialSpec]:
        return [
            TrialSpec(prereg_sha256=self.prereg_sha256, agent=agent, condition=c,
                      protocol=natural_protocol(self.study.condition(c)), task=task, kind="natural",
                      stage=None, trial_index=i)
            for c in self.study.conditions
            for i in range(self.study.trials.natural)
        ]

    def run_checkpoint_trials(self, agent: str, task: str) -> list[TrialRecord]:
        spec_of_agent = self.study.agent(agent)
        t = self.task(task)

        def execute(spec: TrialSpec) -> TrialRecord:
            protocol = self.study.checkpoint_protocol(spec.condition)
            return run_checkpoint_trial(spec, t, make_agent(spec_of_agent), self.backend, protocol, self.study.seed,
                                        trajectory_dir=self.trajectory_dir)

        return run_trials(self.checkpoint_specs(agent, task), execute, self._journal("checkpoint", agent, task),
                          self.study.concurrency, f"checkpoint {agent} {task}", self.progress)

    def run_natural_trials(self, agent: str, task: str) -> list[TrialRecord]:
        spec_of_agent = self.study.agent(agent)
        t = self.task(task)

        def execute(spec: TrialSpec) -> TrialRecord:
            return run_natural_trial(spec, t, make_agent(spec_of_agent), self.backend,
                                     self.study.condition(spec.condition), self.study.checkpoint.budget,
                                     self.study.seed, trajectory_dir=self.trajectory_dir)

        return run_trials(self.natural_specs(agent, task), execute, self._journal("natural", agent, task),
                          self.study.concurrency, f"natural {agent} {task}", self.progress)

    # -- truth (sim agents only) ------------------------------------------------------------

    def truth(self, agent: str, task: str, condition: str = "baseline") -> SimTruth | None:
        spec = self.study.agent(agent)
        if not isinstance(spec, SimAgentSpec):
            return None
        return sim_truth(spec.sim, self.task(task), self.study.condition(condition),
                         self.study.checkpoint_protocol(condition))
