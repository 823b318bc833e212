"""Plain tables of task structure and dense outcomes, built from trial rows for the report.

`dense_table` turns natural-rollout trial rows into one row per trial with the dense reward
R = Σ w_k r_k / Σ w_k over the task's stages, its failure type and its resources. r_k is the stage's
sub-rewards combined (reward.json's keys other than `reward`, equal weights, when every one is in
[0, 1]: e.g. the per-line scores of a transduction chunk, so a half-right chunk counts 0.5), else the
stage verifier's reward; 0 for stages the rollout never reached. `structure_row` puts D, N and W of one task side by side (the depth–work plane).
Statistics over these rows live in :mod:`hrbench.stats.dense`; nothing here computes intervals.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from hrbench.harness.records import TrialRecord
from hrbench.stats.dense import (
    FailureType,
    failure_type,
    is_false_finish,
    reward_from_subrewards,
    stage_rewards,
    task_reward,
)
from hrbench.structure.depth import DepthEstimate, DepthStatus
from hrbench.structure.work import task_work
from hrbench.tasks.model import Task


class DenseRow(BaseModel):
    model_config = ConfigDict(frozen=True)
    agent: str
    condition: str
    task: str
    family: str
    trial_index: int
    reward: float  # R
    stage_rewards: tuple[float, ...]
    exit_reason: str
    failure: FailureType
    false_finish: bool
    tokens: int
    turns: int
    wall_s: float
    cost_usd: float


def dense_row(record: TrialRecord, task: Task) -> DenseRow:
    """One natural rollout as a dense-reward row (stage weights from task.toml)."""
    if record.kind != "natural":
        raise ValueError(f"trial {record.trial_key}: dense rewards are defined on natural rollouts, not {record.kind}")
    outcomes = json.loads(record.stage_outcomes_json or "[]")
    subrewards = json.loads(record.rewards_json or "{}")
    by_name = {o["stage"]: _stage_reward(float(o["reward"]), subrewards.get(o["stage"], {})) for o in outcomes}
    reached = []
    for stage in task.stages:
        if stage.name not in by_name:
            break
        reached.append(by_name[stage.name])
    r = stage_rewards(reached, task.n_stages)
    R = float(task_reward(r, [s.weight for s in task.stages]))
    kind = failure_type(record.exit_reason, R)
    return DenseRow(agent=record.agent, condition=record.condition, task=record.task, family=task.family,
                    trial_index=record.trial_index, reward=R, stage_rewards=tuple(float(x) for x in r),
                    exit_reason=record.exit_reason, failure=kind, false_finish=is_false_finish(kind, R),
                    tokens=record.tokens_in + record.tokens_out, turns=record.turns, wall_s=record.wall_s,
                    cost_usd=record.cost_usd)


def _stage_reward(reward: float, subrewards: dict[str, float]) -> float:
    """r_k of one reached stage: its sub-rewards combined when they are all rewards in [0, 1] (a
    counter such as `runtime_ms` is not), else the verifier's reward."""
    parts = {k: v for k, v in subrewards.items() if k != "reward"}
    if parts and all(isinstance(v, (int, float)) and 0.0 <= float(v) <= 1.0 for v in parts.values()):
        return reward_from_subrewards(parts)
    return reward


def dense_table(records: Sequence[TrialRecord], tasks: Sequence[Task]) -> list[DenseRow]:
    """Dense rows of every natural rollout among `records` (checkpoint trials are skipped)."""
    by_name = {t.name: t for t in tasks}
    missing = sorted({r.task for r in records if r.kind == "natural" and r.task not in by_name})
    if missing:
        raise ValueError(f"trial rows name tasks that were not given: {missing}")
    return [dense_row(r, by_name[r.task]) for r in records if r.kind == "natural"]


class StructureRow(BaseModel):
    """Depth and work of one task: D (with its status), N, W in lines / characters / tokens, H_dep."""

    model_config = ConfigDict(frozen=True)
    task: str
    family: str
    depth: int | None
    depth_status: DepthStatus
    n_turns: int | None
    work_lines: int
    work_chars: int
    work_tokens: int | None
    n_stages: int
    dependency_depth: int


def structure_row(task: Task, depth: DepthEstimate) -> StructureRow:
    w = task_work(task)
    return StructureRow(task=task.name, family=task.family, depth=depth.depth, depth_status=depth.status,
                        n_turns=depth.n_turns, work_lines=w.lines, work_chars=w.chars, work_tokens=w.tokens,
                        n_stages=task.n_stages, dependency_depth=task.dependency_depth)
