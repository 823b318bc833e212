"""Fault injection for the tests of issue 21: SIGKILL verifier processes (`/tests/test.sh`) of a run."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path


def slow_verifier_registry(source: Path, dest: Path, seconds: float = 0.3) -> Path:
    """A copy of the task registry `source` at `dest` whose verifiers sleep `seconds` first: the fixtures'
    verifiers last a few ms, less than a scan of /proc on a loaded machine, so an injector could miss them all."""
    shutil.copytree(source, dest)
    for script in dest.glob("*/steps/*/tests/test.sh"):
        shebang, rest = script.read_text().split("\n", 1)
        script.write_text(f"{shebang}\nsleep {seconds}\n{rest}")
    return dest


def parent_of(pid: int) -> int:
    """The parent pid, from /proc (OSError when the process is gone)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def is_verifier(pid: int) -> bool:
    """The bash running a verifier's /tests/test.sh (OSError when the process is gone)."""
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return b"/tests/test.sh" in cmdline and cmdline[0].endswith(b"bash")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = parent_of(int(entry))
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class FaultInjector(threading.Thread):
    """SIGKILLs a random running verifier (`/tests/test.sh`) of the run now and then, `limit` times at most:
    after a pause drawn from `pause` (seconds), with probability `chance`, once the run's pre-registration
    is written (the verifier audit before it checks the tasks; it is no trial)."""

    def __init__(self, run: subprocess.Popen, out: Path, limit: int, seed: int = 7,
                 pause: tuple[float, float] = (0.2, 1.0), chance: float = 0.5):
        super().__init__(daemon=True)
        self.run_process, self.out, self.limit, self.pause, self.chance = run, out, limit, pause, chance
        self.rng, self.killed, self.stop = random.Random(seed), 0, threading.Event()

    def verifiers(self) -> list[int]:
        """The run's verifier processes, not their subshells: bash forks a copy of itself (same command line)
        for every command substitution, and killing one of those fails a single check (`$(...)` exits 137,
        which the check library reads as its own timeout) instead of the verifier, a different fault."""
        found = []
        for pid in _descendants(self.run_process.pid):
            try:
                if is_verifier(pid):
                    found.append(pid)
            except OSError:
                continue
        tops = []
        for pid in found:
            try:
                if parent_of(pid) not in found:
                    tops.append(pid)
            except (OSError, IndexError, ValueError):
                continue
        return tops

    def run(self) -> None:
        while not self.stop.is_set() and self.killed < self.limit and self.run_process.poll() is None:
            if (self.out / "preregistration.json").is_file() and self.rng.random() < self.chance:
                targets = self.verifiers()
                if targets:
                    try:
                        os.kill(self.rng.choice(targets), signal.SIGKILL)
                        self.killed += 1
                    except ProcessLookupError:
                        pass
            time.sleep(self.rng.uniform(*self.pause))


class FirstCallKiller(threading.Thread):
    """SIGKILLs the first verifier (`/tests/test.sh`) this process starts during the first call of a wrapped
    function per key (e.g. `hrbench.runner.run_checkpoint_trial` per trial key: the call still runs the real
    trial; only its verifier dies); with `every`, every verifier of that first call."""

    def __init__(self, every: bool = False):
        super().__init__(daemon=True)
        self.stop, self.killed, self.every = threading.Event(), 0, every
        self.calls: dict[str, int] = {}
        self.first_results: dict[str, object] = {}  # what each key's first call returned
        self.armed = False  # a first call is running and has not lost a verifier yet

    def wrap(self, real, key):
        def first_calls_lose_their_verifier(first, *args, **kwargs):
            self.calls[key(first)] = self.calls.get(key(first), 0) + 1
            self.armed = self.calls[key(first)] == 1
            try:
                result = real(first, *args, **kwargs)
                self.first_results.setdefault(key(first), result)
                return result
            finally:
                self.armed = False
        return first_calls_lose_their_verifier

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            for entry in os.listdir("/proc") if self.armed else []:
                try:
                    if not entry.isdigit() or not is_verifier(int(entry)):
                        continue
                    if not _descends_from(int(entry), me) or not self.armed:
                        continue
                    os.kill(int(entry), signal.SIGKILL)
                except (OSError, ValueError):
                    continue
                self.armed = self.every
                self.killed += 1
            time.sleep(0.002)


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        pid = parent_of(pid)
    return False
