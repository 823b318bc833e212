"""What every environment backend offers the harness: exec, verify, snapshot."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from hrbench.tasks.model import Stage, Task


class ExecResult(BaseModel):
    exit_code: int
    output: str  # stdout and stderr interleaved, decoded with replacement; head and tail only
    output_bytes: int = 0  # how many bytes the command printed in all
    timed_out: bool = False
    duration_s: float


class VerifierResult(BaseModel):
    reward: float  # 0..1; a missing reward file counts as 0
    passed: bool
    output: str  # head and tail of what the verifier printed
    duration_s: float
    output_bytes: int = 0  # how many bytes it printed in all
    rewards: dict[str, float] = {}  # reward.json subtasks, when the verifier writes them


class Environment(Protocol):
    """One live environment for one trial (start -> agent -> verifier -> close)."""

    task: Task

    def exec(self, command: str, timeout_s: float) -> ExecResult: ...

    def verify(self, stage: Stage) -> VerifierResult: ...

    def close(self) -> None: ...


class SandboxError(RuntimeError):
    """The environment could not be created or used (a harness error, not an agent failure)."""


class LimitExceeded(RuntimeError):
    """The agent (or what it ran) went past a fixed bound of the harness, e.g. a reply too large.

    An agent failure, not a harness error: the trial ends with exit reason `limit_exceeded`."""

    exit_reason = "limit_exceeded"
