"""One trial lifecycle — prepare → run stages → verify → record — and its two shapes.

A checkpoint trial runs one stage from its declared checkpoint e_{i-1}; a natural rollout runs
every stage from e_0 in one environment, applying the condition's policies at each boundary and
stopping at the first failure. Everything else (environment, agent, history, terminal, budgets,
trajectory, teardown, the row) is the same lifecycle, in `run_trial`.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hrbench.agents.base import Agent, Message
from hrbench.envs.base import Environment
from hrbench.envs.registry import Backend
from hrbench.harness.history import History
from hrbench.harness.loop import Rollout, record_from, run_stage, trial_context
from hrbench.harness.records import StageOutcome, TrialRecord, TrialSpec
from hrbench.harness.terminal import Terminal, open_terminal
from hrbench.harness.trajectory import TrajectoryRecorder, trajectory_relpath
from hrbench.protocol import Budget, CheckpointProtocol, Condition, StatePolicy
from hrbench.tasks.harbor import artifact_index, continues_after, trial_reward
from hrbench.tasks.model import Stage, Task

PrefixSource = Callable[[int], list[Message] | None]
StateSource = Callable[[int], str | None]  # stage index -> a saved agent state holding e_{i-1} (None: none)
StateNamer = Callable[[int], str]  # stages passed -> the name a prefix rollout saves its state under


def natural_protocol(condition: Condition) -> str:
    """The protocol label of a condition's natural rollouts (part of the trial key)."""
    return f"natural-{condition.history.value}-{condition.state.value}"


@dataclass
class LiveTrial:
    """The live parts of one trial, handed to a shape's hooks."""

    task: Task
    agent: Agent
    backend: Backend
    env: Environment
    history: History
    terminal: Terminal
    rollout: Rollout


@dataclass(frozen=True)
class TrialShape:
    """What distinguishes one kind of trial: where it starts, which stages, which policies."""

    start_stage: int  # the environment holds the oracle state after this many stages
    stages: tuple[Stage, ...]
    history_policy: str
    budget: Budget
    n_parts: int  # parts the trial delivers, as stated to the agent
    prepare: Callable[[LiveTrial], None] = lambda trial: None  # the starting history
    boundary: Callable[[LiveTrial, Stage], None] = lambda trial, stage: None  # before every stage but the first
    last_stage_of_task: bool | None = None  # None: the task's last stage is the last
    information: str = "stage_given"  # how each stage is stated (checkpoint protocols may give the goal only)
    start_state: str | None = None  # a saved agent state to start from instead of the oracle state
    # after every stage, with the outcomes so far (prefix rollouts save the agent's passing states here)
    after_stage: Callable[[LiveTrial, Stage, list[StageOutcome]], None] = lambda trial, stage, outcomes: None


def checkpoint_shape(task: Task, stages: tuple[Stage, ...], protocol: CheckpointProtocol, spec: TrialSpec,
                     matched_prefix: PrefixSource | None, solution_state: StateSource | None = None) -> TrialShape:
    """One stage from e_{i-1}, with the protocol's starting history (fresh, compacted or matched).

    e_{i-1} is the oracle state, or under `solution_conditioned` a state this agent itself left
    after passing parts 1..i-1 in a prefix rollout (`solution_state`); with none recorded the trial
    fails with the reason (a harness error: left out of every estimate, tried again on resume).

    A merged segment (several adjacent stages, a coarser decomposition) runs them in order from
    the first one's checkpoint, history kept and own state inside the segment, stopping at its
    first failure: the segment passes when all of them pass.
    """
    stage = stages[0]
    start_state = None
    if protocol.state == "solution_conditioned" and stage.index > 0:
        start_state = solution_state(stage.index) if solution_state else None
        if start_state is None:
            raise RuntimeError(
                f"state 'solution_conditioned' needs a prefix rollout of agent {spec.agent!r} on task {task.name!r} "
                f"that passed parts 1-{stage.index}; none is recorded (see prefix_rollouts). Run more checkpoint "
                "trials (each runs one prefix rollout), or use state 'oracle_replay'.")

    def prepare(trial: LiveTrial) -> None:
        trial.history.start_checkpoint(stage.index)
        if start_state is not None:
            trial.rollout.recorder.system(f"solution-conditioned state: the agent's own state {start_state}",
                                          stage.index)
        if protocol.history == "matched" and stage.index > 0:
            prefix = matched_prefix(stage.index) if matched_prefix else None
            if prefix is None:
                raise RuntimeError(
                    f"history 'matched' needs a recorded natural rollout of agent {spec.agent!r} on task "
                    f"{task.name!r} (full history) that passed parts 1-{stage.index}; none is recorded. "
                    "Run the natural trials first, or use 'fresh' or 'compacted'.")
            trial.history.start_matched(prefix)
            trial.rollout.recorder.system(f"matched history: transcript prefix of {len(prefix)} messages",
                                          stage.index)

    def boundary(trial: LiveTrial, next_stage: Stage) -> None:
        trial.rollout.recorder.system("next part of the merged checkpoint segment (history kept)",
                                      next_stage.index)

    budget = protocol.stage_budget(task.n_stages, [s.index for s in stages])
    return TrialShape(start_stage=stage.index, stages=stages, history_policy=protocol.history,
                      budget=budget, n_parts=len(stages), prepare=prepare, boundary=boundary,
                      last_stage_of_task=stages[-1].index == task.n_stages - 1, information=protocol.information,
                      start_state=start_state)


