"""One run per output directory: an advisory `fcntl` lock on `OUT/.hrbench.lock`.

Two runs on one output directory would run the same trials twice and interleave their journals.
The lock file holds who owns it (pid, host, command, start time) so a refused run can say so. The
kernel drops an `flock` when its holder dies, however it dies, so a lock left by a killed run is
free: the next run takes it over (and says whose it was). The file itself is never deleted, only
emptied on release: deleting it would let two runs lock two different files of the same name.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import socket
import sys
import time
from pathlib import Path

from pydantic import BaseModel

LOCK_NAME = ".hrbench.lock"


class OutDirBusy(RuntimeError):
    """Another live run holds the output directory; the message names it."""


class LockHolder(BaseModel):
    """Who holds (or last held) an output directory."""

    pid: int
    host: str
    command: str
    started_at: str  # ISO 8601, UTC

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started_at}: {self.command}"


class OutDirLock:
    """Exclusive lock on one output directory for the lifetime of a run.

    Use as a context manager (`with OutDirLock(out) as lock:`) or call `acquire()` / `release()`;
    `took_over` is the holder of a stale lock this one replaced (None if the lock was clean)."""

    def __init__(self, out_dir: str | Path, command: str | None = None):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_NAME
        self.command = command if command is not None else shlex.join(sys.argv)
        self.took_over: LockHolder | None = None
        self._fd: int | None = None

    def acquire(self) -> OutDirLock:
        """Take the lock, or raise OutDirBusy naming its holder (or what is in the way of OUT)."""
        if self._fd is not None:
            return self
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise OutDirBusy(f"{self.out_dir}: cannot be an output directory: a file is in the way "
                             f"({exc.filename})") from exc
        if self.path.is_dir():
            raise OutDirBusy(f"{self.path}: the lock file is a directory; remove it and run again")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            who = holder.describe() if holder else "a run that has not written its details yet"
            if holder and holder.host == socket.gethostname() and not _alive(holder.pid):
                who += "; that pid is gone, but a process it started still holds the lock"
            raise OutDirBusy(f"{self.out_dir} is in use by another hrbench run ({who}); wait for it to finish, "
                             "or use another --out directory") from None
        self.took_over = _read_holder(fd)  # a holder recorded but not holding: it died without releasing
        me = LockHolder(pid=os.getpid(), host=socket.gethostname(), command=self.command,
                        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        os.ftruncate(fd, 0)
        os.pwrite(fd, (me.model_dump_json() + "\n").encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the lock file and drop the lock (the kernel drops it anyway if the process dies)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def holder(self) -> LockHolder | None:
        """The recorded holder (ourselves while we hold it), or None when the file is empty or absent."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return _read_holder(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> OutDirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> LockHolder | None:
    try:
        data = os.pread(fd, 4096, 0)
        return LockHolder.model_validate_json(data) if data.strip() else None
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
