"""What every environment backend offers the harness (exec, verify, snapshot), and what they share:
the reward files' reading and scoring, a stage's set-up (setup.sh, healthchecks), the names both use.

Each backend is a package beside this module (envs/local/, envs/docker/) holding its code and the
scripts it runs as files (loaded with `backend_script`); neither imports the other."""

from __future__ import annotations

import json
import math
import os
import stat
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pydantic import BaseModel

from hrbench.tasks.harbor import (
    Healthcheck,
    RewardError,
    parse_reward_json,
    parse_reward_text,
    primary_reward,
    resolve_env,
)
from hrbench.tasks.model import Stage, Task

if TYPE_CHECKING:
    from hrbench.envs.shell import PersistentShell

# The PATH of every agent and verifier process, on either backend.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
# How persisted paths are named in `workdir_files` (relative to the workdir), on both backends.
PERSIST_DIR = ".hrbench-persist"
# hrbench's own check library, put beside every stage's tests as /tests/checks.sh.
CHECK_LIBRARY = Path(__file__).resolve().parent.parent / "tasks" / "checks.sh"
REWARD_FILE_LIMIT = 1 << 20


def backend_script(package: str, name: str) -> str:
    """The text of a script a backend runs, shipped as a file in its package (package-data)."""
    return resources.files(package).joinpath(name).read_text()


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

    def open_shell(self) -> PersistentShell:
        """A persistent bash in the environment, as the agent (llm and command agents type into it)."""
        ...

    def run_solution(self, stage: Stage, script: str | None = None) -> ExecResult:
        """Harbor's oracle for `stage` (`script` replaces solve.sh's text: the audit's variants)."""
        ...

    def workdir_files(self) -> dict[str, WorkdirFile]:
        """Every file and symlink of the workdir and persisted paths (PERSIST_DIR/), never followed."""
        ...

    def close(self) -> None: ...


class TrialEnvironment(Environment, Protocol):
    """An environment that runs a task's healthchecks (both backends)."""

    def healthcheck(self, check: Healthcheck, what: str) -> None: ...


class Backend(Protocol):
    """Starts environments at a stage boundary and rebuilds their state (state repair)."""

    name: str
    # keeps the agent's own workspace states (solution_conditioned checkpoints, `save_state`)
    saves_agent_states: bool

    def check_supported(self, task: Task) -> None:
        """Raise SandboxError if this backend cannot run the task."""

    def start(self, task: Task, stages_done: int = 0, state: str | None = None) -> Environment:
        """An environment holding the oracle state after `stages_done` stages (the saved `state` when named)."""

    def save_state(self, env: Environment, state: str) -> None:
        """Keep the environment's workspace as it is now under the name `state` (survives a resume)."""

    def restore(self, env: Environment, stages_done: int) -> None:
        """Replace the environment's workspace by the oracle state after `stages_done` stages."""


