"""Trial rows: one flat record per trial, written to the journal and the parquet tables."""

from __future__ import annotations

import json
from typing import Literal

import pandas as pd
from pydantic import BaseModel

from hrbench.exits import ExitReason

TrialKind = Literal["checkpoint", "natural"]


class StageOutcome(BaseModel):
    stage: str
    passed: bool
    reward: float
    turns: int
    wall_s: float
    agent_s: float
    verifier_s: float
    exit_reason: ExitReason
    error: str | None = None
    detail: str | None = None  # which budget ended the stage, when one did
    parse_errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    rewards: dict[str, float] = {}  # the verifier's reward files verbatim (reward.json's sub-rewards)
    met_min_reward: bool | None = None  # Harbor's step gate, when the step declares min_reward


class TrialSpec(BaseModel):
    """Everything that identifies a trial; its key makes runs resumable and idempotent."""

    prereg_sha256: str
    agent: str
    condition: str
    protocol: str  # checkpoint protocol hash, or the natural policy, e.g. "natural-full-own"
    task: str
    kind: TrialKind
    stage: str | None  # checkpoint trials only
    trial_index: int

    @property
    def key(self) -> str:
        return "/".join([
            self.prereg_sha256[:16], self.agent, self.condition, self.protocol, self.task,
            f"{self.kind}:{self.stage or 'all'}", str(self.trial_index),
        ])


class TrialRecord(TrialSpec):
    trial_key: str
    passed: bool  # checkpoint: the stage passed; natural: every stage passed
    stages_passed: int  # natural: consecutive stages passed from the start; checkpoint: 0 or 1
    stopped_stage: str | None  # the stage at which a natural rollout stopped (None if it finished)
    turns: int
    wall_s: float
    agent_s: float
    verifier_s: float
    exit_reason: ExitReason
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    stage_outcomes_json: str  # list[StageOutcome] as JSON, kept flat for parquet
    error: str | None = None
    exit_detail: str | None = None  # e.g. which budget (turns, wall time, tokens) stopped the trial
    parse_errors: int = 0  # replies the harness could not parse (fed back to the agent)
    compactions: int = 0  # history compactions (policy or context-length recovery)
    trajectory_path: str | None = None  # ATIF trajectory JSON, relative to the study output dir
    rewards_json: str = "{}"  # {stage: {key: value}}: every sub-reward the verifiers wrote, kept flat for parquet
    # {stage: [paths]}: the artifacts saved after each verification (Harbor's `artifacts`, /logs/artifacts),
    # relative to the study output dir; their manifest (what was skipped and why) is in the trajectory
    artifacts_json: str = "{}"
    # Harbor's trial reward (multi_step_reward_strategy: mean, or final) over the stages that ran; descriptive,
    # not an input of the estimand (docs/tasks.md, "min_reward, multi_step_reward_strategy and the estimand")
    harbor_reward: float | None = None
    started_at: str | None = None  # ISO 8601, UTC: when the harness began the trial (None: not run by the harness)
    attempts: int = 1  # attempts of this trial so far, this one included (hrbench.exits: no-result ones are retried)
    # the earlier attempts, oldest first: [{attempt, exit_reason, error, trajectory_path}] (their rows are in the
    # attempts journal, their trajectories beside this one as `….attempt-N.json.gz`); none enters an estimate
    earlier_attempts_json: str = "[]"
    # imported trials (hrbench import harbor): when Harbor recorded the rollout (its finished_at); None for trials
    # hrbench ran. started_at is then when hrbench read its outcome.
    recorded_at: str | None = None


def records_table(records: list[TrialRecord]) -> pd.DataFrame:
    """One row per trial; the columns exist even when there are no trials. Every sub-reward a verifier
    wrote is a column of its own, `reward.<stage>.<key>` (absent where that stage did not write it)."""
    rows = []
    extra: dict[str, None] = {}
    for r in records:
        row = r.model_dump()
        for stage, values in json.loads(r.rewards_json).items():
            for key, value in values.items():
                row[f"reward.{stage}.{key}"] = value
                extra[f"reward.{stage}.{key}"] = None
        rows.append(row)
    return pd.DataFrame(rows, columns=list(TrialRecord.model_fields) + list(extra))
