"""The `command` agent: an external program speaking JSON lines on stdin/stdout.

One process per trial. The harness writes one JSON object per line to the program's stdin and,
for every observation, reads one JSON line back from its stdout:

    -> {"type": "begin_trial", "trial_key": "...", "seed": 123, "kind": "natural", "task": "tiny-chain"}
    -> {"type": "observation", "task": ..., "stage": ..., "stage_index": 0, "n_stages": 3, "turn": 1,
        "turn_cap": 20, "messages": [{"role": "user", "content": "...", "stage_index": 0}, ...]}
    <- {"analysis": "...", "plan": "...", "commands": [{"keystrokes": "ls\\n", "duration": 1}],
        "task_complete": false, "usage": {"tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}}
    -> {"type": "end_trial"}          (then stdin is closed)

`messages` is exactly what the history policy lets the agent see; `usage` (optional) is the
program's cumulative spend in this trial. A reply that is not valid JSON of that shape is a parse
error fed back to the program (in the next observation) and counted; a program that exits or
stays silent past `reply_timeout_sec` ends the trial as `harness_error`; a reply line longer than
MAX_REPLY_BYTES ends it as `limit_exceeded` (the line is discarded as it streams in, never held).
Lines the program writes to stderr are kept (the last 50, cut short) for the error message.

The program runs in a bubblewrap sandbox of its own (confine.py): read-only /usr and /etc, the
directory of its program (argv[0] when it is a path, and the first later argument naming a file:
the script an interpreter runs), the paths its config declares in
`files` (read-only) and `writable`, a private /tmp, no network unless `network: true`, and only the
environment variables its config names in `env`. It cannot read the task registry, solutions, tests,
journals or the trial's workspace (it acts through the harness's shell). Its processes share a
cgroup and a pid namespace that end with the trial. See examples/command_agent/.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import select
import subprocess
import threading
import time
from pathlib import Path

from hrbench.agents.base import Action, Agent, Observation, TrialContext, Usage
from hrbench.agents.specs import CommandAgentSpec
from hrbench.agents.replies import parse_reply
from hrbench.envs.base import SANDBOX_PATH, LimitExceeded, SandboxError
from hrbench.envs.local.confine import (
    LAUNCH_ENV,
    SANDBOX_UID,
    SandboxLimits,
    TrialCgroup,
    confined_argv,
    namespace_args,
    privileged,
    root_mounts,
)

MAX_REPLY_BYTES = 1024 * 1024  # one reply line; an action is a few kilobytes (the history keeps them all)
STDERR_LINES, STDERR_LINE_BYTES = 50, 500
# The program's own sandbox: what a CLI agent with a model client needs, nothing of the trial's.
AGENT_LIMITS = SandboxLimits(memory_mb=4096, max_pids=512, tmp_mb=1024, workspace_mb=1024)
_SYSTEM_DIRS = (Path("/usr"), Path("/etc"))


class CommandAgentError(RuntimeError):
    """The external program died, timed out or could not be started."""


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # closed at the end of the trial
        return b""


def _task_dir(context: TrialContext) -> Path | None:
    path = getattr(context.task, "path", None)  # `agents check` passes a stand-in task without one
    return Path(path).resolve() if path is not None else None


class _TooLong:
    """Put on the reply queue when a line passes MAX_REPLY_BYTES (the rest of it is discarded)."""


def _reachable_by_sandbox(path: Path) -> Path | None:
    """The first directory on the way to `path` the sandbox uid cannot traverse, if any."""
    if not privileged():
        return None
    for folder in reversed([path, *path.parents] if path.is_dir() else list(path.parents)):
        info = folder.stat()
        if info.st_uid != SANDBOX_UID and not info.st_mode & 0o001:
            return folder
    return None


def program_mounts(spec: CommandAgentSpec, task_dir: Path | None = None) -> tuple[list[str], str]:
    """bwrap binds for the program (its program's directory, the declared `files` read-only and
    `writable` read-write) and the working directory inside; none may hold the task `task_dir`."""
    cwd = Path(spec.cwd).resolve() if spec.cwd else Path.cwd()
    read_only: list[Path] = []
    # The program: argv[0] when it is a path, and the script an interpreter runs (the first later
    # argument naming a file). Other files in argv are data: they must be declared in `files`.
    scripts = [a for a in spec.argv[1:] if not a.startswith("-") and (Path(a) if os.path.isabs(a) else cwd / a).is_file()]
    for arg in ([spec.argv[0]] if "/" in spec.argv[0] else []) + scripts[:1]:
        folder = (Path(arg) if os.path.isabs(arg) else cwd / arg).resolve().parent
        if not any(folder == d or d in folder.parents for d in _SYSTEM_DIRS):
            read_only.append(folder)
    read_only += [Path(p).resolve() for p in spec.files]
    writable = [Path(p).resolve() for p in spec.writable]
    args: list[str] = []
    for kind, paths in (("--ro-bind", read_only), ("--bind", writable)):
        for path in dict.fromkeys(paths):
            if not path.exists():
                raise CommandAgentError(f"agent {spec.id!r}: {path} (in its argv, files or writable) does not exist")
            if task_dir is not None and (path == task_dir or path in task_dir.parents or task_dir in path.parents):
                raise CommandAgentError(
                    f"agent {spec.id!r}: {path} would show the program the task package {task_dir} (its solutions "
                    "and tests); move the program out of the task registry's tree, or declare narrower paths")
            blocked = _reachable_by_sandbox(path)
            if blocked is not None:
                raise CommandAgentError(
                    f"agent {spec.id!r}: its sandbox runs as uid {SANDBOX_UID} and cannot reach {path} "
                    f"({blocked} is not searchable by others); move the program elsewhere or `chmod o+x {blocked}`")
            args += [kind, str(path), str(path)]
    program = spec.argv[0]
    if "/" not in program and not any((p / program).exists() for p in map(Path, SANDBOX_PATH.split(":"))) \
            and not any((p / program).exists() for p in read_only):
        raise CommandAgentError(f"agent {spec.id!r}: {program!r} is not on the sandbox's PATH ({SANDBOX_PATH}); "
                                "give its full path and declare its directory in `files`")
    return args + ["--dir", str(cwd)], str(cwd)


class CommandAgent(Agent):
    uses_shell = True
    ask_confirmation = True

    def __init__(self, spec: CommandAgentSpec):
        self.spec = spec
        self.name = f"command:{spec.id}"
        self.model_name = None
        self.proc: subprocess.Popen | None = None
        self._cgroup: TrialCgroup | None = None
        self._usage = Usage()

    def argv(self, task_dir: Path | None = None) -> list[str]:
        """The confined command line of the program (its own sandbox, see the module docstring)."""
        mounts, cwd = program_mounts(self.spec, task_dir)
        bwrap = root_mounts(AGENT_LIMITS) + mounts + namespace_args(network=self.spec.network, env=self.spec.env,
                                                                   chdir=cwd)
        return confined_argv(bwrap, list(self.spec.argv), AGENT_LIMITS, self._cgroup)

    def begin_trial(self, context: TrialContext) -> None:
        self.end_trial()
        self._usage = Usage()
        self._cgroup = TrialCgroup(f"agent-{self.spec.id}", AGENT_LIMITS)
        try:
            self.proc = subprocess.Popen(
                self.argv(_task_dir(context)), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=LAUNCH_ENV, cwd="/", start_new_session=True,
            )
        except (OSError, SandboxError, CommandAgentError) as exc:
            self._cgroup.release()
            self._cgroup = None
            if isinstance(exc, CommandAgentError):
                raise
            raise CommandAgentError(f"agent {self.spec.id!r}: cannot start {self.spec.argv}: {exc}") from exc
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._lines: queue.Queue = queue.Queue()
        self._stderr: collections.deque = collections.deque(maxlen=STDERR_LINES)
        threading.Thread(target=self._pump, args=(self.proc.stdout.fileno(), self._lines), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._drain, args=(self.proc.stderr.fileno(),), daemon=True)
        self._stderr_reader.start()
        self._send({"type": "begin_trial", "trial_key": context.trial_key, "seed": context.seed,
                    "kind": context.kind, "task": context.task.name})

    @staticmethod
    def _pump(fd: int, lines: queue.Queue) -> None:
        """Split stdout into lines of at most MAX_REPLY_BYTES; a longer one becomes `_TooLong`."""
        line, overflow = bytearray(), False
        while chunk := _read(fd):
            while chunk:
                end = chunk.find(b"\n")
                part, chunk = (chunk, b"") if end < 0 else (chunk[:end + 1], chunk[end + 1:])
                if not overflow:
                    line += part
                    if len(line) > MAX_REPLY_BYTES:
                        overflow = True
                        line = bytearray()
                        lines.put(_TooLong())
                if end >= 0:
                    if not overflow:
                        lines.put(bytes(line))
                    line, overflow = bytearray(), False
        if line and not overflow:
            lines.put(bytes(line))
        lines.put(None)

    def _drain(self, fd: int) -> None:
        """Keep the last lines of stderr, each cut short: a program printing gigabytes costs nothing."""
        pending = b""
        while chunk := _read(fd):
            pieces = (pending + chunk).split(b"\n")
            pending = pieces.pop()[-STDERR_LINE_BYTES:]
            for piece in pieces[-STDERR_LINES:]:
                self._stderr.append(piece[:STDERR_LINE_BYTES].decode("utf-8", errors="replace").rstrip())
        if pending:
            self._stderr.append(pending.decode("utf-8", errors="replace").rstrip())

    def _send(self, payload: dict) -> None:
        """Write one line, waiting at most `reply_timeout_sec` for the program to take it."""
        data = memoryview((json.dumps(payload) + "\n").encode())
        deadline = time.monotonic() + self.spec.reply_timeout_sec
        fd = self.proc.stdin.fileno()
        try:
            while data:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CommandAgentError(f"agent {self.spec.id!r}: did not read its input within "
                                            f"{self.spec.reply_timeout_sec:g}s; stderr: {self._tail()}")
                _, ready, _ = select.select([], [fd], [], min(left, 1.0))
                if ready:
                    data = data[os.write(fd, data):]
        except (BrokenPipeError, OSError) as exc:
            raise self._gone("closed its input") from exc

    def _gone(self, what: str) -> CommandAgentError:
        """The error for a program that stopped talking (`what` it did): its exit code when it exited (a
        program that exits as the harness writes to it shows first as a closed input), and its last stderr."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return CommandAgentError(f"agent {self.spec.id!r}: the program {what}; stderr: {self._tail()}")
        self._stderr_reader.join(timeout=2)  # its last words explain the exit
        return CommandAgentError(f"agent {self.spec.id!r}: the program exited (code {code}); stderr: {self._tail()}")

    def _tail(self) -> str:
        return " | ".join(list(self._stderr)[-5:]) or "(no stderr)"

    def act(self, observation: Observation) -> Action:
        self._send({"type": "observation", **observation.model_dump(mode="json")})
        try:
            line = self._lines.get(timeout=self.spec.reply_timeout_sec)
        except queue.Empty as exc:
            raise CommandAgentError(
                f"agent {self.spec.id!r}: no reply within {self.spec.reply_timeout_sec:g}s; stderr: {self._tail()}"
            ) from exc
        if isinstance(line, _TooLong):
            raise LimitExceeded(f"agent {self.spec.id!r}: a reply line passed {MAX_REPLY_BYTES} bytes "
                                "(the harness's bound on one reply); the trial ends here")
        if line is None:
            raise self._gone("closed its output")
        text = line.decode("utf-8", errors="replace")
        action = parse_reply(text)
        try:
            usage = json.loads(text).get("usage")
            if isinstance(usage, dict):
                self._usage = Usage(tokens_in=int(usage.get("tokens_in", 0)), tokens_out=int(usage.get("tokens_out", 0)),
                                    cost_usd=float(usage.get("cost_usd", 0.0)))
        except (ValueError, AttributeError, TypeError):
            pass
        return action

    def usage(self) -> Usage:
        return self._usage

    def end_trial(self) -> None:
        """Say goodbye, give the program a moment to exit, then end it and everything it started."""
        proc, self.proc = self.proc, None
        cgroup, self._cgroup = self._cgroup, None
        if proc is not None:
            try:
                os.write(proc.stdin.fileno(), b'{"type": "end_trial"}\n')
            except (BlockingIOError, BrokenPipeError, OSError):
                pass
            for stream in (proc.stdin,):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, 9)  # bwrap's session: its pid namespace, and all in it, die with it
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if cgroup is not None:
            cgroup.release()
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
