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
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hrbench.envs.base import ExecResult, SandboxError, VerifierResult
from hrbench.envs.confine import (
    LAUNCH_ENV,
    SANDBOX_UID,
    SandboxLimits,
    TrialCgroup,
    area_tempdir,
    bwrap_available,
    confined_argv,
    mount_sized_tmpfs,
    namespace_args,
    privileged,
    root_mounts,
    sandbox_area,
    sandbox_owner,
    sweep_stale,
    unmount,
)
from hrbench.harness.truncation import HeadTail
from hrbench.tasks.model import Stage, Task

if TYPE_CHECKING:
    from hrbench.envs.shell import PersistentShell

__all__ = ["LocalBackend", "LocalEnvironment", "SandboxLimits", "bwrap_available", "copy_tree"]

CHECK_LIBRARY = Path(__file__).resolve().parent.parent / "tasks" / "checks.sh"
EXEC_OUTPUT_LIMIT = 256 * 1024  # head + tail kept of one exec's output
VERIFIER_OUTPUT_LIMIT = 64 * 1024  # head + tail kept of a verifier's output
_KILL_GRACE_S = 5.0


def _sandbox_args(workspace: Path, workdir: str, limits: SandboxLimits, extra: list[str] | None = None,
                  nested_userns: bool = False, env: dict[str, str] | None = None) -> list[str]:
    """bwrap arguments: the shared root, the workspace at `workdir`, then `extra` mounts."""
    return (root_mounts(limits) + ["--dir", str(Path(workdir).parent), "--bind", str(workspace), workdir]
            + (extra or []) + namespace_args(nested_userns=nested_userns, env=env, chdir=workdir))


