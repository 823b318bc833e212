"""The embedded default: a directory on local disk (the study's output directory)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from hrbench.storage.base import Store, check_key


class LocalStore(Store):
    """Objects are files under `root`; a write goes to a scratch file renamed into place."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.location = str(self.root)

    def local_path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> str:
        target = self.local_path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            scratch.write_bytes(data)
            os.replace(scratch, target)  # readers never see a half-written object
        except BaseException:
            scratch.unlink(missing_ok=True)
            raise
        return str(target)

    def get(self, key: str) -> bytes:
        path = self.local_path(key)
        if not path.is_file():
            raise FileNotFoundError(f"no object {key} in {self.location}")
        return path.read_bytes()

    def exists(self, key: str) -> bool:
        return self.local_path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix.strip("/") if prefix.strip("/") else self.root
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*")
                      if p.is_file() and not p.name.startswith(".") and ".tmp-" not in p.name)

    def delete(self, key: str) -> None:
        self.local_path(key).unlink(missing_ok=True)

    def address(self, key: str) -> str:
        return str(self.local_path(key))
