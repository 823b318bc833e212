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
    # Reference agents only (oracle, sim): `keystrokes` is solve.sh's text, run as Harbor's oracle runs it
    # (the backend's `run_solution`: /solution uploaded, `bash /solution/solve.sh` from WORKDIR), so $0,
    # BASH_SOURCE and sibling helpers work. Agents that parse replies never set it.
    solution: bool = False


class Action(BaseModel):
    analysis: str = ""
    plan: str = ""
    commands: list[Command] = []
    task_complete: bool = False
    raw: str | None = Field(None, description="the reply as the agent wrote it (shown back in history)")
    parse_error: str | None = Field(None, description="why the reply is not an action; fed back to the agent")


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


class ContextLengthExceeded(RuntimeError):
    """Raised by an agent whose endpoint rejected the prompt as too long for its context."""


class Agent(ABC):
    """An agent configuration under test. One instance serves one trial at a time.

    Capabilities are declared here, with the defaults of an agent that has none of them; the
    harness reads them and never probes for optional attributes.
    """

    name: str = "agent"
    model_name: str | None = None  # the model behind the agent, for trajectories
    uses_shell: bool = False  # types into one persistent shell (else each command runs on its own)
    ask_confirmation: bool = False  # terminus-2 asks once, in the last stage, before grading
    writes_summaries: bool = False  # `summarize` writes the compaction summary (else the harness extracts one)

    @abstractmethod
    def begin_trial(self, context: TrialContext) -> None:
        """Reset per-trial state (rng, counters) before the first stage."""

    @abstractmethod
    def act(self, observation: Observation) -> Action:
        """Choose the next batch of commands from what the harness shows."""

    def usage(self) -> Usage:
        """Tokens and cost spent so far in this trial."""
        return Usage()

    def near_context_limit(self) -> bool:
        """True when the next prompt would nearly fill the context (`compact` history compacts first)."""
        return False

    def summarize(self, messages: list[Message]) -> str:
        """The compaction summary of `messages`, for agents with `writes_summaries`."""
        raise NotImplementedError(f"{type(self).__name__} does not write summaries (writes_summaries is False)")

    def end_trial(self) -> None:
        """Release per-trial resources (a process, a connection); called once, whatever happened."""
