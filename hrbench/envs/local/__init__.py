"""The `local` backend: a bubblewrap sandbox around a workspace directory (DESIGN §4).

The sandbox root is bwrap's own tmpfs with read-only binds of /usr and /etc only:
binding / (or /opt, /var, /home) would expose the task registry, and with it every
solve.sh and test, to the agent.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hrbench.envs import states
from hrbench.envs.base import (
    CHECK_LIBRARY,
    PERSIST_DIR,
    SANDBOX_PATH,
    ExecResult,
    SandboxError,
    StagedEnvironment,
    VerifierResult,
    WorkdirFile,
    backend_script,
    ready_for_first_stage,
    score_rewards,
    task_env,
)
from hrbench.envs.local.confine import (
    LAUNCH_ENV,
    SandboxLimits,
    TrialCgroup,
    area_tempdir,
    bwrap_available,
    confined_argv,
    mount_overlay,
    mount_sized_tmpfs,
    namespace_args,
    new_network_namespace,
    root_mounts,
    sandbox_area,
    sandbox_owner,
    sweep_stale,
    unmount,
)
from hrbench.envs.local.staging import StagedFolders, fingerprint
from hrbench.harness.truncation import HeadTail
from hrbench.tasks.harbor import save_artifacts
from hrbench.tasks.model import Stage, Task

if TYPE_CHECKING:
    from hrbench.envs.shell import PersistentShell

__all__ = ["LocalBackend", "LocalEnvironment", "SandboxLimits", "bwrap_available", "copy_tree"]

log = logging.getLogger(__name__)
EXEC_OUTPUT_LIMIT = 256 * 1024  # head + tail kept of one exec's output
VERIFIER_OUTPUT_LIMIT = 64 * 1024  # head + tail kept of a verifier's output
_KILL_GRACE_S = 5.0
# A trial's directory (and every cached state: the same layout) belongs to the harness (mode 0711; as
# root its own tmpfs of `workspace_mb`, so the size bound covers it all): `work/` is bound at WORKDIR
# and `persist/<path>` at each persisted path outside it (Task.persist: /output, /logs/artifacts, ...).
# The agent writes only inside those leaves, through their binds, and cannot reach the directories
# that hold them: so no path the host resolves (a bind source, a copy, a snapshot) runs through a
# directory the agent can write (docs/security.md, "Paths the host touches").
WORK_DIR = "work"
PERSIST_ROOT = "persist"
# What verifiers get besides the host's /usr (docs/tasks.md, "verifier tooling"): `python` for
# `python3`; pytest is Debian's python3-pytest (scripts/verifier_toolchain.sh installs it).
VERIFIER_TOOLCHAIN = "/opt/hrbench-verifier/bin"
_STEP_COPY = backend_script(__name__, "step_copy.sh")  # a step's workdir/ files into WORKDIR, in the sandbox
_FULL_BYTES = 1 << 20  # a sized workspace with less free space than this is full
STEP_FILES = "/opt/hrbench-step-workdir"  # a step's workdir/ files, bound read-only while they are copied in
# a separate verifier's inputs in transit (handover.sh): the agent's sandbox writes a tar here, the fresh one reads it
HANDOVER = "/opt/hrbench-handover"
_HANDOVER = backend_script(__name__, "handover.sh")
_TESTS = StagedFolders("tests")  # a verifier's /tests: the check library and the stage's tests
_SOLUTIONS = StagedFolders("solution")  # a replay's /solution: the step's solution folder, solve.sh as run


def _sandbox_args(root: Path, workdir: str, limits: SandboxLimits, extra: list[str] | None = None,
                  nested_userns: bool = False, env: dict[str, str] | None = None,
                  persist: tuple[str, ...] = (), joined_netns: bool = False) -> list[str]:
    """bwrap arguments: the shared root, the trial's `work/` at `workdir`, its persisted paths outside
    it, then `extra` mounts. Every source is under `root`, whose directories the agent cannot write."""
    # after `extra`: the verifier's /logs is mounted first, then /logs/artifacts over it
    binds = [a for path in persist for a in ("--bind", str(root / PERSIST_ROOT / path.lstrip("/")), path)]
    return (root_mounts(limits) + ["--dir", str(Path(workdir).parent), "--bind", str(root / WORK_DIR), workdir]
            + (extra or []) + binds + namespace_args(nested_userns=nested_userns, env=env, chdir=workdir,
                                                     joined_netns=joined_netns))


def prepare_trial_dir(root: Path, task: Task) -> None:
    """Create what is missing of a trial directory's layout: `work/` and the folders behind the task's
    persisted paths. The leaves the sandbox binds are the sandbox uid's; every directory that holds
    them is the harness's (0711), so the agent can never swap a bind source for a symlink."""
    _harness_dir(root)
    for rel in (WORK_DIR, *(f"{PERSIST_ROOT}/{path.strip('/')}" for path in task.persist)):
        node = root
        parts = rel.split("/")
        for depth, part in enumerate(parts):
            node = node / part
            leaf = depth == len(parts) - 1
            try:
                info = node.lstat()
            except FileNotFoundError:
                node.mkdir(mode=0o755 if leaf else 0o711)
                if leaf:
                    sandbox_owner(node)
                else:
                    _harness_dir(node)
                continue
            if not stat.S_ISDIR(info.st_mode) or (not leaf and info.st_uid != os.geteuid()):
                raise SandboxError(f"{node} is not a directory of the harness's: the trial directory's layout "
                                   "was changed from outside")