class StagedEnvironment:
    """What both backends' environments do the same way over their own `exec`: a stage's set-up
    (step files by the backend's `_copy_step_files`, setup.sh, healthcheck) and Docker HEALTHCHECK
    semantics. A backend's environment class derives from it and sets `task` and `_begun`."""

    task: Task
    _begun: set[int]  # stages whose workdir files, setup.sh and healthcheck ran

    def exec(self, command: str, timeout_s: float) -> ExecResult:
        raise NotImplementedError

    def _copy_step_files(self, stage: Stage) -> None:
        """The step's workdir/ files into WORKDIR, over what the agent left (Harbor's upload overwrites)."""
        raise NotImplementedError

    def begin_stage(self, stage: Stage) -> None:
        """Before the agent's turn at `stage` (once per stage): the step's workdir/ files copied into
        WORKDIR, its setup.sh run there (then removed), its healthcheck run. Raises SandboxError when
        setup.sh or a healthcheck fails: the environment is not what the task promised."""
        if stage.index in self._begun:
            return
        self._begun.add(stage.index)
        if stage.workdir_files is not None:
            self._copy_step_files(stage)
        if stage.setup_script is not None:
            script = f"{self.task.workdir}/setup.sh"
            result = self.exec(f"bash {script}; code=$?; rm -f {script}; exit $code\n",
                               stage.agent_timeout_sec or self.task.agent_timeout_sec)
            if result.exit_code != 0:
                raise SandboxError(f"task {self.task.name!r}: steps/{stage.name}/workdir/setup.sh failed "
                                   f"(exit {result.exit_code}):\n{result.output[-800:]}")
        if stage.healthcheck is not None:
            self.healthcheck(stage.healthcheck, f"[steps.healthcheck] of step {stage.name!r}")

    def healthcheck(self, check: Healthcheck, what: str) -> None:
        """Docker HEALTHCHECK semantics: healthy at the first passing run; failures during
        start_period_sec do not count; `retries` consecutive failures after it are unhealthy."""
        start = time.monotonic()
        failures = 0
        while True:
            result = self.exec(check.command + "\n", check.timeout_sec)
            if result.exit_code == 0 and not result.timed_out:
                return
            in_grace = time.monotonic() - start < check.start_period_sec
            if not in_grace:
                failures += 1
                if failures >= check.retries:
                    raise SandboxError(
                        f"task {self.task.name!r}: {what} failed {failures} time(s): `{check.command}` exited "
                        f"{result.exit_code}{' (timed out)' if result.timed_out else ''}; output: "
                        f"{result.output[-400:]!r}")
            time.sleep(check.start_interval_sec if in_grace else check.interval_sec)


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


def reward_unit(value: object) -> float:
    """A reward in [0, 1]; NaN, infinities and non-numbers are invalid (ValueError)."""
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ValueError(f"reward {value!r} is not a finite number")
    return min(1.0, max(0.0, number))



def _read_small(folder_fd: int, name: str) -> str | None:
    """A regular file's text (at most REWARD_FILE_LIMIT bytes), never through a symlink; None if absent.

    The verifier's processes (and agent code it runs) write /logs as the sandbox uid: a planted
    symlink must not make the harness read a host file as the reward."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{name} cannot be opened: {exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > REWARD_FILE_LIMIT:
            raise ValueError(f"{name} is not a regular file of at most {REWARD_FILE_LIMIT} bytes")
        return os.read(fd, REWARD_FILE_LIMIT + 1).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def read_rewards(folder: Path) -> dict[str, float]:
    """Harbor's reward files: reward.txt (one number) first, else reward.json (a table of numbers).
    Neither, or an unreadable one, is a verifier error (RewardError), never a silent 0."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise RewardError("the verifier left no /logs/verifier folder (no reward.txt or reward.json)") from exc
    try:
        text = _read_small(folder_fd, "reward.txt")
        if text is not None:
            return parse_reward_text(text)
        json_text = _read_small(folder_fd, "reward.json")
        if json_text is not None:
            try:
                data = json.loads(json_text)
            except json.JSONDecodeError as exc:
                raise RewardError(f"reward.json is not JSON: {exc}") from exc
            return parse_reward_json(data)
    except ValueError as exc:
        raise exc if isinstance(exc, RewardError) else RewardError(str(exc)) from exc
    finally:
        os.close(folder_fd)
    raise RewardError("missing reward file: the verifier wrote neither /logs/verifier/reward.txt nor "
                      "/logs/verifier/reward.json")




def score_rewards(folder: Path) -> tuple[dict[str, float], float, str | None]:
    """A verifier's reward files in `folder` scored with Harbor's semantics (docs/tasks.md, "rewards"):
    (what it wrote, the stage's score in [0, 1], None); or ({}, 0.0, why) when there is no usable reward
    (a verifier error unless the backend finds it was the agent's doing)."""
    try:
        rewards = read_rewards(folder)
        return rewards, reward_unit(primary_reward(rewards)), None
    except RewardError as exc:
        return {}, 0.0, str(exc)


class SandboxError(RuntimeError):
    """The environment could not be created or used (a harness error, not an agent failure)."""


class LimitExceeded(RuntimeError):
    """The agent (or what it ran) went past a fixed bound of the harness, e.g. a reply too large.

    An agent failure, not a harness error: the trial ends with exit reason `limit_exceeded`."""

    exit_reason = "limit_exceeded"