def natural_shape(task: Task, condition: Condition, budget: Budget, save_states: StateNamer | None = None) -> TrialShape:
    """Every stage from e_0; at each boundary the condition's history and state policies apply.

    With `save_states` (prefix rollouts of a solution-conditioned study) the workspace is saved after
    every passed stage but the last, while every stage so far passed, before the next stage's setup."""

    def after_stage(trial: LiveTrial, stage: Stage, outcomes: list[StageOutcome]) -> None:
        done = len(outcomes)
        if save_states is None or done >= task.n_stages or not all(o.passed for o in outcomes):
            return
        trial.backend.save_state(trial.env, save_states(done))
        trial.rollout.recorder.system(f"state after part {done} saved as {save_states(done)}", stage.index)

    def boundary(trial: LiveTrial, stage: Stage) -> None:
        history, recorder = trial.history, trial.rollout.recorder
        history.boundary(stage.index)
        if history.policy == "compact":
            trial.rollout.compactions += 1
            recorder.system("history compacted (stage boundary)", stage.index,
                            summary=history.messages[0].content if history.messages else "")
        elif history.policy == "reset":
            recorder.system("history reset (stage boundary)", stage.index)
        if condition.state is StatePolicy.repair:
            trial.backend.restore(trial.env, stage.index)
            trial.terminal.reopen()  # the workspace was replaced: a new shell sees the repaired state
            recorder.system(f"state repaired to the oracle state after part {stage.index}", stage.index)

    return TrialShape(start_stage=0, stages=tuple(task.stages), history_policy=condition.history.value,
                      budget=budget, n_parts=task.n_stages, boundary=boundary, after_stage=after_stage)


def run_trial(spec: TrialSpec, task: Task, agent: Agent, backend: Backend, shape: TrialShape, seed: int,
              trajectory_dir: Path) -> TrialRecord:
    """Prepare the environment, agent and history; run the stages (each verified); record the row."""
    start = time.monotonic()
    recorder = TrajectoryRecorder(spec.key, agent.name, agent.model_name, {"agent_id": spec.agent})
    rollout = Rollout(budget=shape.budget, n_parts=shape.n_parts, recorder=recorder, information=shape.information)
    outcomes: list[StageOutcome] = []
    history: History | None = None
    error: str | None = None
    env = backend.start(task, shape.start_stage, shape.start_state)
    artifacts = artifacts_folder(Path(trajectory_dir), spec.key)
    shutil.rmtree(artifacts, ignore_errors=True)  # an earlier attempt's: this attempt's row describes its own
    if hasattr(env, "artifacts_dir"):  # backends that collect Harbor artifacts save them beside the trajectory
        env.artifacts_dir = artifacts
    terminal = None
    try:
        agent.begin_trial(trial_context(spec, task, seed))
        history = History(shape.history_policy, summarizer=agent.summarize) if agent.writes_summaries \
            else History(shape.history_policy)
        terminal = open_terminal(env, agent)
        trial = LiveTrial(task, agent, backend, env, history, terminal, rollout)
        shape.prepare(trial)
        for n, stage in enumerate(shape.stages):
            if n > 0:
                shape.boundary(trial, stage)
            last = shape.last_stage_of_task if n == len(shape.stages) - 1 else False
            outcome = run_stage(env, agent, task, stage, history, shape.budget, terminal=terminal, rollout=rollout,
                                last_stage=last)
            outcomes.append(outcome)
            shape.after_stage(trial, stage, outcomes)
            if not continues_after(stage.min_reward, outcome.passed, outcome.rewards or None):
                break
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    finally:
        _teardown(terminal, agent, env)
    record = _record(spec, agent, outcomes, start, rollout, history, Path(trajectory_dir), error, shape.history_policy)
    stage_rewards = [None if o.exit_reason == "verifier_error" else o.reward for o in outcomes]  # Harbor: no reward
    return record.model_copy(update={"harbor_reward": trial_reward(task.reward_strategy, stage_rewards)})


