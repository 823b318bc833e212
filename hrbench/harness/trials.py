"""Checkpoint trials and natural rollouts: one trial each, from start to its record."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path

from hrbench.agents.base import Agent, Message
from hrbench.envs.registry import Backend
from hrbench.harness.history import History
from hrbench.harness.loop import Rollout, record_from, run_stage, trial_context
from hrbench.harness.terminal import open_terminal
from hrbench.harness.trajectory import TrajectoryRecorder, trajectory_relpath
from hrbench.harness.records import StageOutcome, TrialRecord, TrialSpec
from hrbench.protocol import Budget, CheckpointProtocol, Condition, StatePolicy
from hrbench.tasks.model import Task


PrefixSource = Callable[[int], list[Message] | None]


def natural_protocol(condition: Condition) -> str:
    """The protocol label of a condition's natural rollouts (part of the trial key)."""
    return f"natural-{condition.history.value}-{condition.state.value}"


def _history_for(policy: str, agent: Agent) -> History:
    return History(policy, summarizer=agent.summarize) if agent.writes_summaries else History(policy)


def _recorder(spec: TrialSpec, agent: Agent) -> TrajectoryRecorder:
    return TrajectoryRecorder(spec.key, agent.name, agent.model_name, {"agent_id": spec.agent})


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
    try:
        agent.end_trial()
    except Exception:  # a failing cleanup must not replace the trial's own outcome
        pass


def _teardown(terminal, agent: Agent, env) -> None:
    """End of a trial's lifecycle, whatever happened: shell, agent, then the workspace."""
    if terminal is not None:
        terminal.close()
    _end_agent(agent)
    env.close()


def run_checkpoint_trial(spec: TrialSpec, task: Task, agent: Agent, backend: Backend,
                         protocol: CheckpointProtocol, seed: int, *, trajectory_dir: Path,
                         matched_prefix: PrefixSource | None = None) -> TrialRecord:
    """One trial of one stage from its declared checkpoint e_{i-1}.

    `matched_prefix(stage_index)` gives a `matched` checkpoint its transcript (None: none recorded).
    """
    stage = task.stage(spec.stage or "")
    traj_root = Path(trajectory_dir)
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
            prefix = matched_prefix(stage.index) if matched_prefix else None
            if prefix is None:
                raise RuntimeError(
                    f"history 'matched' needs a recorded natural rollout of agent {spec.agent!r} on task "
                    f"{task.name!r} (full history) that passed parts 1-{stage.index}; none is recorded. "
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


def run_natural_trial(spec: TrialSpec, task: Task, agent: Agent, backend: Backend,
                      condition: Condition, budget: Budget, seed: int, *, trajectory_dir: Path) -> TrialRecord:
    """One end-to-end rollout from e_0, stages delivered in order, stopping at the first failure."""
    traj_root = Path(trajectory_dir)
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
