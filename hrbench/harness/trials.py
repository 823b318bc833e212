"""Checkpoint trials and natural rollouts, and a resumable, concurrent runner for them."""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from hrbench.agents.base import Agent
from hrbench.envs.local import LocalBackend
from hrbench.harness.history import History
from hrbench.harness.loop import record_from, run_stage, trial_context
from hrbench.harness.records import StageOutcome, TrialRecord, TrialSpec
from hrbench.protocol import Budget, CheckpointProtocol, Condition, StatePolicy
from hrbench.tasks.model import Task


def natural_protocol(condition: Condition) -> str:
    """The protocol label of a condition's natural rollouts (part of the trial key)."""
    return f"natural-{condition.history.value}-{condition.state.value}"


def run_checkpoint_trial(spec: TrialSpec, task: Task, agent: Agent, backend: LocalBackend,
                         protocol: CheckpointProtocol, seed: int) -> TrialRecord:
    """One trial of one stage from its declared checkpoint e_{i-1}."""
    if protocol.history == "matched":
        raise NotImplementedError("history 'matched' needs recorded transcripts; use 'fresh' or 'compacted'")
    stage = task.stage(spec.stage or "")
    start = time.monotonic()
    env = backend.start(task, stage.index)
    try:
        agent.begin_trial(trial_context(spec, task, seed))
        history = History(protocol.history)
        history.start_checkpoint(stage.index)
        outcome = run_stage(env, agent, task, stage, history, protocol.budget)
        return record_from(spec, [outcome], time.monotonic() - start, agent)
    finally:
        env.close()


def run_natural_trial(spec: TrialSpec, task: Task, agent: Agent, backend: LocalBackend,
                      condition: Condition, budget: Budget, seed: int) -> TrialRecord:
    """One end-to-end rollout from e_0, stages delivered in order, stopping at the first failure."""
    start = time.monotonic()
    env = backend.start(task, 0)
    outcomes: list[StageOutcome] = []
    try:
        agent.begin_trial(trial_context(spec, task, seed))
        history = History(condition.history.value)
        for stage in task.stages:
            if stage.index > 0:
                history.boundary(stage.index)
                if condition.state is StatePolicy.repair:
                    backend.restore(env, stage.index)
            outcome = run_stage(env, agent, task, stage, history, budget)
            outcomes.append(outcome)
            if not outcome.passed:
                break
        return record_from(spec, outcomes, time.monotonic() - start, agent)
    finally:
        env.close()


class TrialJournal:
    """Append-only JSON-lines file of finished trials: the unit of crash safety and resume."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def load(self) -> dict[str, TrialRecord]:
        """Finished trials by key; a torn last line (a crash mid-write) is ignored."""
        records: dict[str, TrialRecord] = {}
        if not self.path.exists():
            return records
        for line in self.path.read_text().splitlines():
            try:
                record = TrialRecord.model_validate_json(line)
            except ValueError:
                continue
            records.setdefault(record.trial_key, record)
        return records

    def append(self, record: TrialRecord) -> None:
        with self._lock, open(self.path, "a") as fh:
            fh.write(record.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def run_trials(
    specs: Iterable[TrialSpec],
    execute: Callable[[TrialSpec], TrialRecord],
    journal: TrialJournal,
    concurrency: int = 2,
    description: str = "trials",
    progress: bool = True,
) -> list[TrialRecord]:
    """Run every spec whose key is not yet in the journal; return all records in spec order.

    Trials run in a bounded thread pool (they wait on sandbox processes). A trial that
    raises is recorded as `harness_error`, so a study never loses a row.
    """
    specs = list(specs)
    done = journal.load()
    todo = [s for s in specs if s.key not in done]

    def guarded(spec: TrialSpec) -> TrialRecord:
        start = time.monotonic()
        try:
            return execute(spec)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            return _error_record(spec, time.monotonic() - start, error)

    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=description, unit="trial",
               disable=not progress, leave=False, dynamic_ncols=True)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(guarded, s) for s in todo]
        for future in as_completed(futures):
            record = future.result()
            journal.append(record)
            done[record.trial_key] = record
            bar.update(1)
    bar.close()
    return [done[s.key] for s in specs]


def _error_record(spec: TrialSpec, wall_s: float, error: str) -> TrialRecord:
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=False, stages_passed=0, stopped_stage=spec.stage,
        turns=0, wall_s=wall_s, agent_s=0.0, verifier_s=0.0, exit_reason="harness_error",
        stage_outcomes_json=json.dumps([]), error=error,
    )
