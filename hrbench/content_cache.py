"""A cache of results keyed by the SHA-256 of everything they depend on, kept across runs.

Work that a study repeats on every run although nothing it depends on changed (the verifier audit of
each task, depth measurements) is stored here once. The key is a hash of every input, so a changed
task, check library, sandbox or code is a different key and recomputes; nothing is ever invalidated
in place. Entries are small JSON files written to a scratch file and renamed, so concurrent runs
(threads or processes) never read half an entry.

    HRBENCH_CACHE_DIR   where entries live (default: $XDG_CACHE_HOME/hrbench, else ~/.cache/hrbench);
                        `off` turns the cache off (every run recomputes)
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from hrbench.protocol import sha256_json

CACHE_ENV = "HRBENCH_CACHE_DIR"


def cache_root() -> Path | None:
    """The cache directory as the environment sets it; None when the cache is off."""
    configured = os.environ.get(CACHE_ENV)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hrbench"


def cache_key(inputs: dict) -> str:
    """The key of a result: SHA-256 of the canonical JSON of every input it depends on."""
    return sha256_json(inputs)


class ContentCache:
    """Entries of one kind (`audit`, `depth`) under the cache root: `get(key)` / `put(key, value)`."""

    def __init__(self, kind: str, root: Path | None = None):
        self.kind = kind
        self.root = root if root is not None else cache_root()

    def _path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / self.kind / f"{key}.json"

    def get(self, key: str) -> object | None:
        """The stored value, or None (absent, cache off, or unreadable: an unreadable entry is a miss)."""
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return entry.get("value") if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: str, value: object) -> None:
        """Store a JSON-able value; a cache that cannot be written is skipped (it only saves time)."""
        path = self._path(key)
        if path is None:
            return
        scratch = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch.write_text(json.dumps({"key": key, "value": value}))
            os.replace(scratch, path)
        except OSError:
            scratch.unlink(missing_ok=True)
