"""The one harness: every trial of every agent runs through these functions.

terminus-2 conventions (DESIGN §5, depth paper App. B): the agent sends a batch of commands per
turn; output is cut to 10,000 bytes; a command waits at most 60 s; turn caps are stated and
enforced (a per-part cap, and a cap for the whole task covering all parts together); stages are
delivered one at a time in one environment; a rollout stops at the first failed stage; a reply
the harness cannot parse is fed back as a parse error; completion is confirmed once, in the last
stage only. Every failure becomes a typed exit reason, never a lost trial.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from dataclasses import dataclass, field

from hrbench.agents.base import (
    Action,
    Agent,
    ContextLengthExceeded,
    Message,
    Observation,
    TrialContext,
    Usage,
)
from hrbench.envs.base import Environment
from hrbench.harness.history import History
from hrbench.harness.records import ExitReason, StageOutcome, TrialRecord, TrialSpec
from hrbench.harness.terminal import ExecTerminal, Terminal
from hrbench.harness.trajectory import TrajectoryRecorder
from hrbench.protocol import Budget
from hrbench.tasks.harbor import meets_min_reward
from hrbench.tasks.model import Stage, Task

CONFIRM_PROMPT = (
    "Are you sure you want to mark the task as complete? This will trigger your solution to be graded "
    "and you won't be able to make any further changes. If so, include \"task_complete\": true in your "
    "JSON response again."
)
PARSE_ERROR_PROMPT = (
    "Previous response had parsing errors:\nERROR: {error}\n\n"
    "Please fix these issues and provide a proper JSON response."
)
NO_COMMANDS = "[no commands were run]"


@dataclass
class Rollout:
    """Trial-wide meters shared by the stages of one trial (turn, time and token budgets)."""

    budget: Budget
    n_parts: int  # parts this trial delivers (k for natural rollouts, 1 for checkpoints)
    recorder: TrajectoryRecorder | None = None
    start: float = field(default_factory=time.monotonic)
    turns: int = 0
    parse_errors: int = 0
    compactions: int = 0
    information: str = "stage_given"  # a checkpoint protocol's `information`: stage_given or goal_only

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def turn_cap_text(budget: Budget, n_parts: int, part: int, turns_used: int) -> str:
    """The cap as stated to the agent (depth paper App. B wording for multi-part tasks)."""
    lines = []
    total = budget.task_max_turns
    if total is not None:
        if part == 1:
            scope = (f"for the whole task, all {n_parts} parts together" if n_parts > 1 else "for this task")
            lines.append(f"You have at most {total} turns {scope}. Parts not finished by turn {total} fail; "
                         f"the session stops after turn {total}.")
        else:
            lines.append(f"Turns used so far: {turns_used} of {total} (for the whole task, all {n_parts} "
                         f"parts together).")
    if budget.max_turns is not None:
        lines.append(f"You have at most {budget.max_turns} turns for this part; the session stops after turn "
                     f"{budget.max_turns}.")
    return "\n".join(lines)


def stage_prompt(task: Task, stage: Stage, budget: Budget, turns_used: int = 0, n_parts: int | None = None,
                 information: str = "stage_given") -> str:
    """The message that delivers a stage; earlier parts are named complete, the caps are stated.

    `goal_only` (a checkpoint protocol's information, paper §3 and §5) names parts 1..i-1 complete
    and states the task's overall goal (`Task.goal`) instead of the stage's own instruction, so the
    checkpoint reveals no decomposition the natural task does not."""
    k, i = task.n_stages, stage.index + 1
    # a checkpoint trial delivers one part: its task-wide cap is stated like part 1's
    part = i if (n_parts or k) > 1 else 1
    cap = turn_cap_text(budget, n_parts or k, part, turns_used)
    if information == "goal_only":
        done = f"Parts 1-{i - 1}" if i > 2 else "Part 1"
        lead = (f"{done} of this task {'are' if i > 2 else 'is'} marked complete. Continue the task from the "
                "state it is in; its overall goal:") if i > 1 else "Here is the task; its overall goal:"
        return f"{lead}{chr(10) + cap if cap else ''}\n\n{task.goal}"
    lead = f"Part {i - 1} is marked complete. Here is part {i} of {k}." if i > 1 else f"Here is part 1 of {k}."
    return f"{lead}{chr(10) + cap if cap else ''}\n\n{stage.instruction.strip()}"


def _usage(agent: Agent) -> Usage:
    try:
        return agent.usage()
    except Exception:  # accounting never crashes a trial
        return Usage()


def _trial_stop(budget: Budget, rollout: Rollout, trial_tokens: int) -> tuple[ExitReason, str] | None:
    """A trial-wide budget that has run out (turns, wall time, tokens), if any."""
    if budget.task_max_turns is not None and rollout.turns >= budget.task_max_turns:
        return "turn_cap", f"turn cap for the whole task ({budget.task_max_turns}) reached"
    if budget.task_timeout_sec is not None and rollout.elapsed() >= budget.task_timeout_sec:
        return "timeout", f"wall-time limit for the trial ({budget.task_timeout_sec:g}s) reached"
    if budget.task_max_tokens is not None and trial_tokens >= budget.task_max_tokens:
        return "timeout", f"token budget for the trial ({budget.task_max_tokens}) spent"
    return None


def _stage_stop(budget: Budget, stage_turns: int, stage_start: float,
                stage_tokens: int) -> tuple[ExitReason, str] | None:
    """A per-part budget that has run out, if any."""
    if budget.max_turns is not None and stage_turns >= budget.max_turns:
        return "turn_cap", f"turn cap for the part ({budget.max_turns}) reached"
    if time.monotonic() - stage_start >= budget.timeout_sec:
        return "timeout", f"wall-time limit for the part ({budget.timeout_sec:g}s) reached"
    if budget.max_tokens is not None and stage_tokens >= budget.max_tokens:
        return "timeout", f"token budget for the part ({budget.max_tokens}) spent"
    return None


def _wall_left(budget: Budget, rollout: Rollout, stage_start: float) -> float:
    left = budget.timeout_sec - (time.monotonic() - stage_start)
    if budget.task_timeout_sec is not None:
        left = min(left, budget.task_timeout_sec - rollout.elapsed())
    return left


@dataclass
class _StagePhase:
    """What one stage's agent phase has done so far (turns, time, how it ended)."""

    start: float
    usage_at_start: Usage
    turns: int = 0
    parse_errors: int = 0
    agent_s: float = 0.0
    reason: ExitReason | None = None
    error: str | None = None
    detail: str | None = None
    acted: bool = False  # some command ran (else a completion is an early exit)
    awaiting_confirmation: bool = False


def run_stage(env: Environment, agent: Agent, task: Task, stage: Stage, history: History, budget: Budget,
              *, terminal: Terminal | None = None, rollout: Rollout | None = None,
              last_stage: bool | None = None) -> StageOutcome:
    """Drive one stage turn by turn, then verify the state the agent left."""
    terminal = terminal or ExecTerminal(env)
    rollout = rollout or Rollout(budget=budget, n_parts=task.n_stages)
    last_stage = stage.index == task.n_stages - 1 if last_stage is None else last_stage
    phase = _StagePhase(start=time.monotonic(), usage_at_start=_usage(agent))
    not_started = _not_started(stage, budget, rollout, phase.usage_at_start)
    if not_started is not None:
        return not_started
    _deliver(env, task, stage, history, budget, rollout)
    _agent_phase(phase, agent, task, stage, history, budget, terminal, rollout,
                 confirm=agent.ask_confirmation and last_stage)
    return _verified(phase, env, agent, stage, rollout)


def _not_started(stage: Stage, budget: Budget, rollout: Rollout, usage: Usage) -> StageOutcome | None:
    """A part not reached before a trial-wide budget ran out fails without running (App. B)."""
    pre = _trial_stop(budget, rollout, usage.tokens_in + usage.tokens_out)
    if pre is None:
        return None
    if rollout.recorder:
        rollout.recorder.system(f"part {stage.index + 1} not started: {pre[1]}", stage.index)
    return StageOutcome(stage=stage.name, passed=False, reward=0.0, turns=0, wall_s=0.0, agent_s=0.0,
                        verifier_s=0.0, exit_reason=pre[0], detail=pre[1])


def _deliver(env: Environment, task: Task, stage: Stage, history: History, budget: Budget, rollout: Rollout) -> None:
    """Ready the stage in the environment and put its prompt in the history."""
    getattr(env, "begin_stage", lambda _stage: None)(stage)  # Harbor step workdir/, setup.sh, healthcheck
    prompt = stage_prompt(task, stage, budget, rollout.turns, rollout.n_parts, rollout.information)
    history.add(Message(role="user", content=prompt, stage_index=stage.index))
    if rollout.recorder:
        rollout.recorder.user(prompt, stage.index, stage=stage.name)


def _compact(history: History, stage: Stage, rollout: Rollout, why: str) -> None:
    history.compact(stage.index, keep_stage=stage.index)
    rollout.compactions += 1
    if rollout.recorder:
        rollout.recorder.system(f"history compacted ({why})", stage.index,
                                summary=history.messages[0].content if history.messages else "")


def _next_action(agent: Agent, task: Task, stage: Stage, history: History, budget: Budget, rollout: Rollout,
                 turn: int) -> Action:
    """The agent's action for this turn; a compacting history is compacted when the context is (nearly) full."""
    if history.policy == "compact" and agent.near_context_limit():
        _compact(history, stage, rollout, "context nearly full")

    def observe() -> Observation:
        return Observation(task=task.name, stage=stage.name, stage_index=stage.index, n_stages=task.n_stages,
                           turn=turn, turn_cap=budget.max_turns, messages=tuple(history.messages))

    try:
        return agent.act(observe())
    except ContextLengthExceeded as exc:
        _compact(history, stage, rollout, f"context length exceeded: {str(exc)[:200]}")
    try:  # once more, on the compacted history
        return agent.act(observe())
    except ContextLengthExceeded as exc:
        raise RuntimeError(f"context length exceeded even after compacting the history: {exc}") from exc


def _agent_phase(phase: _StagePhase, agent: Agent, task: Task, stage: Stage, history: History, budget: Budget,
                 terminal: Terminal, rollout: Rollout, confirm: bool) -> None:
    """Turns until the agent completes the part, a budget runs out or the agent crashes."""
    recorder = rollout.recorder
    while True:
        now = _usage(agent)
        stop = _trial_stop(budget, rollout, now.tokens_in + now.tokens_out) or _stage_stop(
            budget, phase.turns, phase.start,
            now.tokens_in + now.tokens_out - phase.usage_at_start.tokens_in - phase.usage_at_start.tokens_out)
        if stop is not None:
            phase.reason, phase.detail = stop
            return
        t0 = time.monotonic()
        try:
            action = _next_action(agent, task, stage, history, budget, rollout, phase.turns + 1)
        except Exception as exc:  # an agent crash is a recorded outcome, never a lost trial
            phase.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            phase.reason = getattr(exc, "exit_reason", "harness_error")  # LimitExceeded: the agent's own failure
            phase.agent_s += time.monotonic() - t0
            if recorder:
                recorder.system(f"harness error: {type(exc).__name__}: {exc}", stage.index)
            return
        phase.agent_s += time.monotonic() - t0
        phase.turns += 1
        rollout.turns += 1
        after = _usage(agent)
        raw = action.raw
        history.add(Message(role="assistant", content=raw if raw is not None else _describe(action),
                            stage_index=stage.index))
        if action.parse_error:
            phase.parse_errors += 1
            rollout.parse_errors += 1
            feedback = PARSE_ERROR_PROMPT.format(error=action.parse_error)
            history.add(Message(role="user", content=feedback, stage_index=stage.index))
            if recorder:
                recorder.agent_turn(raw or "", [], feedback, stage.index, phase.turns, after.tokens_in - now.tokens_in,
                                    after.tokens_out - now.tokens_out, after.cost_usd - now.cost_usd,
                                    parse_error=action.parse_error)
            continue
        output = _run_commands(phase, action, stage, terminal, budget, rollout)
        reply, done = _reply(phase, action, output, confirm)
        if recorder:
            recorder.agent_turn(raw if raw is not None else _describe(action),
                                [c.model_dump() for c in action.commands], reply, stage.index, phase.turns,
                                after.tokens_in - now.tokens_in, after.tokens_out - now.tokens_out,
                                after.cost_usd - now.cost_usd, model_name=agent.model_name)
        if done:  # the output of the completing turn is in the trajectory; the next part's prompt follows
            return
        history.add(Message(role="user", content=reply, stage_index=stage.index))


def _run_commands(phase: _StagePhase, action: Action, stage: Stage, terminal: Terminal, budget: Budget,
                  rollout: Rollout) -> str:
    """Type the action's commands (each waits at most what the budgets leave); their output."""
    for command in action.commands:
        wait = min(budget.command_timeout_sec, _wall_left(budget, rollout, phase.start))
        if wait <= 0:
            break
        if command.solution:  # the task's solve.sh, run as Harbor runs it (/solution uploaded)
            terminal.replay(stage, command.keystrokes)
        else:
            terminal.run(command.keystrokes, wait, command.duration)
        phase.acted = True
    return terminal.read() if action.commands else NO_COMMANDS


def _reply(phase: _StagePhase, action: Action, output: str, confirm: bool) -> tuple[str, bool]:
    """What the agent is told after its turn, and whether the part is done (completion confirmed once)."""
    if not action.task_complete:
        phase.awaiting_confirmation = False
        return output, False
    if confirm and not phase.awaiting_confirmation:
        phase.awaiting_confirmation = True
        return (f"{output}\n\n{CONFIRM_PROMPT}" if action.commands else CONFIRM_PROMPT), False
    return output, True


def _verified(phase: _StagePhase, env: Environment, agent: Agent, stage: Stage, rollout: Rollout) -> StageOutcome:
    """Verify the state the agent left and fold the phase into the stage's outcome."""
    agent_phase = time.monotonic() - phase.start
    verdict = env.verify(stage)
    reason, detail = phase.reason, phase.detail
    if verdict.passed:
        reason = "passed" if reason not in ("harness_error", "limit_exceeded") else reason
    elif reason is None:
        reason = "failed" if phase.acted else "early_exit"
        if reason == "early_exit":
            detail = (f"declared part {stage.index + 1} complete after {phase.turns} turn(s) without running a "
                      f"command; the verifier gave reward {verdict.reward:g}")
    if verdict.error and reason not in ("harness_error", "limit_exceeded"):
        reason = "verifier_error"  # no usable reward file: not the agent's failure, retried on resume
    elif verdict.agent_fault and reason not in ("harness_error", "limit_exceeded"):
        reason, detail = "failed", verdict.agent_fault  # the agent kept its verifier from running: its failure
    if rollout.recorder:
        rollout.recorder.system(f"part {stage.index + 1} verified: reward {verdict.reward:g} "
                                f"({'passed' if verdict.passed else 'failed'})", stage.index,
                                exit_reason=reason, verifier_output=verdict.output[-2000:],
                                verifier_output_bytes=verdict.output_bytes)
    end_usage = _usage(agent)
    return StageOutcome(
        stage=stage.name, passed=verdict.passed, reward=verdict.reward, turns=phase.turns,
        wall_s=agent_phase + verdict.duration_s, agent_s=phase.agent_s, verifier_s=verdict.duration_s,
        exit_reason=reason, error=phase.error or verdict.error, detail=detail, parse_errors=phase.parse_errors,
        rewards=verdict.rewards, met_min_reward=None if stage.min_reward is None else
        meets_min_reward(stage.min_reward, verdict.rewards if not verdict.error else None),
        tokens_in=end_usage.tokens_in - phase.usage_at_start.tokens_in,
        tokens_out=end_usage.tokens_out - phase.usage_at_start.tokens_out,
    )


def _describe(action: Action) -> str:
    return json.dumps({
        "analysis": action.analysis, "plan": action.plan, "task_complete": action.task_complete,
        "commands": [c.keystrokes[:2000] for c in action.commands],
    })


def record_from(spec: TrialSpec, outcomes: list[StageOutcome], wall_s: float, agent: Agent,
                error: str | None = None, rollout: Rollout | None = None,
                trajectory_path: str | None = None) -> TrialRecord:
    """Fold stage outcomes into the trial row."""
    passed_prefix = 0
    for o in outcomes:
        if not o.passed:
            break
        passed_prefix += 1
    # the first failed stage ends the chain (a min_reward gate may have let the rollout run on past it)
    last = next((o for o in outcomes if not o.passed), outcomes[-1]) if outcomes else None
    usage = _usage(agent)
    if spec.kind == "checkpoint":
        passed = bool(last and last.passed)
    else:
        passed = error is None and bool(outcomes) and all(o.passed for o in outcomes) and passed_prefix == len(outcomes)
    reason: ExitReason = "harness_error" if error else (last.exit_reason if last else "harness_error")
    if spec.kind == "natural" and passed and reason != "harness_error":
        reason = "passed"
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=passed, stages_passed=passed_prefix,
        stopped_stage=None if (passed and spec.kind == "natural") else (last.stage if last else spec.stage),
        turns=sum(o.turns for o in outcomes), wall_s=wall_s,
        agent_s=sum(o.agent_s for o in outcomes), verifier_s=sum(o.verifier_s for o in outcomes),
        exit_reason=reason, tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, cost_usd=usage.cost_usd,
        stage_outcomes_json=json.dumps([o.model_dump() for o in outcomes]),
        error=error or (last.error if last else None),
        exit_detail=last.detail if last else None,
        parse_errors=rollout.parse_errors if rollout else sum(o.parse_errors for o in outcomes),
        compactions=rollout.compactions if rollout else 0,
        trajectory_path=trajectory_path,
        rewards_json=json.dumps({o.stage: o.rewards for o in outcomes if o.rewards}),
    )


def trial_context(spec: TrialSpec, task: Task, study_seed: int) -> TrialContext:
    """Per-trial seed from the study seed and the trial key: a resumed trial replays identically.

    The key's pre-registration prefix is left out: it changes with the code version, and the declared
    `seed`, not the commit, is what fixes a study's randomness."""
    unversioned = spec.key.split("/", 1)[1]
    seed = int.from_bytes(hashlib.sha256(f"{study_seed}|{unversioned}".encode()).digest()[:8], "little")
    return TrialContext(trial_key=spec.key, seed=seed, task=task, kind=spec.kind)
