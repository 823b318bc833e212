"""What every environment backend offers the harness: exec, verify, snapshot."""

from __future__ import annotations

import os
from typing import NamedTuple, Protocol

from pydantic import BaseModel

from hrbench.tasks.harbor import Healthcheck, resolve_env
from hrbench.tasks.model import Stage, Task


class ExecResult(BaseModel):
    exit_code: int
    output: str  # stdout and stderr interleaved, decoded with replacement; head and tail only
    output_bytes: int = 0  # how many bytes the command printed in all
    timed_out: bool = False
    duration_s: float


class WorkdirFile(NamedTuple):
    """A file of a trial's workdir (or persisted paths): its content, or the target of a symlink, and its mode."""

    data: bytes | None = None
    link: str | None = None
    mode: int = 0o644


class VerifierResult(BaseModel):
    """One verification, with Harbor's reward semantics (docs/tasks.md, "rewards").

    `rewards` is what the verifier wrote, verbatim: {"reward": x} from reward.txt, or reward.json's
    table (sub-rewards such as counters unclamped). `reward` is the stage's score in [0, 1]: the
    `reward` key (else the only key), clamped. `error` is set when there was no usable reward file
    (a verifier error: exit reason `verifier_error`, retried on resume), and then reward is 0."""

    reward: float
    passed: bool
    output: str  # head and tail of what the verifier printed
    duration_s: float
    output_bytes: int = 0  # how many bytes it printed in all
    rewards: dict[str, float] = {}
    error: str | None = None
    # Set when the verifier gave no usable reward because of what the agent did (filled the workspace,
    # ran code that exhausted the verifier's memory or processes): the stage scores 0 with exit reason
    # `failed` and this as its detail, never `verifier_error` (which would let an agent veto its failure).
    agent_fault: str | None = None
    artifacts: list[str] = []  # sandbox paths collected after this verification (/logs/artifacts, declared)


class Environment(Protocol):
    """One live environment for one trial (start -> agent -> verifier -> close)."""

    task: Task

    def exec(self, command: str, timeout_s: float) -> ExecResult: ...

    def verify(self, stage: Stage) -> VerifierResult: ...

    def begin_stage(self, stage: Stage) -> None:
        """Ready `stage` before the agent's turn: step workdir/ files, setup.sh, healthcheck (idempotent)."""
        ...

    def close(self) -> None: ...


class TrialEnvironment(Environment, Protocol):
    """An environment that runs a task's healthchecks (both backends)."""

    def healthcheck(self, check: Healthcheck, what: str) -> None: ...


def ready_for_first_stage(env: TrialEnvironment, task: Task, stages_done: int) -> None:
    """What every backend does with a new trial's environment before the agent's first turn: the
    environment's healthcheck, then the first stage's set-up; the environment is closed if either fails."""
    try:
        if task.healthcheck is not None:
            env.healthcheck(task.healthcheck, "[environment.healthcheck]")
        if stages_done < task.n_stages:
            env.begin_stage(task.stages[stages_done])
    except BaseException:
        env.close()
        raise


def task_env(task: Task, *extra: tuple[tuple[str, str], ...], where: str = "[environment.env]") -> dict[str, str]:
    """A process's task variables, on either backend: [environment.env] plus `extra` tables (e.g.
    [verifier.env], named `where` in errors), templates resolved from the harness's environment.
    Reads os.environ itself, not a copy: only the variables a table names are read."""
    toml = task.path / "task.toml"
    try:
        out = resolve_env(task.env, os.environ, f"{toml} [environment.env]") if task.env else {}
        for table in extra:
            if table:
                out.update(resolve_env(table, os.environ, f"{toml} {where}"))
    except KeyError as exc:
        raise SandboxError(exc.args[0]) from None
    return out


class SandboxError(RuntimeError):
    """The environment could not be created or used (a harness error, not an agent failure)."""


class LimitExceeded(RuntimeError):
    """The agent (or what it ran) went past a fixed bound of the harness, e.g. a reply too large.

    An agent failure, not a harness error: the trial ends with exit reason `limit_exceeded`."""

    exit_reason = "limit_exceeded"
