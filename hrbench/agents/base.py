"""The agent interface: the harness shows an observation, the agent returns an action."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hrbench.tasks.model import Task


class Message(BaseModel):
    """One entry of the visible history; `stage_index` tells the harness which stage produced it."""

    role: Literal["system", "user", "assistant"]
    content: str
    stage_index: int


class Command(BaseModel):
    keystrokes: str
    duration: float = Field(1.0, ge=0, description="seconds the agent asks to wait (capped by the harness)")


class Action(BaseModel):
    analysis: str = ""
    plan: str = ""
    commands: list[Command] = []
    task_complete: bool = False


class Observation(BaseModel):
    """What the agent may see: the harness decides `messages` by the history policy."""

    model_config = ConfigDict(frozen=True)
    task: str
    stage: str
    stage_index: int
    n_stages: int
    turn: int  # 1-based turn within this stage
    turn_cap: int | None
    messages: tuple[Message, ...]

    @property
    def visible_boundaries(self) -> int:
        """Stage boundaries in the visible history: h in the sim agent's context-rot model."""
        return len({m.stage_index for m in self.messages if 0 <= m.stage_index != self.stage_index})


class TrialContext(BaseModel):
    """Host-side facts of a trial. Never shown to the model; the oracle-like agents use the task."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    trial_key: str
    seed: int
    task: Task
    kind: Literal["checkpoint", "natural"]


class Usage(BaseModel):
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class Agent(ABC):
    """An agent configuration under test. One instance serves one trial at a time."""

    name: str = "agent"

    @abstractmethod
    def begin_trial(self, context: TrialContext) -> None:
        """Reset per-trial state (rng, counters) before the first stage."""

    @abstractmethod
    def act(self, observation: Observation) -> Action:
        """Choose the next batch of commands from what the harness shows."""

    def usage(self) -> Usage:
        """Tokens and cost spent so far in this trial."""
        return Usage()