def run_confined(argv: list[str], stdin: str, timeout_s: float, cgroup: TrialCgroup | None,
                 output_limit: int = EXEC_OUTPUT_LIMIT) -> ExecResult:
    """Run a confined command, feeding it `stdin`; its output is kept head and tail only.

    When it returns, the command's process tree is gone or going: bwrap's pid namespace dies with
    its main child (or with bwrap, on a timeout). Callers that must be sure (verify) empty the
    trial's cgroup afterwards; doing it here would also end a persistent shell of the same trial."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=LAUNCH_ENV, cwd="/")
    buf = HeadTail(output_limit // 2)

    def read() -> None:
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            buf.add(chunk)

    def write() -> None:
        try:
            proc.stdin.write(stdin.encode("utf-8", errors="surrogateescape"))
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    reader = threading.Thread(target=read, daemon=True)
    writer = threading.Thread(target=write, daemon=True)
    reader.start()
    writer.start()
    # The output pipe closes when bwrap and everything in its pid namespace are gone: waiting for the
    # reader is waiting for the command, without subprocess's polling sleeps.
    reader.join(timeout=timeout_s)
    timed_out = reader.is_alive()
    if timed_out:
        _kill_group(proc)  # bwrap dies, and its pid namespace with it (--die-with-parent)
        reader.join(timeout=_KILL_GRACE_S)
    if reader.is_alive() and cgroup is not None:  # something still holds the pipe: empty the trial's cgroup
        cgroup.kill()
        reader.join(timeout=_KILL_GRACE_S)
    try:
        proc.wait(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
    for stream in (proc.stdout, proc.stdin):
        try:
            stream.close()
        except OSError:
            pass
    return ExecResult(
        exit_code=proc.returncode if not timed_out else 124,
        output=buf.render(),
        output_bytes=buf.total,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    try:
        proc.wait(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


class LocalEnvironment:
    """A live workspace; every exec is a fresh sandboxed process over the same files.

    Every process the environment starts (execs, shells, verifiers) joins one cgroup per
    environment, so memory and process limits hold for the trial as a whole, and `verify` and
    `close` can end all of them."""

    def __init__(self, task: Task, workspace: Path, memory_mb: int = 1024, owns_workspace: bool = True,
                 limits: SandboxLimits | None = None, mounted: bool = False):
        self.task = task
        self.workspace = workspace
        self.limits = limits or SandboxLimits(memory_mb=memory_mb)
        self.memory_mb = self.limits.memory_mb
        self._owns = owns_workspace
        self._mounted = mounted
        self._shells: list[PersistentShell] = []
        self._cgroup: TrialCgroup | None = None

    @property
    def cgroup(self) -> TrialCgroup:
        if self._cgroup is None:
            self._cgroup = TrialCgroup(self.workspace.name, self.limits)
        return self._cgroup

    @property
    def workspace_is_sized(self) -> bool:
        """The workspace is its own tmpfs of `limits.workspace_mb` (root), not only RLIMIT_FSIZE."""
        return self._mounted

    def exec(self, command: str, timeout_s: float) -> ExecResult:
        args = _sandbox_args(self.workspace, self.task.workdir, self.limits)
        return run_confined(confined_argv(args, ["/bin/bash", "-s"], self.limits, self.cgroup), command, timeout_s,
                            self.cgroup)

    def open_shell(self) -> PersistentShell:
        """A persistent sandboxed bash over this workspace (llm and command agents type into it).

        Same sandbox and limits as `exec`; `verify` and `close` end it (and everything it started)."""
        from hrbench.envs.shell import PersistentShell

        args = _sandbox_args(self.workspace, self.task.workdir, self.limits)
        argv = confined_argv(args, ["/bin/bash", "--noprofile", "--norc", "-s"], self.limits, self.cgroup)
        shell = PersistentShell(argv)
        self._shells = [s for s in self._shells if not s.closed] + [shell]
        return shell

    def stop_agent_processes(self) -> None:
        """End every process the agent has running here: its shells and anything they started."""
        for shell in self._shells:
            shell.close()
        self._shells = []
        if self._cgroup is not None:
            self._cgroup.kill()

    def verify(self, stage: Stage) -> VerifierResult:
        """Copy the stage's tests in (read-only), run them, read the reward, remove them.

        No agent process is alive while the verifier runs, /logs starts empty, and the reward is
        read only once the verifier's whole process tree is dead."""
        self.stop_agent_processes()
        tmp = area_tempdir("verify")
        try:
            tests, logs = tmp / "tests", tmp / "logs"
            tests.mkdir()
            logs.mkdir()
            mounted_logs = mount_sized_tmpfs(logs, self.limits.tmp_mb)
            try:
                (logs / "verifier").mkdir()
                sandbox_owner(logs)
                shutil.copy(CHECK_LIBRARY, tests / "checks.sh")
                if self.task.shared_tests is not None:
                    shutil.copytree(self.task.shared_tests, tests, dirs_exist_ok=True)
                shutil.copytree(stage.tests, tests, dirs_exist_ok=True)
                os.chmod(tests, 0o755)
                if any((logs / "verifier").iterdir()):
                    raise SandboxError(f"{logs}/verifier is not empty before the verifier runs")
                extra = ["--ro-bind", str(tests), "/tests", "--bind", str(logs), "/logs"]
                # Verifiers run with cwd /app: without PYTHONSAFEPATH an agent's /app/sqlite3.py would be
                # imported by a verifier's `python3 -c 'import sqlite3'` and could forge its result.
                args = _sandbox_args(self.workspace, self.task.workdir, self.limits, extra, nested_userns=True,
                                     env={"PYTHONSAFEPATH": "1"})
                result = run_confined(confined_argv(args, ["/bin/bash", "-s"], self.limits, self.cgroup),
                                      "bash /tests/test.sh\n", self.task.verifier_timeout_sec, self.cgroup,
                                      VERIFIER_OUTPUT_LIMIT)
                if self._cgroup is not None and not self._cgroup.kill():
                    raise SandboxError("the verifier's processes could not be killed; its reward is not read")
                reward, rewards = _read_reward(logs / "verifier")
            finally:
                if mounted_logs:
                    unmount(logs)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return VerifierResult(
            reward=reward,
            passed=reward >= 1.0 - 1e-9,
            output=result.output,
            output_bytes=result.output_bytes,
            duration_s=result.duration_s,
            rewards=rewards,
        )

    def close(self) -> None:
        """End every process of the environment, release its cgroup, remove the workspace if owned."""
        self.stop_agent_processes()
        if self._cgroup is not None:
            self._cgroup.release()
            self._cgroup = None
        if self._owns:
            if self._mounted:
                unmount(self.workspace)
                self._mounted = False
            shutil.rmtree(self.workspace, ignore_errors=True)


def _unit(value: object) -> float:
    """A reward in [0, 1]; NaN, infinities and non-numbers are invalid (ValueError)."""
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ValueError(f"reward {value!r} is not a finite number")
    return min(1.0, max(0.0, number))


REWARD_FILE_LIMIT = 1 << 20


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


def _read_reward(folder: Path) -> tuple[float, dict[str, float]]:
    """reward.json (mean of its subtask rewards) or reward.txt; anything unreadable scores 0."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0.0, {}  # no folder (or a symlink in its place): no reward
    try:
        json_text = _read_small(folder_fd, "reward.json")
        if json_text is not None:
            values = {str(k): _unit(v) for k, v in json.loads(json_text).items()}
            return (sum(values.values()) / len(values) if values else 0.0), values
        text = _read_small(folder_fd, "reward.txt")
        if text is not None:
            return _unit(text.strip()), {}
    except (ValueError, TypeError, AttributeError, json.JSONDecodeError):
        pass  # an unreadable reward is a failed verification, never a crash
    finally:
        os.close(folder_fd)
    return 0.0, {}


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a workspace, sharing blocks where the filesystem allows (reflink)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    # `cp -a` keeps modes and times (verifiers check permissions); into an existing dir copy its contents.
    source = f"{src}/." if dest.exists() else str(src)
    subprocess.run(["cp", "-a", "--reflink=auto", source, str(dest)], check=True)


def clear_dir(folder: Path) -> None:
    """Remove a directory's contents (it may be a mount point, so the directory itself stays)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


