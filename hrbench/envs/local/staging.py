"""Read-only copies of a task's files for the sandbox to bind, made once per content and process.

A stage's verifier tests (with the check library) and its reference solution are the same for every
trial of the stage, so they are copied once into a folder of the harness's and bound read-only by every
sandbox that needs them, instead of being copied and removed around each sandbox (a copy per sandbox was
most of the file work of a stage-trial, docs/performance.md). The folders are the harness's (root-owned,
no group or other write bit, in the 0711 sandbox area): no sandbox uid can change them, and the sandboxes
bind them read-only. A source changed on disk (any entry's path, type or mode, a file's bytes, a link's
target) is a new key and is staged again. The folders are removed when the process exits, and
by `confine.sweep_stale` when it died without doing so.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hrbench.envs.local.confine import area_tempdir

STAGED_PREFIX = "staged"  # the per-process folder in the sandbox area (swept when its process is dead)
MAX_STAGED = 512  # folders kept per process; past it, a folder is staged for one sandbox and removed after


def fingerprint(*sources: Path, text: str = "") -> str:
    """A key for what is under `sources` now and `text`: every entry's path, type and mode, a file's bytes,
    a link's target. (Bytes, not mtimes: a file rewritten within one timer tick keeps its mtime.)"""
    digest = hashlib.sha256(text.encode("utf-8", errors="surrogateescape"))
    for source in sources:
        digest.update(b"\0source\0" + os.fsencode(source))
        for rel, info, content in _entries(source, ""):
            digest.update(f"\0{rel}\0{info.st_mode}\0{len(content)}\0".encode("utf-8", errors="surrogateescape"))
            digest.update(content)
    return digest.hexdigest()


def _entries(path: Path | str, rel: str) -> Iterator[tuple[str, os.stat_result, bytes]]:
    """(relative path, lstat, the file's bytes or the link's target) of `path` and everything under it."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        yield rel, info, os.fsencode(os.readlink(path))
    elif stat.S_ISREG(info.st_mode):
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
            yield rel, info, file.read()
    else:
        yield rel, info, b""
    if stat.S_ISDIR(info.st_mode):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            yield from _entries(entry.path, f"{rel}/{entry.name}")


def harden(folder: Path) -> None:
    """No group or other write bit on anything staged (symlinks untouched): only root may change it."""
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files, None]:
            path = root if name is None else os.path.join(root, name)
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o022:
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o022)


_root_lock = threading.Lock()
_roots: dict[int, Path] = {}  # pid -> its staging folder (a forked child makes its own)


def _process_root() -> Path:
    """This process's staging folder in the sandbox area (`staged-<pid>-*`), made on first use."""
    with _root_lock:
        root = _roots.get(os.getpid())
        if root is None:
            root = _roots[os.getpid()] = area_tempdir(STAGED_PREFIX)
            atexit.register(_remove, root, os.getpid())
        return root


class StagedFolders:
    """Staged folders of one kind ("tests", "solution"), by key, for this process."""

    def __init__(self, kind: str):
        self.kind = kind
        self._lock = threading.Lock()
        self._owner = 0  # the pid whose folders these are (a forked child stages its own)
        self._folders: dict[str, Path] = {}

    @contextmanager
    def staged(self, key: str, build: Callable[[Path], None]) -> Iterator[Path]:
        """The folder for `key`: built by `build(folder)` (which creates `folder`) the first time, then
        reused; hardened either way. Past MAX_STAGED folders it is built for this use alone."""
        with self._lock:
            if self._owner != os.getpid():
                self._owner, self._folders = os.getpid(), {}
            folder = self._folders.get(key)
            if folder is not None and not folder.is_dir():  # removed from outside: staged again
                del self._folders[key]
                folder = None
            if folder is None and len(self._folders) < MAX_STAGED:
                folder = _process_root() / f"{self.kind}-{key}"
                building = folder.with_name(folder.name + ".building")
                try:
                    build(building)
                    harden(building)
                    os.rename(building, folder)
                except BaseException:
                    shutil.rmtree(building, ignore_errors=True)
                    raise
                self._folders[key] = folder
        if folder is not None:
            yield folder
            return
        once = area_tempdir(self.kind)
        try:
            build(once / self.kind)
            harden(once / self.kind)
            yield once / self.kind
        finally:
            shutil.rmtree(once, ignore_errors=True)


def _remove(root: Path, owner: int) -> None:
    if os.getpid() == owner:  # not a forked child's exit: the folders are its parent's
        shutil.rmtree(root, ignore_errors=True)