def run_checkpoint_trial(spec: TrialSpec, task: Task, agent: Agent, backend: Backend,
                         protocol: CheckpointProtocol, seed: int, *, trajectory_dir: Path,
                         matched_prefix: PrefixSource | None = None,
                         solution_state: StateSource | None = None) -> TrialRecord:
    """One trial of one stage (or merged segment `a+b`) from its declared checkpoint e_{i-1}.

    `matched_prefix(stage_index)` gives a `matched` checkpoint its transcript and `solution_state(stage_index)`
    a `solution_conditioned` one its saved workspace (None: none recorded).
    """
    stages = tuple(task.stage(name) for name in (spec.stage or "").split("+"))
    shape = checkpoint_shape(task, stages, protocol, spec, matched_prefix, solution_state)
    return run_trial(spec, task, agent, backend, shape, seed, trajectory_dir)


def run_natural_trial(spec: TrialSpec, task: Task, agent: Agent, backend: Backend,
                      condition: Condition, budget: Budget, seed: int, *, trajectory_dir: Path,
                      save_states: StateNamer | None = None) -> TrialRecord:
    """One end-to-end rollout from e_0, stages delivered in order, stopping at the first failure.

    `save_states(stages_passed)` names the saved workspace after each passed stage (prefix rollouts)."""
    return run_trial(spec, task, agent, backend, natural_shape(task, condition, budget, save_states), seed,
                     trajectory_dir)


def _record(spec: TrialSpec, agent: Agent, outcomes: list[StageOutcome], start: float, rollout: Rollout,
            history: History | None, traj_root: Path, error: str | None, policy: str) -> TrialRecord:
    """The trial row, with its trajectory written first (so a row never points at a missing file)."""
    path: str | None = None
    record = record_from(spec, outcomes, time.monotonic() - start, agent, error, rollout)
    saved = artifact_index(artifacts_folder(traj_root, spec.key), traj_root.parent)
    record = record.model_copy(update={"artifacts_json": json.dumps(
        {stage: [e["saved"] for e in entries if e["saved"] is not None] for stage, entries in saved.items()})})
    try:
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
                   "parse_errors": record.parse_errors, "wall_s": record.wall_s, "error": record.error,
                   "artifacts": saved},
        )
        try:
            path = str(target.relative_to(traj_root.parent))
        except ValueError:
            path = str(target)
    except OSError as exc:  # a trajectory that cannot be written is noted, the row is still kept
        record = record.model_copy(update={"error": (record.error or "") + f"\ntrajectory not written: {exc}"})
    return record.model_copy(update={"trajectory_path": path})


def artifacts_folder(traj_root: Path, trial_key: str) -> Path:
    """Where a trial's artifacts are saved: beside its trajectory, one folder per stage inside."""
    relpath = trajectory_relpath(trial_key)
    return traj_root / relpath.with_name(relpath.name.removesuffix(".json.gz") + ".artifacts")


def _teardown(terminal: Terminal | None, agent: Agent, env: Environment) -> None:
    """End of a trial's lifecycle, whatever happened: shell, agent, then the workspace."""
    if terminal is not None:
        terminal.close()
    try:
        agent.end_trial()
    except Exception:  # a failing cleanup must not replace the trial's own outcome
        pass
    env.close()