def _harness_dir(path: Path) -> None:
    """A directory of the trial's layout that the sandbox may traverse but not write."""
    os.chmod(path, 0o711)


# The verifier toolchain folder: `python` and the bare `pytest` command most published Harbor verifiers call
# (Debian's is `pytest-3`), as symlinks on the sandbox's own root (read-only once built): no bind, so no
# mount-table walk by bwrap.
_TOOLCHAIN_ARGS = ("--dir", VERIFIER_TOOLCHAIN,
                   "--symlink", "/usr/bin/python3", f"{VERIFIER_TOOLCHAIN}/python",
                   "--symlink", "/usr/bin/pytest-3", f"{VERIFIER_TOOLCHAIN}/pytest")


def start_confined(argv: list[str], pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start a confined command (`confined_argv`), its stdin and output on pipes: `run_confined` feeds and drains it."""
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=LAUNCH_ENV, cwd="/", pass_fds=pass_fds)


def run_confined(argv: list[str], stdin: str, timeout_s: float, cgroup: TrialCgroup | None,
                 output_limit: int = EXEC_OUTPUT_LIMIT, pass_fds: tuple[int, ...] = (),
                 started: subprocess.Popen | None = None) -> ExecResult:
    """Run a confined command, feeding it `stdin`; its output is kept head and tail only. `started`: the
    command already started (`start_confined`, a sandbox prewarmed and released just now); its
    timeout counts from this call.

    When it returns, the command's process tree is gone or going: bwrap's pid namespace dies with
    its main child (or with bwrap, on a timeout). Callers that must be sure (verify) empty the
    trial's cgroup afterwards; doing it here would also end a persistent shell of the same trial."""
    start = time.monotonic()
    proc = started or start_confined(argv, pass_fds)
    buf = HeadTail(output_limit // 2)
    pending = memoryview(stdin.encode("utf-8", errors="surrogateescape"))
    out_fd, in_fd = proc.stdout.fileno(), proc.stdin.fileno()
    os.set_blocking(in_fd, False)
    poller = select.poll()  # one thread feeds and drains the command: no helper threads per process
    poller.register(out_fd, select.POLLIN)
    poller.register(in_fd, select.POLLOUT)

    def pump(until: float) -> bool:
        """Feed stdin and drain the output until the output pipe closes (True) or `until` (False).

        The output pipe closes when bwrap and everything in its pid namespace are gone: waiting for
        it is waiting for the command, without subprocess's polling sleeps."""
        nonlocal pending
        while (remaining := until - time.monotonic()) > 0:
            for fd, _ in poller.poll(remaining * 1000):
                if fd == out_fd:
                    chunk = os.read(out_fd, 65536)
                    if not chunk:
                        poller.unregister(out_fd)
                        return True
                    buf.add(chunk)
                    continue
                try:
                    pending = pending[os.write(in_fd, pending[:65536]):]
                except BlockingIOError:
                    continue
                except OSError:  # the command stopped reading (closed its stdin or exited)
                    pending = pending[:0]
                if not pending:
                    poller.unregister(in_fd)
                    proc.stdin.close()
        return False

    timed_out = not pump(start + timeout_s)
    closed = not timed_out
    if timed_out:
        _kill_group(proc)  # bwrap dies, and its pid namespace with it (--die-with-parent)
        closed = pump(time.monotonic() + _KILL_GRACE_S)
    if not closed and cgroup is not None:  # something still holds the pipe: empty the trial's cgroup
        cgroup.kill()
        pump(time.monotonic() + _KILL_GRACE_S)
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


class _VerifierSandbox:
    """A verifier sandbox made for one stage: its folder (for /logs), what it holds open (the staged
    tests), its command line and, when prewarmed, its process held by bwrap's --block-fd before the
    command runs (`go` lets it run)."""

    def __init__(self, stage: Stage, root: Path, folder: Path):
        self.stage, self.root, self.folder = stage, root, folder
        self.logs = folder / "logs"
        self.mounted_logs = False
        self.resources = contextlib.ExitStack()
        self.argv: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.go: int | None = None  # write end of the hold: one byte lets the command run
        self.go_read: int | None = None

    def release(self) -> subprocess.Popen | None:
        """Let a prewarmed sandbox's command run (None when it was not prewarmed: start it now)."""
        if self.go is not None:
            try:
                os.write(self.go, b"1")
            except BrokenPipeError:  # bwrap already gave up (its error is in its output)
                pass
            os.close(self.go)
            self.go = None
        return self.proc


class LocalEnvironment(StagedEnvironment):
    """A live workspace; every exec is a fresh sandboxed process over the same files.

    Every process the environment starts (execs, shells, verifiers) joins one cgroup per
    environment, so memory and process limits hold for the trial as a whole, and `verify` and
    `close` can end all of them."""

    def __init__(self, task: Task, root: Path, memory_mb: int = 1024, owns_workspace: bool = True,
                 limits: SandboxLimits | None = None, mounted: bool = False, mount_point: Path | None = None):
        self.task = task
        self.root = root  # the trial directory (the harness's): work/ and persist/
        # what `close` unmounts and removes: the trial's tmpfs, which holds `root` itself or its overlay
        self._mount_point = mount_point or root
        self.workspace = root / WORK_DIR  # what the sandbox sees at WORKDIR
        self.limits = limits or SandboxLimits(memory_mb=memory_mb)
        self.memory_mb = self.limits.memory_mb
        self._owns = owns_workspace
        self._mounted = mounted
        self._shells: list[PersistentShell] = []
        self._cgroup: TrialCgroup | None = None
        self._verifier_cgroup: TrialCgroup | None = None
        self._netns: int | None = None  # the trial's network namespace fd (-1: none could be made)
        self._begun: set[int] = set()  # stages whose workdir files, setup.sh and healthcheck ran
        self._warm: _VerifierSandbox | None = None  # the current stage's verifier sandbox, prewarmed
        self.artifacts_dir: Path | None = None  # where verify() copies artifacts (per stage), when set

    def _confined(self, command: list[str], group: TrialCgroup, extra: list[str] | None = None,
                  root: Path | None = None, **kwargs) -> list[str]:
        """The command line of one of the trial's sandboxes (`_sandbox_args`) over the trial directory `root`
        (the trial's own by default), in the trial's network namespace when there is one; start it with
        `pass_fds=self._fds`."""
        netns = self.netns
        args = _sandbox_args(root or self.root, self.task.workdir, self.limits, extra, persist=self.task.persist,
                             joined_netns=netns is not None, **kwargs)
        return confined_argv(args, command, self.limits, group, netns)

    @property
    def netns(self) -> int | None:
        """The trial's network namespace (an fd), made at its first sandbox: every sandbox of the trial
        (agent commands, shells, set-up, solution replay, verifier) joins it instead of making its own,
        and it dies with the trial. None where it cannot be made (each sandbox then has its own)."""
        if self._netns is None:
            made = new_network_namespace()
            self._netns = -1 if made is None else made
        return None if self._netns < 0 else self._netns

    @property
    def _fds(self) -> tuple[int, ...]:
        return () if self.netns is None else (self.netns,)

    @property
    def cgroup(self) -> TrialCgroup:
        """The agent side's cgroups: its commands and shells, setup.sh, solution replay."""
        if self._cgroup is None:
            self._cgroup = TrialCgroup(self.root.name, self.limits)
        return self._cgroup

    @property
    def verifier_cgroup(self) -> TrialCgroup:
        """The verifier's own cgroups, siblings of the agent's: what the agent used (workspace pages
        charged to its memory, its process count, its CPU) is not taken from the verifier's budget."""
        if self._verifier_cgroup is None:
            self._verifier_cgroup = TrialCgroup(self.root.name + "-verifier", self.limits)
        return self._verifier_cgroup

    @property
    def workspace_is_sized(self) -> bool:
        """The workspace is its own tmpfs of `limits.workspace_mb` (root), not only RLIMIT_FSIZE."""
        return self._mounted

    def exec(self, command: str, timeout_s: float) -> ExecResult:
        argv = self._confined(["/bin/bash", "-s"], self.cgroup, env=task_env(self.task))
        return run_confined(argv, command, timeout_s, self.cgroup, pass_fds=self._fds)

    def open_shell(self) -> PersistentShell:
        """A persistent sandboxed bash over this workspace (llm and command agents type into it).

        Same sandbox and limits as `exec`; `verify` and `close` end it (and everything it started)."""
        from hrbench.envs.shell import PersistentShell

        argv = self._confined(["/bin/bash", "--noprofile", "--norc", "-s"], self.cgroup, env=task_env(self.task))
        shell = PersistentShell(argv, pass_fds=self._fds)
        self._shells = [s for s in self._shells if not s.closed] + [shell]
        return shell

    def run_solution(self, stage: Stage, script: str | None = None) -> ExecResult:
        """Harbor's oracle: the step's solution/ folder uploaded to /solution (read-only) and
        `bash /solution/solve.sh` run from WORKDIR, so $0, BASH_SOURCE and sibling helpers work.
        `script` replaces solve.sh's text (the audit's key-step-removed variant)."""
        source = stage.solution.parent

        def build(folder: Path) -> None:
            shutil.copytree(source, folder, symlinks=True)
            if script is not None:
                (folder / "solve.sh").write_text(script)
            for root, dirs, files in os.walk(folder):
                for name in dirs + files:
                    path = Path(root, name)
                    if not path.is_symlink():
                        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
            os.chmod(folder, 0o755)

        # staged once per content (the solution folder as it is on disk, and the script run in its place)
        with _SOLUTIONS.staged(fingerprint(source, text="\0" if script is None else "\1" + script), build) as folder:
            # bash runs the script itself (not typed into `bash -s`): one process fewer per replay
            argv = self._confined(["/bin/bash", "/solution/solve.sh"], self.cgroup, ["--ro-bind", str(folder), "/solution"],
                                  env=task_env(self.task, self.task.solution_env, where="[solution.env]"))
            timeout = stage.agent_timeout_sec or self.task.agent_timeout_sec
            return run_confined(argv, "", timeout, self.cgroup, pass_fds=self._fds)

    def _copy_step_files(self, stage: Stage) -> None:
        """The step's workdir/ files into WORKDIR, copied by the sandbox itself into its own view: the
        workspace holds what the agent left, and a symlink there must not lead a host-side copy out of
        it. Staged in the sandbox area as the sandbox uid (bwrap resolves a bind source as that uid)."""
        staged = area_tempdir("step")
        try:
            shutil.copytree(stage.workdir_files, staged / "files", symlinks=True)
            sandbox_owner(staged / "files")
            argv = self._confined(["/bin/bash", "-s", STEP_FILES, self.task.workdir], self.cgroup,
                                  ["--ro-bind", str(staged / "files"), STEP_FILES], env=task_env(self.task))
            result = run_confined(argv, _STEP_COPY, stage.agent_timeout_sec or self.task.agent_timeout_sec,
                                  self.cgroup, pass_fds=self._fds)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        if result.exit_code != 0:
            raise SandboxError(f"task {self.task.name!r}: copying steps/{stage.name}/workdir/ into the workspace "
                               f"failed (exit {result.exit_code}):\n{result.output[-800:]}")

    def stop_agent_processes(self) -> None:
        """End every process the agent has running here: its shells and anything they started."""
        for shell in self._shells:
            shell.close()
        self._shells = []
        if self._cgroup is not None:
            self._cgroup.kill()

    def verify(self, stage: Stage) -> VerifierResult:
        """Run the stage's [[verifier.collect]] hooks, then its tests: in this trial's sandbox, or (a separate
        verifier, Harbor's environment_mode = "separate") in a fresh one that holds only the collected paths.

        No agent process is alive while the verifier runs, /logs starts empty, and the reward is
        read only once the verifier's whole process tree is dead."""
        self.stop_agent_processes()
        hooks = self._run_collect_hooks(stage)
        if not stage.separate_verifier:
            result = self._verify_in(stage, self.root)
        else:
            fresh = area_tempdir("separate-verifier")
            mounted = mount_sized_tmpfs(fresh, self.limits.workspace_mb, harness_owned=True)
            try:
                prepare_trial_dir(fresh, self.task)
                self._hand_over(stage, fresh)
                result = self._verify_in(stage, fresh)
            finally:
                if mounted:
                    unmount(fresh)
                shutil.rmtree(fresh, ignore_errors=True)
        return result.model_copy(update={"output": hooks + result.output, "artifacts": self._collect_artifacts(stage)})

    def _run_collect_hooks(self, stage: Stage) -> str:
        """Harbor's [[verifier.collect]]: each hook's command in the trial's sandbox (the agent's view, its
        limits), after the agent's turn and before anything is collected; whatever a hook starts is ended
        after it. A failing hook is reported in the verifier's output, and the verifier judges what it left."""
        notes = []
        for hook in stage.collect:
            run = run_confined(self._confined(["/bin/bash", "-s"], self.cgroup, env=task_env(self.task)),
                               hook.command, hook.timeout_sec, self.cgroup, pass_fds=self._fds)
            self.stop_agent_processes()
            status = "timed out" if run.timed_out else f"exit {run.exit_code}"
            notes.append(f"hrbench: [[verifier.collect]] {hook.command!r}: {status}\n{run.output[-2000:]}")
        return "".join(f"{n.rstrip()}\n" for n in notes)

    def _hand_over(self, stage: Stage, fresh: Path) -> None:
        """The collected paths (/logs/artifacts, the task's and this stage's artifacts) copied from this
        trial's sandbox into `fresh`'s, as a tar that one sandbox writes and the other extracts: the host
        resolves no path the agent could have written."""
        box = area_tempdir("handover")
        try:
            sandbox_owner(box)
            paths = list(dict.fromkeys(("/logs/artifacts", *self.task.artifacts, *stage.artifacts)))
            timeout = stage.verifier_timeout_sec or self.task.verifier_timeout_sec
            out = run_confined(self._confined(["/bin/bash", "-s", "out", f"{HANDOVER}/handover.tar", *paths],
                                              self.verifier_cgroup, ["--bind", str(box), HANDOVER], env=task_env(self.task)),
                               _HANDOVER, timeout, self.verifier_cgroup, pass_fds=self._fds)
            self.verifier_cgroup.kill()
            into = run_confined(self._confined(["/bin/bash", "-s", "in", f"{HANDOVER}/handover.tar"], self.verifier_cgroup,
                                               ["--ro-bind", str(box), HANDOVER], root=fresh, env=task_env(self.task)),
                                _HANDOVER, timeout, self.verifier_cgroup, pass_fds=self._fds)
            self.verifier_cgroup.kill()
        finally:
            shutil.rmtree(box, ignore_errors=True)
        for what, run in (("collecting", out), ("handing over", into)):
            if run.exit_code != 0:
                raise SandboxError(f"task {self.task.name!r}: {what} the separate verifier's inputs failed "
                                   f"(exit {run.exit_code}):\n{run.output[-800:]}")

    def begin_stage(self, stage: Stage) -> None:
        """The stage's set-up (StagedEnvironment.begin_stage), then its verifier's sandbox prewarmed: made
        now, while the agent works, and held before its command (`_VerifierSandbox`)."""
        fresh = stage.index not in self._begun
        super().begin_stage(stage)
        if fresh and not stage.separate_verifier and self._warm is None:
            try:
                self._warm = self._verifier_sandbox(stage, self.root, warm=True)
            except (OSError, SandboxError) as exc:  # made again, unwarmed, when the stage is verified
                log.debug("prewarming the verifier of %s failed: %s", stage.name, exc)

    def _verify_in(self, stage: Stage, root: Path) -> VerifierResult:
        """Run the stage's tests (bound read-only) over the trial directory `root`, read the reward: in the
        sandbox prewarmed for this stage when there is one, else in one made now."""
        warm, self._warm = self._warm, None
        if warm is not None and (warm.root != root or (warm.stage is not stage and warm.stage != stage)):
            self._discard(warm)
            warm = None
        box = warm or self._verifier_sandbox(stage, root, warm=False)
        group = self.verifier_cgroup
        timeout = stage.verifier_timeout_sec or self.task.verifier_timeout_sec
        try:
            if any((box.logs / "verifier").iterdir()):
                raise SandboxError(f"{box.logs}/verifier is not empty before the verifier runs")
            events = group.limit_events()
            result = run_confined(box.argv, "", timeout, group, VERIFIER_OUTPUT_LIMIT, pass_fds=self._fds,
                                  started=box.release())
            if not group.kill():
                raise SandboxError("the verifier's processes could not be killed; its reward is not read")
            agent_fault = None
            rewards, reward, error = score_rewards(box.logs / "verifier")
            if error is not None:
                agent_fault = self._agent_fault(events, group.limit_events())
            if result.timed_out and error is not None:
                error = f"the verifier timed out after {timeout:g}s ([verifier] timeout_sec); {error}"
            if agent_fault is not None:
                agent_fault, error = f"{agent_fault}; the verifier gave no reward ({error})", None
        finally:
            self._discard(box)
        return VerifierResult(
            reward=reward,
            passed=error is None and reward >= 1.0 - 1e-9,
            output=result.output,
            output_bytes=result.output_bytes,
            duration_s=result.duration_s,
            rewards=rewards,
            error=error,
            agent_fault=agent_fault,
        )

    def _verifier_sandbox(self, stage: Stage, root: Path, warm: bool) -> _VerifierSandbox:
        """The stage's verifier sandbox over `root`: its tests staged (the check library and the stage's
        tests, once per content) and bound read-only, a fresh sized /logs, its command line; with `warm`,
        also started and held before its command (bwrap's --block-fd) until `release`."""
        library, shared = CHECK_LIBRARY, self.task.shared_tests

        def build(tests: Path) -> None:
            tests.mkdir()
            shutil.copy(library, tests / "checks.sh")
            if shared is not None:
                shutil.copytree(shared, tests, dirs_exist_ok=True)
            shutil.copytree(stage.tests, tests, dirs_exist_ok=True)
            os.chmod(tests, 0o755)

        box = _VerifierSandbox(stage, root, self._verification_folder())
        try:
            tests = box.resources.enter_context(
                _TESTS.staged(fingerprint(library, *([] if shared is None else [shared]), stage.tests), build))
            box.logs.mkdir()
            box.mounted_logs = mount_sized_tmpfs(box.logs, self.limits.tmp_mb)
            (box.logs / "verifier").mkdir()
            sandbox_owner(box.logs)
            extra = ["--ro-bind", str(tests), "/tests", "--bind", str(box.logs), "/logs", *_TOOLCHAIN_ARGS]
            if warm:
                box.go_read, box.go = os.pipe()
                extra += ["--block-fd", str(box.go_read)]
            # No PYTHONSAFEPATH here: Harbor verifiers run `python -m pytest` from WORKDIR and import the
            # agent's modules on purpose. hrbench's own check library (checks.sh) sets it for itself.
            env = task_env(self.task, self.task.verifier_env, stage.verifier_env, where="[verifier.env]")
            env["PATH"] = f"{VERIFIER_TOOLCHAIN}:{env.get('PATH', SANDBOX_PATH)}"
            box.argv = self._confined(["/bin/bash", "/tests/test.sh"], self.verifier_cgroup, extra, root=root,
                                      nested_userns=True, env=env)
            if warm:
                box.proc = start_confined(box.argv, (*self._fds, box.go_read))
                os.close(box.go_read)
                box.go_read = None
        except BaseException:
            self._discard(box)
            raise
        return box

    def _discard(self, box: _VerifierSandbox) -> None:
        """End a verifier sandbox and remove what was made for it. A sandbox still held is killed
        before its hold is let go (closing the hold alone would let its command run)."""
        if box.proc is not None and box.go is not None:
            self.verifier_cgroup.kill()
            _kill_group(box.proc)
        for fd in (box.go, box.go_read):
            if fd is not None:
                os.close(fd)
        box.go = box.go_read = None
        if box.proc is not None:
            for stream in (box.proc.stdout, box.proc.stdin):
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            if box.mounted_logs:
                unmount(box.logs)
        finally:
            box.resources.close()
            shutil.rmtree(box.folder, ignore_errors=True)

    def discard_prewarmed(self) -> None:
        """End the verifier sandbox prewarmed for the current stage, if any (the trial's directory is
        about to be replaced, or the trial ends)."""
        warm, self._warm = self._warm, None
        if warm is not None:
            self._discard(warm)

    def _verification_folder(self) -> Path:
        """A folder for one verification's /logs mount: on the trial's own tmpfs when it has one (the
        harness's, 0711, never bound into a sandbox; removed with the trial even after a crash), so a
        verification creates and removes no directory on the host's disk; else in the sandbox area."""
        if not (self._mounted and self._owns):
            return area_tempdir("verify")
        folder = Path(tempfile.mkdtemp(prefix="verify-", dir=self._mount_point))
        os.chmod(folder, 0o711)
        return folder

    def _agent_fault(self, before: dict[str, int], after: dict[str, int]) -> str | None:
        """Why a verifier that left no reward could not, when the agent caused it: the verifier runs
        in its own cgroups with the trial's full budget, on the workspace the agent left, so a full
        workspace or a verifier that met its memory or process bound (running the agent's code) is
        the agent's doing. None: nothing the agent did explains it (a harness or task fault)."""
        if self._mounted:
            fs = os.statvfs(self.workspace)
            if fs.f_bavail * fs.f_frsize < _FULL_BYTES or fs.f_favail == 0:
                return f"the agent left its workspace full ({self.limits.workspace_mb} MB)"
        for event, what in (("oom_kill", f"its memory bound ({self.limits.memory_mb} MB)"),
                            ("fork_refused", f"its process bound ({self.limits.max_pids})")):
            if after.get(event, 0) > before.get(event, 0):
                return f"the verifier, running on the agent's workspace, met {what}"
        return None

    def _collect_artifacts(self, stage: Stage) -> list[str]:
        """/logs/artifacts and the declared artifacts present after `stage`; saved (bounded, symlinks
        never followed: tasks.harbor.save_artifacts) to artifacts_dir/<stage>/ when that is set."""
        found: list[tuple[str, Path]] = []
        for path in ("/logs/artifacts", *self.task.artifacts, *stage.artifacts):
            source = self._host_path(path)
            if source is not None and (source.is_symlink() or source.exists()):
                if path == "/logs/artifacts" and source.is_dir() and not any(source.iterdir()):
                    continue
                found.append((path, source))
        if self.artifacts_dir is not None:
            save_artifacts(found, self.artifacts_dir / stage.name, exclude=self.task.artifact_exclude)
        return [path for path, _ in found]

    def _host_path(self, path: str) -> Path | None:
        """Where a sandbox path lives on the host, when in the workspace; no symlink on the way."""
        workdir = self.task.workdir.rstrip("/")
        if path == workdir or path.startswith(workdir + "/"):
            base, rel = self.workspace, path[len(workdir):].strip("/")
        else:
            base, rel = self.root / PERSIST_ROOT, path.strip("/")
        node = base
        for part in [p for p in rel.split("/") if p]:
            if part == ".." or node.is_symlink():
                return None
            node = node / part
        return node

    def workdir_files(self) -> dict[str, WorkdirFile]:
        """Every file and symlink of the workdir (and of the persisted paths, under PERSIST_DIR/),
        keyed by path relative to the workdir: what the audit's tamper check compares. Read without
        following any symlink; fifos, sockets and devices are left out."""
        files: dict[str, WorkdirFile] = {}
        roots = [(self.workspace, "")] + [(self.root / PERSIST_ROOT / p.strip("/"), f"{PERSIST_DIR}/{p.strip('/')}/")
                                          for p in self.task.persist]
        for base, prefix in roots:
            for folder, dirs, names in os.walk(base):
                for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                    path = os.path.join(folder, name)
                    rel = prefix + os.path.relpath(path, base)
                    info = os.lstat(path)
                    if stat.S_ISLNK(info.st_mode):
                        files[rel] = WorkdirFile(link=os.readlink(path))
                    elif stat.S_ISREG(info.st_mode):
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                        with os.fdopen(fd, "rb") as fh:
                            files[rel] = WorkdirFile(data=fh.read(), mode=info.st_mode)
        return files

    def close(self) -> None:
        """End every process of the environment, release its cgroups, remove the trial directory if owned."""
        self.discard_prewarmed()
        self.stop_agent_processes()
        for group in (self._cgroup, self._verifier_cgroup):
            if group is not None:
                group.release()
        self._cgroup = self._verifier_cgroup = None
        if self._netns is not None and self._netns >= 0:
            os.close(self._netns)  # the trial's processes are gone: the namespace goes with its last holder
        self._netns = None
        if self._owns:
            if self._mounted:
                unmount(self._mount_point)  # with the overlay mounted inside it
                self._mounted = False
            shutil.rmtree(self._mount_point, ignore_errors=True)


def _overlay_state(state: Path, trial: Path) -> Path | None:
    """The trial's tree as an overlay (in `trial`, its sized tmpfs): the sealed `state` read-only below,
    a writable upper layer above; None when the kernel refuses the mount (the caller copies instead).

    Copy-on-write instead of `cp -a` per trial: no copy process, no bytes copied until the agent
    writes. Whatever the agent does through the overlay (writes, hard links, renames, deletions) lands
    in the upper layer on the trial's tmpfs, never in the cached state (docs/security.md)."""
    layers = [trial / name for name in ("tree", "upper", "overlay-work")]
    for folder in layers:
        folder.mkdir(mode=0o711)
    if mount_overlay(state, layers[1], layers[2], layers[0]):
        return layers[0]
    for folder in layers:
        folder.rmdir()
    return None


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
    saves_agent_states = True

    def __init__(self, cache_dir: Path, scratch_dir: Path | None = None, memory_mb: int = 1024,
                 limits: SandboxLimits | None = None):
        self.cache_dir = Path(cache_dir)
        self._scratch = Path(scratch_dir) if scratch_dir else None
        self.limits = limits or SandboxLimits(memory_mb=memory_mb)
        self.memory_mb = self.limits.memory_mb
        self._locks: dict[str, threading.Lock] = {}
        self._hashes: dict[int, tuple[Task, str]] = {}
        self._guard = threading.Lock()
        self._seals = states.SealChecks()
        self._state_bytes: dict[Path, int] = {}  # what a copy of a checked state takes on a tmpfs

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
                f"task {task.name!r} needs the docker backend ({task.docker_only}); the local backend cannot "
                "provide that: run it with `backend: docker` in the study, or install what is missing on this host"
            )

    def _state_dir(self, task: Task, stages_done: int) -> Path:
        return self.cache_dir / "states" / task.slug / self._content_hash(task)[:12] / f"after-{stages_done}"

    def _content_hash(self, task: Task) -> str:
        """The task's content hash, read once per loaded task (it reads every file of the package,
        and is asked at every trial's start): a task edited on disk is a new state once reloaded."""
        with self._guard:
            known = self._hashes.get(id(task))
        if known is not None and known[0] is task:
            return known[1]
        digest = task.content_hash()
        with self._guard:
            self._hashes[id(task)] = (task, digest)  # holding the task keeps its id from being reused
        return digest

    def _cache(self, kind: str) -> Path:
        """A folder of the cache, the harness's only (0700): no sandbox uid can reach a cached state."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        folder = self.cache_dir / kind
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        return folder

    def checkpoint_state(self, task: Task, stages_done: int) -> Path:
        """Snapshot of the oracle state after the first `stages_done` stages, built once and reused.

        Sealed with its content hash when built (states.seal) and checked at every reuse: a state that
        no longer matches (edited from outside) is logged and rebuilt."""
        self.check_supported(task)
        target = self._state_dir(task, stages_done)
        if target in self._state_bytes and self._checked(target) is None:
            return target  # built and matched before: no build lock needed to use it again
        self._cache("states")
        target.parent.mkdir(parents=True, exist_ok=True)
        # A thread lock for this process and a file lock for other processes (Dagster's
        # multiprocess executor runs partitions of the same task side by side).
        with self._lock(str(target)), open(target.with_name(target.name + ".lock"), "w") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            if target.is_dir() and not target.is_symlink():
                problem = self._checked(target)
                if problem is None:
                    return target
                log.warning("checkpoint state %s: %s; rebuilding it", target, problem)
                shutil.rmtree(target)
            previous = self.checkpoint_state(task, stages_done - 1) if stages_done > 0 else None
            self.scratch_dir.mkdir(parents=True, exist_ok=True)
            # built where the sandbox uid can reach it, then moved next to its target and renamed
            staging = area_tempdir("build", self.scratch_dir)
            try:
                building = staging / "state"
                if previous is None:
                    building.mkdir(mode=0o711)
                    self._materialize_initial(task, building)
                else:
                    copy_tree(previous, building)
                    self._replay(task, stages_done, building)
                moved = target.with_name(target.name + f".building-{os.getpid()}")
                shutil.rmtree(moved, ignore_errors=True)
                copy_tree(building, moved)  # `cp -a`: keeps owners (the harness's layout, the sandbox uid's leaves)
                hashed_from = time.time()
                sha256 = states.tree_sha256(moved)
                os.replace(moved, target)  # atomic: a crash never leaves a half-built snapshot in use
                states.seal(target, sha256)  # a crash before this: no record, so the state is rebuilt
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            self._state_bytes[target] = self._seals.sealed(target, hashed_from)
            return target

    def _checked(self, state: Path) -> str | None:
        """What is wrong with a cached state (None: it matches its seal); notes what a copy of it takes."""
        try:
            problem, size = self._seals.check(state)
        except OSError as exc:
            return f"cannot be read: {exc}"
        self._state_bytes[state] = size
        return problem

    def _replay(self, task: Task, stages_done: int, building: Path) -> None:
        env = LocalEnvironment(task, building, owns_workspace=False, limits=self.limits)
        try:
            stage = task.stages[stages_done - 1]
            env.begin_stage(stage)
            result = env.run_solution(stage)
            check = env.verify(stage)
        finally:
            env.close()
        if not check.passed:
            raise SandboxError(
                f"task {task.name!r}: replaying the reference solution of stage {stage.name!r} "
                # a verifier without a result (killed or timed out on a busy machine) is named as the audit
                # names one (runner._without_result), so the audit that built this state runs again
                f"did not pass its verifier (reward {check.reward}"
                f"{'; exit reason verifier_error; ' + check.error if check.error else ''}); "
                "run `hrbench tasks audit`.\n"
                f"{result.output[-800:]}\n{check.output[-800:]}"
            )

    def _materialize_initial(self, task: Task, root: Path) -> None:
        prepare_trial_dir(root, task)
        dest = root / WORK_DIR
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

    def _agent_state_dir(self, state: str) -> Path:
        return self._cache("agent-states") / state

    def save_state(self, env: LocalEnvironment, state: str) -> None:
        """Copy the workspace as the agent left it into the cache (a solution-conditioned checkpoint's e_{i-1}).

        Written beside its target and renamed, so a crash never leaves a half-copied state in use; a
        rerun of the same rollout (an interrupted one, replayed on resume) replaces it."""
        target = self._agent_state_dir(state)
        target.parent.mkdir(parents=True, exist_ok=True)
        building = target.with_name(target.name + f".building-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(building, ignore_errors=True)
        env.stop_agent_processes()  # nothing of the agent's may change the workspace while it is copied
        copy_tree(env.root, building)  # `cp -a`, never following a symlink: keeps owners
        sha256 = states.tree_sha256(building)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(building, target)
        states.seal(target, sha256)

    def start(self, task: Task, stages_done: int = 0, state: str | None = None) -> LocalEnvironment:
        """A fresh private copy of the checkpoint state, for one trial (a sized tmpfs when root).

        `state` names a workspace kept by `save_state` (the agent's own state after `stages_done`
        stages); without it, the oracle state."""
        if state is None:
            snapshot = self.checkpoint_state(task, stages_done)
        else:
            self.check_supported(task)
            snapshot = self._agent_state_dir(state)
            if not snapshot.is_dir():
                raise SandboxError(f"task {task.name!r}: no saved agent state {state!r} under {snapshot.parent} "
                                   "(its prefix rollout is journaled but the cache was cleared?); remove the study's "
                                   "prefix journal of this agent and task so its prefix_rollouts run again")
            problem = self._checked(snapshot)
            if problem is not None:  # the agent's own state cannot be rebuilt: refuse it
                raise SandboxError(f"task {task.name!r}: saved agent state {snapshot}: {problem}; remove it and the "
                                   "study's prefix journal of this agent and task so its prefix_rollouts run again")
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        outer = area_tempdir("ws", self.scratch_dir)
        # The overlay's upper layer gets what a copy of the state would have left free, so that the
        # workspace (state and writes) holds at most `workspace_mb`, as with a copy
        mounted = mount_sized_tmpfs(outer, self.limits.workspace_mb, harness_owned=True,
                                    reserved=self._state_bytes[snapshot])
        root = _overlay_state(snapshot, outer) if mounted else None
        if root is None:  # no overlay (not root, or the kernel refused it): a private copy, full size
            if mounted:
                unmount(outer)
            mounted = mount_sized_tmpfs(outer, self.limits.workspace_mb, harness_owned=True)
            root = outer
            try:
                copy_tree(snapshot, root)
            except (OSError, subprocess.CalledProcessError) as exc:
                if mounted:
                    unmount(root)
                shutil.rmtree(root, ignore_errors=True)
                raise SandboxError(f"task {task.name!r}: cannot copy the snapshot into a workspace of "
                                   f"{self.limits.workspace_mb} MB: {exc}") from exc
        env = LocalEnvironment(task, root, owns_workspace=True, limits=self.limits, mounted=mounted,
                               mount_point=outer)
        try:
            prepare_trial_dir(root, task)
        except BaseException:
            env.close()
            raise
        ready_for_first_stage(env, task, stages_done)
        return env

    def restore(self, env: LocalEnvironment, stages_done: int) -> None:
        """State repair: replace the workspace contents by the oracle state e_{stages_done}."""
        snapshot = self.checkpoint_state(env.task, stages_done)
        env.discard_prewarmed()  # its binds hold the directories about to be replaced
        env.stop_agent_processes()
        clear_dir(env.root)
        copy_tree(snapshot, env.root)
        prepare_trial_dir(env.root, env.task)
        env._begun = {i for i in env._begun if i < stages_done}  # the next stage's setup runs again
