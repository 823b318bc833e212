"""The one harness: every trial of every agent runs through these functions.

terminus-2 conventions (DESIGN §5): the agent sends a batch of commands per turn;
output is cut to 10,000 bytes; a command waits at most 60 s; a turn cap is stated
and enforced; stages are delivered one at a time in one environment; a rollout
stops at the first failed stage. Every failure becomes a typed exit reason.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback

from hrbench.agents.base import Action, Agent, Message, Observation, TrialContext
from hrbench.envs.base import Environment
from hrbench.harness.history import History
from hrbench.harness.records import ExitReason, StageOutcome, TrialRecord, TrialSpec
from hrbench.harness.truncation import truncate_output
from hrbench.protocol import Budget
from hrbench.tasks.model import Stage, Task


def stage_prompt(task: Task, stage: Stage, budget: Budget) -> str:
    """The message that delivers a stage; earlier parts are named complete, the cap is stated."""
    k, i = task.n_stages, stage.index + 1
    lead = f"Part {i - 1} is marked complete. Here is part {i} of {k}." if i > 1 else f"Here is part 1 of {k}."
    cap = (f"\nYou have at most {budget.max_turns} turns for this part; the session stops after turn "
           f"{budget.max_turns}.") if budget.max_turns else ""
    return f"{lead}{cap}\n\n{stage.instruction.strip()}"


def run_stage(env: Environment, agent: Agent, task: Task, stage: Stage, history: History, budget: Budget) -> StageOutcome:
    """Drive one stage turn by turn, then verify the state the agent left."""
    history.add(Message(role="user", content=stage_prompt(task, stage, budget), stage_index=stage.index))
    start = time.monotonic()
    agent_s = 0.0
    turns = 0
    reason: ExitReason | None = None
    error: str | None = None
    acted = False
    while True:
        if budget.max_turns is not None and turns >= budget.max_turns:
            reason = "turn_cap"
            break
        remaining = budget.timeout_sec - (time.monotonic() - start)
        if remaining <= 0:
            reason = "timeout"
            break
        observation = Observation(
            task=task.name, stage=stage.name, stage_index=stage.index, n_stages=task.n_stages,
            turn=turns + 1, turn_cap=budget.max_turns, messages=tuple(history.messages),
        )
        t0 = time.monotonic()
        try:
            action = agent.act(observation)
        except Exception as exc:  # an agent crash is a recorded outcome, never a lost trial
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            reason = "harness_error"
            break
        finally:
            agent_s += time.monotonic() - t0
        turns += 1
        history.add(Message(role="assistant", content=_describe(action), stage_index=stage.index))
        outputs = []
        for command in action.commands:
            remaining = budget.timeout_sec - (time.monotonic() - start)
            if remaining <= 0:
                break
            wait = min(budget.command_timeout_sec, remaining)
            result = env.exec(command.keystrokes, wait)
            acted = True
            outputs.append(result.output + (f"\n[command timed out after {wait:.0f}s]" if result.timed_out else ""))
        if action.commands:
            history.add(Message(role="user", content=truncate_output("".join(outputs)), stage_index=stage.index))
        if action.task_complete:
            break
    agent_phase = time.monotonic() - start
    verdict = env.verify(stage)
    if verdict.passed:
        reason = "passed"
    elif reason is None:
        reason = "failed" if acted else "early_exit"
    return StageOutcome(
        stage=stage.name, passed=verdict.passed, reward=verdict.reward, turns=turns,
        wall_s=agent_phase + verdict.duration_s, agent_s=agent_s, verifier_s=verdict.duration_s,
        exit_reason=reason, error=error,
    )


def _describe(action: Action) -> str:
    return json.dumps({
        "analysis": action.analysis, "plan": action.plan, "task_complete": action.task_complete,
        "commands": [c.keystrokes[:2000] for c in action.commands],
    })


def record_from(spec: TrialSpec, outcomes: list[StageOutcome], wall_s: float, agent: Agent,
                error: str | None = None) -> TrialRecord:
    """Fold stage outcomes into the trial row."""
    passed_prefix = 0
    for o in outcomes:
        if not o.passed:
            break
        passed_prefix += 1
    last = outcomes[-1] if outcomes else None
    usage = agent.usage()
    if spec.kind == "checkpoint":
        passed = bool(last and last.passed)
    else:
        passed = error is None and bool(outcomes) and all(o.passed for o in outcomes) and passed_prefix == len(outcomes)
    reason: ExitReason = "harness_error" if error else (last.exit_reason if last else "harness_error")
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=passed, stages_passed=passed_prefix,
        stopped_stage=None if (passed and spec.kind == "natural") else (last.stage if last else None),
        turns=sum(o.turns for o in outcomes), wall_s=wall_s,
        agent_s=sum(o.agent_s for o in outcomes), verifier_s=sum(o.verifier_s for o in outcomes),
        exit_reason=reason, tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, cost_usd=usage.cost_usd,
        stage_outcomes_json=json.dumps([o.model_dump() for o in outcomes]),
        error=error or (last.error if last else None),
    )


def trial_context(spec: TrialSpec, task: Task, study_seed: int) -> TrialContext:
    """Per-trial seed from the study seed and the trial key: a resumed trial replays identically."""
    seed = int.from_bytes(hashlib.sha256(f"{study_seed}|{spec.key}".encode()).digest()[:8], "little")
    return TrialContext(trial_key=spec.key, seed=seed, task=task, kind=spec.kind)
