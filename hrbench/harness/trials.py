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
from hrbench.harness.loop import Rollout, record_from, run_stage, trial_context
from hrbench.harness.terminal import open_terminal
from hrbench.harness.trajectory import TrajectoryRecorder, load_matched_prefix, trajectory_relpath
from hrbench.harness.records import StageOutcome, TrialRecord, TrialSpec
from hrbench.protocol import Budget, CheckpointProtocol, Condition, StatePolicy
from hrbench.tasks.model import Task


def natural_protocol(condition: Condition) -> str:
    """The protocol label of a condition's natural rollouts (part of the trial key)."""
    return f"natural-{condition.history.value}-{condition.state.value}"


def default_trajectory_dir(backend: LocalBackend) -> Path:
    """Trajectories live beside the backend's cache: `<study out>/trajectories/`."""
    return Path(backend.cache_dir).parent / "trajectories"


def _history_for(policy: str, agent: Agent) -> History:
    summarize = getattr(agent, "summarize", None)
    return History(policy, summarizer=summarize) if callable(summarize) else History(policy)


def _recorder(spec: TrialSpec, agent: Agent) -> TrajectoryRecorder:
    return TrajectoryRecorder(spec.key, getattr(agent, "name", type(agent).__name__),
                              getattr(agent, "model_name", None), {"agent_id": spec.agent})


def _finish(spec: TrialSpec, agent: Agent, outcomes: list[StageOutcome], start: float, rollout: Rollout,
            history: History | None, traj_root: Path, error: str | None, policy: str) -> TrialRecord:
    """The trial row, with its trajectory written first (so a row never points at a missing file)."""
    path: str | None = None
    record = record_from(spec, outcomes, time.monotonic() - start, agent, error, rollout)
    try:
        if rollout.recorder is not None:
            if history is not None:
                rollout.recorder.messages = list(history.log)
            target = traj_root / trajectory_relpath(spec.key)
            rollout.recorder.write(
                target,
                final_metrics={"total_prompt_tokens": record.tokens_in, "total_completion_tokens": record.tokens_out,
                               "total_cost_usd": record.cost_usd},
                extra={"trial_key": spec.key, "kind": spec.kind, "stage": spec.stage, "history_policy": policy,
                       "exit_reason": record.exit_reason, "exit_detail": record.exit_detail,
                       "passed": record.passed, "stages_passed": record.stages_passed,
                       "stopped_stage": record.stopped_stage, "turns": record.turns,
                       "parse_errors": record.parse_errors, "wall_s": record.wall_s, "error": record.error},
            )
            try:
                path = str(target.relative_to(traj_root.parent))
            except ValueError:
                path = str(target)
    except OSError as exc:  # a trajectory that cannot be written is noted, the row is still kept
        record = record.model_copy(update={"error": (record.error or "") + f"\ntrajectory not written: {exc}"})
    return record.model_copy(update={"trajectory_path": path})


def _end_agent(agent: Agent) -> None:
    end = getattr(agent, "end_trial", None)
    if callable(end):
        try:
            end()
        except Exception:
            pass


def _teardown(terminal, agent: Agent, env) -> None:
    """End of a trial's lifecycle, whatever happened: shell, agent, then the workspace."""
    if terminal is not None:
        terminal.close()
    _end_agent(agent)
    env.close()


