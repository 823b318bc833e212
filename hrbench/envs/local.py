"""The `local` backend: a bubblewrap sandbox around a workspace directory (DESIGN §4).

The sandbox root is bwrap's own tmpfs with read-only binds of /usr and /etc only:
binding / (or /opt, /var, /home) would expose the task registry, and with it every
solve.sh and test, to the agent.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from typing import TYPE_CHECKING

from hrbench.envs.base import ExecResult, SandboxError, VerifierResult
from hrbench.tasks.model import Stage, Task

if TYPE_CHECKING:
    from hrbench.envs.shell import PersistentShell

CHECK_LIBRARY = Path(__file__).resolve().parent.parent / "tasks" / "checks.sh"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
_HOST_SECRETS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/ssl/private"]
_ROOT_SYMLINKS = [("usr/bin", "/bin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"), ("usr/sbin", "/sbin")]


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None


def _bwrap_base(workspace: Path, workdir: str) -> list[str]:
    if not bwrap_available():
        raise SandboxError(
            "bubblewrap (bwrap) is not installed; the local backend needs it: apt-get install -y bubblewrap"
        )
    args = ["bwrap", "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    # The sandbox's root is the host's root mapped into a user namespace: hide the host's secrets.
    for secret in _HOST_SECRETS:
        if Path(secret).is_dir():
            args += ["--tmpfs", secret]
        elif Path(secret).exists():
            args += ["--ro-bind", "/dev/null", secret]
    for target, link in _ROOT_SYMLINKS:
        if Path(link).is_symlink() or not Path(link).exists():
            args += ["--symlink", target, link]
        else:
            args += ["--ro-bind", link, link]
    args += [
        "--dir", str(Path(workdir).parent),
        "--bind", str(workspace), workdir,
        "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
        "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
        "--chdir", workdir,
    ]
    return args


def _run(args: list[str], stdin: str, timeout_s: float, memory_mb: int) -> ExecResult:
    """Run a sandboxed bash reading its script from stdin, with time and memory limits."""
    limited = ["prlimit", f"--as={memory_mb * 1024 * 1024}", "--nproc=512", "--"]
    start = time.monotonic()
    proc = subprocess.Popen(
        args + limited + ["/bin/bash", "-s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(stdin.encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
    except BrokenPipeError:
        out, _ = proc.communicate()
    return ExecResult(
        exit_code=proc.returncode if not timed_out else 124,
        output=out.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
    )


class LocalEnvironment:
    """A live workspace; every exec is a fresh sandboxed process over the same files."""

    def __init__(self, task: Task, workspace: Path, memory_mb: int = 1024, owns_workspace: bool = True):
        self.task = task
        self.workspace = workspace
        self.memory_mb = memory_mb
        self._owns = owns_workspace

    def exec(self, command: str, timeout_s: float) -> ExecResult:
        return _run(_bwrap_base(self.workspace, self.task.workdir), command, timeout_s, self.memory_mb)

    def open_shell(self, max_pids: int = 256) -> "PersistentShell":
        """A persistent sandboxed bash over this workspace (llm and command agents type into it).

        Same sandbox and memory limit as `exec`; a pids cgroup bounds processes where the host allows."""
        from hrbench.envs.shell import PersistentShell, pids_cgroup

        limited = ["prlimit", f"--as={self.memory_mb * 1024 * 1024}", f"--nproc={max_pids}", "--"]
        argv = _bwrap_base(self.workspace, self.task.workdir) + limited + ["/bin/bash", "--noprofile", "--norc", "-s"]
        group = pids_cgroup(f"{self.workspace.name}-{os.getpid()}-{time.monotonic_ns()}", max_pids)
        return PersistentShell(argv, cgroup=group)

    def verify(self, stage: Stage) -> VerifierResult:
        """Copy the stage's tests in (read-only), run them, read the reward, remove them."""
        with tempfile.TemporaryDirectory(prefix="hrbench-verify-") as tmp:
            tests, logs = Path(tmp) / "tests", Path(tmp) / "logs"
            tests.mkdir()
            (logs / "verifier").mkdir(parents=True)
            shutil.copy(CHECK_LIBRARY, tests / "checks.sh")
            if self.task.shared_tests is not None:
                shutil.copytree(self.task.shared_tests, tests, dirs_exist_ok=True)
            shutil.copytree(stage.tests, tests, dirs_exist_ok=True)
            args = _bwrap_base(self.workspace, self.task.workdir)
            args[args.index("--chdir"):args.index("--chdir")] = [
                "--ro-bind", str(tests), "/tests", "--bind", str(logs), "/logs",
                # Verifiers run with cwd /app: without this an agent's /app/sqlite3.py would be
                # imported by a verifier's `python3 -c 'import sqlite3'` and could forge its result.
                "--setenv", "PYTHONSAFEPATH", "1",
            ]
            result = _run(args, "bash /tests/test.sh\n", self.task.verifier_timeout_sec, self.memory_mb)
            reward, rewards = _read_reward(logs / "verifier")
        return VerifierResult(
            reward=reward,
            passed=reward >= 1.0 - 1e-9,
            output=result.output[-4000:],
            duration_s=result.duration_s,
            rewards=rewards,
        )

    def close(self) -> None:
        if self._owns:
            shutil.rmtree(self.workspace, ignore_errors=True)