class LocalBackend:
    """Creates workspaces: e_0 from the task package, e_{i-1} by replaying sigma_1..sigma_{i-1} once.

    Snapshots live in `cache_dir`; trial workspaces and snapshot builds live in the sandbox area
    (a directory the sandbox uid can reach, see `sandbox_area`) unless `scratch_dir` is given.
    As root, every trial workspace is its own tmpfs of `limits.workspace_mb`."""

    name = "local"

    def __init__(self, cache_dir: Path, scratch_dir: Path | None = None, memory_mb: int = 1024,
                 limits: SandboxLimits | None = None):
        self.cache_dir = Path(cache_dir)
        self._scratch = Path(scratch_dir) if scratch_dir else None
        self.limits = limits or SandboxLimits(memory_mb=memory_mb)
        self.memory_mb = self.limits.memory_mb
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @property
    def scratch_dir(self) -> Path:
        if self._scratch is not None:
            return self._scratch
        area = sandbox_area()
        sweep_stale(area)
        return area

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def check_supported(self, task: Task) -> None:
        if not bwrap_available():
            raise SandboxError(
                "bubblewrap (bwrap) is not installed; the local backend needs it: apt-get install -y bubblewrap")
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
            previous = self.checkpoint_state(task, stages_done - 1) if stages_done > 0 else None
            self.scratch_dir.mkdir(parents=True, exist_ok=True)
            # built where the sandbox uid can reach it, then moved next to its target and renamed
            staging = area_tempdir("build", self.scratch_dir)
            try:
                building = staging / "state"
                if previous is None:
                    building.mkdir()
                    self._materialize_initial(task, building)
                else:
                    copy_tree(previous, building)
                    self._replay(task, stages_done, building)
                moved = target.with_name(target.name + f".building-{os.getpid()}")
                shutil.rmtree(moved, ignore_errors=True)
                copy_tree(building, moved)  # `cp -a`: keeps the sandbox uid as owner
                os.replace(moved, target)  # atomic: a crash never leaves a half-built snapshot in use
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return target

    def _replay(self, task: Task, stages_done: int, building: Path) -> None:
        env = LocalEnvironment(task, building, owns_workspace=False, limits=self.limits)
        try:
            stage = task.stages[stages_done - 1]
            result = env.exec(stage.solution_script(), task.agent_timeout_sec)
            check = env.verify(stage)
        finally:
            env.close()
        if not check.passed:
            raise SandboxError(
                f"task {task.name!r}: replaying the reference solution of stage {stage.name!r} "
                f"did not pass its verifier (reward {check.reward}); run `hrbench tasks audit`.\n"
                f"{result.output[-800:]}\n{check.output[-800:]}"
            )

    def _materialize_initial(self, task: Task, dest: Path) -> None:
        for source, rel in task.initial_files:
            target = dest / rel if rel else dest
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target if rel else dest / source.name)
        sandbox_owner(dest)
        if task.setup_script is not None:
            env = LocalEnvironment(task, dest, owns_workspace=False, limits=self.limits)
            try:
                result = env.exec(task.setup_script.read_text(), task.agent_timeout_sec)
            finally:
                env.close()
            if result.exit_code != 0:
                raise SandboxError(f"task {task.name!r}: environment/setup.sh failed:\n{result.output[-800:]}")

    def start(self, task: Task, stages_done: int = 0) -> LocalEnvironment:
        """A fresh private copy of the checkpoint state, for one trial (a sized tmpfs when root)."""
        snapshot = self.checkpoint_state(task, stages_done)
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        workspace = area_tempdir("ws", self.scratch_dir)
        mounted = mount_sized_tmpfs(workspace, self.limits.workspace_mb)
        try:
            copy_tree(snapshot, workspace)
            if privileged() and snapshot.stat().st_uid != SANDBOX_UID:  # a snapshot from before the uid drop
                sandbox_owner(workspace)
        except (OSError, subprocess.CalledProcessError) as exc:
            if mounted:
                unmount(workspace)
            shutil.rmtree(workspace, ignore_errors=True)
            raise SandboxError(f"task {task.name!r}: cannot copy the snapshot into a workspace of "
                               f"{self.limits.workspace_mb} MB: {exc}") from exc
        return LocalEnvironment(task, workspace, owns_workspace=True, limits=self.limits, mounted=mounted)

    def restore(self, env: LocalEnvironment, stages_done: int) -> None:
        """State repair: replace the workspace contents by the oracle state e_{stages_done}."""
        snapshot = self.checkpoint_state(env.task, stages_done)
        env.stop_agent_processes()
        clear_dir(env.workspace)
        copy_tree(snapshot, env.workspace)
