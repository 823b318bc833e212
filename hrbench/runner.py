"""The trial runner: a design's trials, on the environment backend the study names, into the stores.

Trial specs (which trials a pre-registration asks for) and their execution live here; one trial's
lifecycle is in `harness/trials.py`, the journal in `harness/journal.py`.
"""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from hrbench.agents.base import Message
from hrbench.agents.factory import make_agent
from hrbench.design import StudyDesign, segments, unit_name
from hrbench.envs.base import SandboxError
from hrbench.envs.registry import BackendOptions, TaskBackends, backend_for_task, task_backend
from hrbench.harbor_io.jobs import trial_record
from hrbench.harness.journal import run_trials
from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.trajectory import load_matched_prefix
from hrbench.harness.trials import natural_protocol, run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS
from hrbench.stores import StudyStores
from hrbench.tasks.audit import StageAudit
from hrbench.tasks.audit_cache import cached_audit
from hrbench.tasks.model import Stage, Task


PREFIX_PROTOCOL = "prefix-natural-full-own"


def _without_result(row: StageAudit) -> bool:
    """An audit row that failed on a verification without a result (`tasks.audit.explain` names its exit reason)."""
    return not row.ok and "exit reason verifier_error" in (row.problem or "")


class TrialRunner:
    """Runs (and resumes) the trials of one design, journaling them in the stores."""

    def __init__(self, design: StudyDesign, stores: StudyStores, progress: bool = True):
        self.design = design
        self.stores = stores
        self.progress = progress
        # One bound on the trials running at once, whichever partitions they belong to: partitions
        # run side by side (pipelines/), so one task's slow last trials leave no sandbox slot idle.
        self.slots = threading.BoundedSemaphore(design.study.concurrency)

    @functools.cached_property
    def _backends(self) -> TaskBackends:
        options = BackendOptions(cache_dir=self.stores.cache_dir,
                                 memory_mb=self.design.study.checkpoint.budget.memory_mb)
        return TaskBackends(self.design.study.backend, options)

    @functools.cached_property
    def backend(self) -> TaskBackends:
        """The study's `backend` (each task on its own under `auto`), checked for every task before any
        trial runs: a docker study without an engine stops here with one line saying how to start one."""
        self._backends.check(self.design.tasks)
        return self._backends

    def check_backends(self) -> None:
        """Raise SandboxError now if a task's backend cannot run it (see `backend`)."""
        self.backend  # noqa: B018 - the property checks, once

    # -- which trials -------------------------------------------------------------------------

    def protocol_labels(self) -> dict[str, str]:
        """Each distinct checkpoint protocol (by hash) and the condition its trials are labelled with.

        Conditions sharing a protocol share its trials (labelled with the first such condition); a
        protocol only the sensitivity sweep needs is labelled `sensitivity`.
        """
        study = self.design.study
        labels: dict[str, str] = {}
        for c in study.condition_names:
            labels.setdefault(study.checkpoint_protocol(c).protocol_hash(), c)
        for p in study.admissible_protocols():
            labels.setdefault(p.protocol_hash(), "sensitivity")
        return labels

    def checkpoint_units(self, task: str, protocol_hash: str) -> list[tuple[Stage, ...]]:
        """The stages (and merged segments) a protocol's checkpoint trials start from."""
        study, t = self.design.study, self.design.task(task)
        units = segments(t, "stages")
        # A coarser decomposition is swept under the declared protocol (analysis.sensitivity_estimands).
        if protocol_hash == study.checkpoint_protocol("baseline").protocol_hash():
            for d in study.decompositions():
                units += [u for u in segments(t, d) if len(u) > 1 and u not in units]
        return units

    def checkpoint_specs(self, agent: str, task: str) -> list[TrialSpec]:
        """m_i trials per checkpoint unit for every distinct checkpoint protocol the study needs."""
        return [
            TrialSpec(prereg_sha256=self.design.prereg_sha256, agent=agent, condition=condition, protocol=phash,
                      task=task, kind="checkpoint", stage=unit_name(unit), trial_index=i)
            for phash, condition in self.protocol_labels().items()
            for unit in self.checkpoint_units(task, phash)
            for i in range(self.design.study.trials.checkpoint)
        ]

    def natural_specs(self, agent: str, task: str, condition: str | None = None) -> list[TrialSpec]:
        """m_0 rollouts per condition (of one condition when given)."""
        study = self.design.study
        return [
            TrialSpec(prereg_sha256=self.design.prereg_sha256, agent=agent, condition=c,
                      protocol=natural_protocol(study.condition(c)), task=task, kind="natural",
                      stage=None, trial_index=i)
            for c in ([condition] if condition else study.condition_names)
            for i in range(study.trials.natural)
        ]

    def prefix_specs(self, agent: str, task: str) -> list[TrialSpec]:
        """Rollouts whose transcripts `matched` checkpoints and whose passing workspace states
        `solution_conditioned` checkpoints start from: one per checkpoint trial index.

        They run before the checkpoint trials, under full history and own state, and their outcomes
        never enter P_observed: the natural rollouts a prediction is compared with are a separate
        set, run after the prediction is fixed.
        """
        return [
            TrialSpec(prereg_sha256=self.design.prereg_sha256, agent=agent, condition="baseline",
                      protocol=PREFIX_PROTOCOL, task=task, kind="natural", stage=None, trial_index=i)
            for i in range(self.design.study.trials.checkpoint)
        ] if self.design.study.needs_prefix_rollouts else []

    # -- running them -------------------------------------------------------------------------

    def run_prefix_rollouts(self, agent: str, task: str) -> list[TrialRecord]:
        study, t = self.design.study, self.design.task(task)
        self._check_agent_states(t)
        self.check_backends()

        def execute(spec: TrialSpec) -> TrialRecord:
            save = functools.partial(self.agent_state_name, spec) if study.needs_agent_states else None
            return run_natural_trial(spec, t, make_agent(study.agent(agent)), self.backend, CONDITIONS["baseline"],
                                     study.checkpoint.budget, study.seed, trajectory_dir=self.stores.trajectory_dir,
                                     save_states=save)

        return run_trials(self.prefix_specs(agent, task), execute, self._journal("prefix", agent, task),
                          study.concurrency, f"prefix rollouts {agent} {task}", self.progress, self.slots, study.retries)

    def audit(self) -> list[StageAudit]:
        """Verifier audit of every task, tasks in parallel (each builds its own snapshots); a task whose
        audit passed before with the same contents, check library, sandbox and code is not audited again.

        A task whose audit met a verification without a result (a verifier killed or timed out on a busy
        machine) is audited again, as a trial would be, up to the study's `retries.max_attempts`; a
        verifier that keeps failing still fails the audit."""
        retries = self.design.study.retries

        def audited(task: Task) -> list[StageAudit]:
            for retry in range(retries.max_attempts):
                if retry:
                    time.sleep(retries.backoff(retry))
                rows = cached_audit(task, task_backend(self.backend, task))
                if not any(_without_result(r) for r in rows):
                    break
            return rows

        with ThreadPoolExecutor(max_workers=self.design.study.concurrency) as pool:
            per_task = list(pool.map(audited, self.design.tasks))
        return [row for rows in per_task for row in rows]

    def run_checkpoint_trials(self, agent: str, task: str) -> list[TrialRecord]:
        study, t = self.design.study, self.design.task(task)
        protocols = study.checkpoint_protocols()
        self._check_agent_states(t)
        self.check_backends()

        def execute(spec: TrialSpec) -> TrialRecord:
            if study.imported(agent, "checkpoint") is not None:
                return self.imported_record(spec)
            return run_checkpoint_trial(spec, t, make_agent(study.agent(agent)), self.backend,
                                        protocols[spec.protocol], study.seed,
                                        trajectory_dir=self.stores.trajectory_dir,
                                        matched_prefix=lambda stage: self.matched_prefix(spec, stage),
                                        solution_state=lambda stage: self.solution_state(spec, stage))

        return run_trials(self.checkpoint_specs(agent, task), execute, self._journal("checkpoint", agent, task),
                          study.concurrency, f"checkpoint {agent} {task}", self.progress, self.slots, study.retries)

    def run_natural_trials(self, agent: str, task: str, condition: str | None = None) -> list[TrialRecord]:
        """The natural rollouts of one condition (every condition when None), each condition its own journal."""
        study, t = self.design.study, self.design.task(task)
        self.check_backends()  # a trial's harness error would be journaled: a backend that cannot run is refused first

        def execute(spec: TrialSpec) -> TrialRecord:
            if spec.condition == "baseline" and study.imported(agent, "natural") is not None:
                return self.imported_record(spec)
            return run_natural_trial(spec, t, make_agent(study.agent(agent)), self.backend,
                                     study.condition(spec.condition), study.checkpoint.budget, study.seed,
                                     trajectory_dir=self.stores.trajectory_dir)

        records = []
        for c in [condition] if condition else study.condition_names:
            records += run_trials(self.natural_specs(agent, task, c), execute,
                                  self._journal("natural", agent, task, c), study.concurrency,
                                  f"natural {c} {agent} {task}", self.progress, self.slots, study.retries)
        return records

    def imported_record(self, spec: TrialSpec) -> TrialRecord:
        """The row of an imported Harbor trial, where a run would have executed it: its outcome is read
        now, not before (natural rollouts: after expected_success). Trial j of a cell is the cell's j-th
        Harbor trial by start time; a cell with fewer raises, and the trial is missing (`harness_error`)."""
        folders = self.design.imported.by_cell.get((spec.agent, spec.kind, spec.task, spec.stage), [])
        if spec.trial_index >= len(folders):
            raise SandboxError(f"the imported Harbor jobs hold {len(folders)} {spec.kind} trial(s) of agent "
                               f"{spec.agent!r} on {spec.task!r}{f' stage {spec.stage!r}' if spec.stage else ''}, "
                               f"not a trial #{spec.trial_index + 1}: it is missing")
        return trial_record(spec, self.design.task(spec.task), folders[spec.trial_index],
                            self.stores.trajectory_dir, self.stores.out_dir)

    def _journal(self, kind: str, agent: str, task: str, condition: str | None = None):
        return self.stores.journal(self.design.prereg_sha256, kind, agent, task, condition)

    def _prefix_rows(self, spec: TrialSpec) -> list[TrialRecord]:
        """This agent's journaled prefix rollouts on the spec's task, in a fixed order (a resume picks the same)."""
        return sorted((r for r in self._journal("prefix", spec.agent, spec.task).load().values()
                       if r.trajectory_path), key=lambda r: r.trial_key)

    def matched_prefix(self, spec: TrialSpec, stage_index: int) -> list[Message] | None:
        """A `matched` checkpoint's transcript: from this agent's journaled prefix rollouts (never the
        natural rollouts a prediction is compared with)."""
        rows = self._prefix_rows(spec)
        paths = [self.stores.trajectory_file(r.trajectory_path) for r in rows if r.stages_passed >= stage_index]
        return load_matched_prefix([p for p in paths if p is not None], stage_index, spec.trial_index)

    def agent_state_name(self, spec: TrialSpec, stages_passed: int) -> str:
        """Where a prefix rollout keeps its state after `stages_passed` passed stages (in the backend's cache)."""
        return f"{spec.prereg_sha256[:16]}/{spec.agent}/{self.design.task(spec.task).slug}/" \
               f"prefix-{spec.trial_index}/after-{stages_passed}"

    def solution_state(self, spec: TrialSpec, stage_index: int) -> str | None:
        """A `solution_conditioned` checkpoint's e_{i-1}: checkpoint trial j of stage i starts from the state
        of passing prefix rollout (j mod n_passing), in the order `matched_prefix` uses (so a study
        both matched and solution-conditioned takes transcript and state from the same rollout)."""
        passing = [r for r in self._prefix_rows(spec) if r.stages_passed >= stage_index]
        if not passing:
            return None
        chosen = passing[spec.trial_index % len(passing)]
        return self.agent_state_name(chosen, stage_index)

    def _check_agent_states(self, task: Task) -> None:
        if self.design.study.needs_agent_states and not self._backends.saves_agent_states_for(task):
            name = backend_for_task(self.design.study.backend, task)
            raise SandboxError(f"environment backend {name!r} (task {task.name!r}): checkpoint.state "
                               "'solution_conditioned' "
                               "starts checkpoints from the agent's own saved workspaces, which this backend does "
                               "not keep; run the study on the 'local' backend, or use state 'oracle_replay'")