def run_checkpoint_trial(spec: TrialSpec, task: Task, agent: Agent, backend: LocalBackend,
                         protocol: CheckpointProtocol, seed: int,
                         trajectory_dir: Path | None = None) -> TrialRecord:
    """One trial of one stage from its declared checkpoint e_{i-1}."""
    stage = task.stage(spec.stage or "")
    traj_root = Path(trajectory_dir) if trajectory_dir else default_trajectory_dir(backend)
    start = time.monotonic()
    budget = protocol.budget
    rollout = Rollout(budget=budget, n_parts=1, recorder=_recorder(spec, agent))
    outcomes: list[StageOutcome] = []
    history: History | None = None
    error: str | None = None
    env = backend.start(task, stage.index)
    terminal = None
    try:
        agent.begin_trial(trial_context(spec, task, seed))
        history = _history_for(protocol.history, agent)
        history.start_checkpoint(stage.index)
        if protocol.history == "matched" and stage.index > 0:
            prefix = load_matched_prefix(traj_root, spec.prereg_sha256[:16], spec.agent, task.name, stage.index,
                                         spec.trial_index)
            if prefix is None:
                raise RuntimeError(
                    f"history 'matched' needs a recorded natural rollout of agent {spec.agent!r} on task "
                    f"{task.name!r} (full history) that passed parts 1-{stage.index}; none is under {traj_root}. "
                    "Run the natural trials first, or use 'fresh' or 'compacted'.")
            history.start_matched(prefix)
            rollout.recorder.system(f"matched history: transcript prefix of {len(prefix)} messages", stage.index)
        terminal = open_terminal(env, agent)
        outcomes.append(run_stage(env, agent, task, stage, history, budget, terminal=terminal, rollout=rollout,
                                  last_stage=stage.index == task.n_stages - 1))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    finally:
        _teardown(terminal, agent, env)
    return _finish(spec, agent, outcomes, start, rollout, history, traj_root, error, protocol.history)


def run_natural_trial(spec: TrialSpec, task: Task, agent: Agent, backend: LocalBackend,
                      condition: Condition, budget: Budget, seed: int,
                      trajectory_dir: Path | None = None) -> TrialRecord:
    """One end-to-end rollout from e_0, stages delivered in order, stopping at the first failure."""
    traj_root = Path(trajectory_dir) if trajectory_dir else default_trajectory_dir(backend)
    start = time.monotonic()
    rollout = Rollout(budget=budget, n_parts=task.n_stages, recorder=_recorder(spec, agent))
    outcomes: list[StageOutcome] = []
    history: History | None = None
    error: str | None = None
    env = backend.start(task, 0)
    terminal = None
    try:
        agent.begin_trial(trial_context(spec, task, seed))
        history = _history_for(condition.history.value, agent)
        terminal = open_terminal(env, agent)
        for stage in task.stages:
            if stage.index > 0:
                history.boundary(stage.index)
                if history.policy == "compact":
                    rollout.compactions += 1
                    rollout.recorder.system("history compacted (stage boundary)", stage.index,
                                            summary=history.messages[0].content if history.messages else "")
                elif history.policy == "reset":
                    rollout.recorder.system("history reset (stage boundary)", stage.index)
                if condition.state is StatePolicy.repair:
                    backend.restore(env, stage.index)
                    terminal.reopen()  # the workspace was replaced: a new shell sees the repaired state
                    rollout.recorder.system(f"state repaired to the oracle state after part {stage.index}",
                                            stage.index)
            outcome = run_stage(env, agent, task, stage, history, budget, terminal=terminal, rollout=rollout)
            outcomes.append(outcome)
            if not outcome.passed:
                break
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    finally:
        _teardown(terminal, agent, env)
    return _finish(spec, agent, outcomes, start, rollout, history, traj_root, error, condition.history.value)


class TrialJournal:
    """Append-only JSON-lines file of finished trials: the unit of crash safety and resume."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def load(self) -> dict[str, TrialRecord]:
        """Finished trials by key. A torn last line (a crash mid-write) is cut off the file, so the
        next append starts on a line of its own instead of being glued to the fragment."""
        records: dict[str, TrialRecord] = {}
        if not self.path.exists():
            return records
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self._lock, open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)
            data = data[: data.rfind(b"\n") + 1]
        for line in data.decode("utf-8", errors="replace").splitlines():
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
    raises (an infrastructure failure: sandbox, snapshot, disk) is returned as a `harness_error`
    row but not journaled, so a resumed run tries it again instead of keeping the failure.
    """
    specs = list(specs)
    done = journal.load()
    todo = [s for s in specs if s.key not in done]

    def guarded(spec: TrialSpec) -> tuple[TrialRecord, bool]:
        start = time.monotonic()
        try:
            return execute(spec), True
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            return _error_record(spec, time.monotonic() - start, error), False

    bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=description, unit="trial",
               disable=not progress, leave=False, dynamic_ncols=True)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(guarded, s) for s in todo]
        for future in as_completed(futures):
            record, keep = future.result()
            if keep:
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
