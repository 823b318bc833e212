"""Cached environment states are the harness's: sealed with a content hash when built, checked at every reuse.

A state (a checkpoint state `after-N`, an agent's saved workspace) is a directory tree in the
backend's cache. `seal` records the sha256 of its content beside it (`<state>.sha256`); `check`
re-hashes it and says what differs. The local backend checks a state every time it starts a trial
from one (a mismatch rebuilds a checkpoint state and is logged; `SealChecks` re-reads the bytes only
when an entry's inode, size, times or metadata changed since they last matched), and `hrbench verify`
checks every state in an output directory's cache, naming each one that no longer matches.

The hash covers every entry's relative path, type, permission bits, owner, and its bytes (files)
or target (symlinks); modification times are left out (a copy keeps them, a rebuild does not).
Nothing is followed: a symlink is hashed as its target text.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

RECORD_SUFFIX = ".sha256"
_PAGE = 4096


def tree_sha256(root: Path) -> str:
    """The content hash of the tree at `root` (see the module's docstring for what it covers)."""
    digest = hashlib.sha256()

    def entry(path: str) -> None:
        info = os.lstat(path)
        digest.update(f"{os.path.relpath(path, root)}\0{stat.S_IFMT(info.st_mode):o}\0{stat.S_IMODE(info.st_mode):o}"
                      f"\0{info.st_uid}:{info.st_gid}\0".encode("utf-8", "surrogateescape"))
        if stat.S_ISLNK(info.st_mode):
            digest.update(os.fsencode(os.readlink(path)))
        elif stat.S_ISREG(info.st_mode):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                while block := os.read(fd, 1 << 20):
                    digest.update(block)
            finally:
                os.close(fd)
        digest.update(b"\n")

    entry(str(root))
    for folder, dirs, files in os.walk(root):  # never into a symlinked directory
        dirs.sort()
        for name in sorted(files + dirs):
            entry(os.path.join(folder, name))
    return digest.hexdigest()


_RACY_S = 0.1  # longer than a timestamp tick: an entry changed after the metadata was read gets a newer ctime


def tree_metadata(root: Path) -> tuple[str, int, float]:
    """(a digest of every entry's path, inode, type, mode, owner, size, mtime and ctime, and of its
    seal record's; what a copy of the tree takes on a tmpfs (its regular files' bytes in whole pages); the newest ctime), read
    with lstat only. Writing, truncating, replacing or re-moding any entry changes its ctime, which
    only the clock can set: a tree whose metadata digest is unchanged has unchanged bytes."""
    digest = hashlib.sha256()
    total, newest = 0, 0.0

    def entry(path: str, rel: str) -> None:
        nonlocal total, newest
        info = os.lstat(path)
        digest.update(f"{rel}\0{info.st_ino}\0{info.st_mode:o}\0{info.st_uid}:{info.st_gid}\0{info.st_size}\0"
                      f"{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode("utf-8", "surrogateescape"))
        newest = max(newest, info.st_ctime)
        if stat.S_ISREG(info.st_mode) and rel != RECORD_SUFFIX:
            total += -(-info.st_size // _PAGE) * _PAGE

    try:
        entry(str(record_path(root)), RECORD_SUFFIX)
    except FileNotFoundError:
        digest.update(b"no record\n")
    entry(str(root), ".")
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files + dirs):
            path = os.path.join(folder, name)
            entry(path, os.path.relpath(path, root))
    return digest.hexdigest(), total, newest


class SealChecks:
    """`check` for states used again and again by one process: the bytes are re-hashed only when the
    tree's metadata (`tree_metadata`) differs from when they last matched the seal, or changed too
    recently to be told apart. Every call still looks at every entry's metadata."""

    def __init__(self) -> None:
        self._matched: dict[Path, str] = {}
        self._lock = threading.Lock()

    def check(self, state: Path) -> tuple[str | None, int]:
        """(what is wrong, None when `state` matches its seal; what a copy of it takes on a tmpfs)."""
        started = time.time()
        key, size, newest = tree_metadata(state)
        with self._lock:
            if self._matched.get(state) == key:
                return None, size
        problem = check(state)
        if problem is None:
            self._note_match(state, key, newest, started)
        return problem, size

    def sealed(self, state: Path, started: float) -> int:
        """Note a state this process hashed and sealed from `started` on (it matches by construction: no
        second hash); what a copy of it takes on a tmpfs."""
        key, size, newest = tree_metadata(state)
        self._note_match(state, key, newest, started)
        return size

    def _note_match(self, state: Path, key: str, newest: float, started: float) -> None:
        if newest < started - _RACY_S:
            with self._lock:
                self._matched[state] = key


def record_path(state: Path) -> Path:
    return state.with_name(state.name + RECORD_SUFFIX)


def seal(state: Path, sha256: str | None = None) -> str:
    """Record the content hash of `state` beside it (atomically); returns it."""
    sha256 = sha256 or tree_sha256(state)
    record = record_path(state)
    partial = record.with_name(f".{record.name}.{os.getpid()}")
    partial.write_text(sha256 + "\n")
    os.replace(partial, record)
    return sha256


def check(state: Path) -> str | None:
    """None when `state` hashes to its record, else what is wrong (no record, or both hashes)."""
    try:
        recorded = record_path(state).read_text().strip()
    except FileNotFoundError:
        return f"no content hash recorded ({record_path(state).name} is missing)"
    actual = tree_sha256(state)
    if actual != recorded:
        return f"content sha256 {actual[:12]} differs from the {recorded[:12]} recorded when it was built"
    return None


def cached_states(cache_dir: Path) -> Iterator[Path]:
    """Every state directory in a local backend's cache (checkpoint states and saved agent states)."""
    for kind, depth in (("states", 3), ("agent-states", None)):
        base = cache_dir / kind
        if not base.is_dir():
            continue
        if depth is not None:  # states/<task>/<content hash>/after-N
            yield from sorted(p for p in base.glob("*/*/after-*") if p.is_dir() and not p.is_symlink()
                              and ".building-" not in p.name)
        else:  # agent-states/<name>, where a name may hold slashes: the folders with a record beside them
            yield from sorted(record.with_name(record.name.removesuffix(RECORD_SUFFIX))
                              for record in base.rglob(f"*{RECORD_SUFFIX}"))