def _unit(value: object) -> float:
    """A reward in [0, 1]; NaN, infinities and non-numbers are invalid (ValueError)."""
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ValueError(f"reward {value!r} is not a finite number")
    return min(1.0, max(0.0, number))


def _read_reward(folder: Path) -> tuple[float, dict[str, float]]:
    """reward.json (mean of its subtask rewards) or reward.txt; anything unreadable scores 0."""
    text_file, json_file = folder / "reward.txt", folder / "reward.json"
    try:
        if json_file.is_file():
            values = {str(k): _unit(v) for k, v in json.loads(json_file.read_text()).items()}
            return (sum(values.values()) / len(values) if values else 0.0), values
        if text_file.is_file():
            return _unit(text_file.read_text().strip()), {}
    except (ValueError, TypeError, AttributeError, json.JSONDecodeError):
        pass  # an unreadable reward is a failed verification, never a crash
    return 0.0, {}


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a workspace, sharing blocks where the filesystem allows (reflink)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    # `cp -a` keeps modes and times (verifiers check permissions); into an existing dir copy its contents.
    source = f"{src}/." if dest.exists() else str(src)
    subprocess.run(["cp", "-a", "--reflink=auto", source, str(dest)], check=True)


class LocalBackend:
    """Creates workspaces: e_0 from the task package, e_{i-1} by replaying sigma_1..sigma_{i-1} once."""

    name = "local"

    def __init__(self, cache_dir: Path, scratch_dir: Path | None = None, memory_mb: int = 1024):
        self.cache_dir = Path(cache_dir)
        self.scratch_dir = Path(scratch_dir) if scratch_dir else self.cache_dir / "scratch"
        self.memory_mb = memory_mb
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def check_supported(self, task: Task) -> None:
        if task.docker_only:
            raise SandboxError(
                f"task {task.name!r} needs the docker backend ({task.docker_only}); the local backend skips it"
            )

    def _state_dir(self, task: Task, stages_done: int) -> Path:
        return self.cache_dir / "states" / task.name / task.content_hash()[:12] / f"after-{stages_done}"

    def checkpoint_state(self, task: Task, stages_done: int) -> Path:
        """Snapshot of the oracle state after the first `stages_done` stages, built once and reused."""
        self.check_supported(task)
        target = self._state_dir(task, stages_done)
        target.parent.mkdir(parents=True, exist_ok=True)
        # A thread lock for this process and a file lock for other processes (Dagster's
        # multiprocess executor runs partitions of the same task side by side).
        with self._lock(str(target)), open(target.with_name(target.name + ".lock"), "w") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            if target.is_dir():
                return target
            building = target.with_name(target.name + f".building-{os.getpid()}")
            shutil.rmtree(building, ignore_errors=True)
            if stages_done == 0:
                building.mkdir(parents=True)
                self._materialize_initial(task, building)
            else:
                copy_tree(self.checkpoint_state(task, stages_done - 1), building)
                env = LocalEnvironment(task, building, self.memory_mb, owns_workspace=False)
                stage = task.stages[stages_done - 1]
                result = env.exec(stage.solution_script(), task.agent_timeout_sec)
                check = env.verify(stage)
                if not check.passed:
                    shutil.rmtree(building, ignore_errors=True)
                    raise SandboxError(
                        f"task {task.name!r}: replaying the reference solution of stage {stage.name!r} "
                        f"did not pass its verifier (reward {check.reward}); run `hrbench tasks audit`.\n"
                        f"{result.output[-800:]}\n{check.output[-800:]}"
                    )
            os.replace(building, target)  # atomic: a crash never leaves a half-built snapshot in use
            return target

    def _materialize_initial(self, task: Task, dest: Path) -> None:
        for source, rel in task.initial_files:
            target = dest / rel if rel else dest
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target if rel else dest / source.name)
        if task.setup_script is not None:
            env = LocalEnvironment(task, dest, self.memory_mb, owns_workspace=False)
            result = env.exec(task.setup_script.read_text(), task.agent_timeout_sec)
            if result.exit_code != 0:
                raise SandboxError(f"task {task.name!r}: environment/setup.sh failed:\n{result.output[-800:]}")

    def start(self, task: Task, stages_done: int = 0) -> LocalEnvironment:
        """A fresh private copy of the checkpoint state, for one trial."""
        snapshot = self.checkpoint_state(task, stages_done)
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        workspace = Path(tempfile.mkdtemp(prefix=f"{task.name}-", dir=self.scratch_dir))
        copy_tree(snapshot, workspace)
        return LocalEnvironment(task, workspace, self.memory_mb)

    def restore(self, env: LocalEnvironment, stages_done: int) -> None:
        """State repair: replace the workspace contents by the oracle state e_{stages_done}."""
        snapshot = self.checkpoint_state(env.task, stages_done)
        shutil.rmtree(env.workspace)
        copy_tree(snapshot, env.workspace)
