"""A persistent shell per trial: one long-lived bash inside the bubblewrap sandbox.

terminus-2 conventions (DESIGN §5, depth paper App. B): the agent's keystrokes are
typed into one shell that lives for the whole trial; commands do not block — for
each command the agent states how long to wait (at most 60 s) and a command still
running after that is waited for in a later turn; the output read after a turn is
everything produced since the previous read, cut to 10,000 bytes (first and last
5,000 kept).

There is no terminal: bash reads its commands from a pipe, so a line is run when
its newline arrives (the shell appends one if the keystrokes lack it). After each
command the shell types a sentinel `echo` line carrying a per-trial random nonce;
seeing it means bash has finished everything typed before, so the wait can end
early. The sentinel is stripped from what the agent sees. `C-c` as the whole
keystrokes interrupts (kills) every process the shell has started.

Output is stored head-and-tail only (at most 10,000 bytes per read), so a command
that prints gigabytes costs no memory. The shell's command line comes from
`LocalEnvironment.open_shell` (confine.py): it joins the trial's cgroups, so its
processes count against the trial's memory and process limits, and the environment
ends it before every verification.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hrbench.envs.launch_env import LAUNCH_ENV
from hrbench.harness.truncation import HeadTail

MAX_WAIT_S = 60.0
OUTPUT_LIMIT = 10_000
INTERRUPT_KEYS = {"C-c", "^C", "\x03"}


@dataclass
class ShellOutput:
    """What one read returns: raw head/tail bytes, the total byte count, and liveness facts."""

    head: bytes
    tail: bytes
    total: int
    alive: bool

    @property
    def data(self) -> bytes:
        """All bytes when total <= the read limit, otherwise head + tail (the middle is gone)."""
        return self.head + self.tail


def _children(pid: int) -> list[int]:
    """Direct children of a process, read from /proc."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    out, frontier = [], [pid]
    while frontier:
        nxt = []
        for p in frontier:
            kids = _children(p)
            out += kids
            nxt += kids
        frontier = nxt
    return out


class PersistentShell:
    """One long-lived sandboxed bash for one trial (see module docstring)."""

    def __init__(self, argv: list[str], read_limit: int = OUTPUT_LIMIT, pass_fds: tuple[int, ...] = ()):
        self.closed = False  # set by close(): the environment ended this shell (e.g. to verify)
        self.read_limit = read_limit
        self._nonce = secrets.token_hex(8)
        self._sentinel_re = re.compile(rb"__HRB_" + self._nonce.encode() + rb"_(\d+)__\n")
        self._sent = 0
        self._done = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buf = HeadTail(read_limit // 2)
        self._carry = b""
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, bufsize=0, env=LAUNCH_ENV, cwd="/", pass_fds=pass_fds,
        )
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name="hrbench-shell-reader")
        self._reader.start()

    # -- reading ----------------------------------------------------------------------------

    def _read_loop(self) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self._cond:
                if not chunk:
                    self._cond.notify_all()
                    return
                data = self._carry + chunk
                for m in self._sentinel_re.finditer(data):
                    self._done = max(self._done, int(m.group(1)))
                cleaned = self._sentinel_re.sub(b"", data)
                # a sentinel may straddle two chunks: hold back a trailing partial one
                idx = cleaned.rfind(b"__HRB_", max(0, len(cleaned) - 48))
                if idx != -1 and b"\n" not in cleaned[idx:]:
                    self._carry, cleaned = cleaned[idx:], cleaned[:idx]
                else:
                    self._carry = b""
                self._buf.add(cleaned)
                self._cond.notify_all()

    def read(self) -> ShellOutput:
        """Everything produced since the previous read (head/tail kept), then reset."""
        with self._cond:
            if self._carry and not self.alive:
                self._buf.add(self._carry)
                self._carry = b""
            out = ShellOutput(bytes(self._buf.head), bytes(self._buf.tail), self._buf.total, self.alive)
            self._buf = HeadTail(self.read_limit // 2)
            return out

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- writing ----------------------------------------------------------------------------

    def send(self, keystrokes: str, wait_s: float) -> bool:
        """Type keystrokes, then wait up to `wait_s` (<= 60 s) for bash to finish them.

        Returns True when bash finished everything typed so far, False when something
        is still running (its output will be read in a later turn)."""
        wait_s = max(0.0, min(float(wait_s), MAX_WAIT_S))
        if keystrokes.strip() in INTERRUPT_KEYS:
            self.interrupt()
            keystrokes = ""
        if not self.alive:
            return True
        self._sent += 1
        n = self._sent
        text = keystrokes if (not keystrokes or keystrokes.endswith("\n")) else keystrokes + "\n"
        # a leading newline ends an unfinished line; `echo` with quotes the agent cannot easily fake
        text += f"\necho '__HRB_{self._nonce}_{n}__'\n"
        try:
            self.proc.stdin.write(text.encode("utf-8", errors="surrogateescape"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return True
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self._done < n and self.alive:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
            return self._done >= n or not self.alive

    def interrupt(self) -> None:
        """Kill every process the shell started (the shell itself survives)."""
        bash = self._bash_pid()
        if bash is None:
            return
        for pid in reversed(_descendants(bash)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _bash_pid(self) -> int | None:
        """The sandboxed bash: the first process below the bwrap wrapper(s) whose comm is bash."""
        frontier = [self.proc.pid]
        for _ in range(6):
            nxt = []
            for pid in frontier:
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                if comm == "bash":
                    return pid
                nxt += _children(pid)
            frontier = nxt
        return None

    def close(self) -> None:
        """Kill the whole sandbox (its pid namespace dies with bwrap); safe to call twice."""
        self.closed = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.alive:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(timeout=2)
        try:
            self.proc.stdout.close()
        except OSError:
            pass
