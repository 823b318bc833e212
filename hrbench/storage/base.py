"""The storage interface: named byte objects under one root, a local directory or an S3 prefix.

Keys are POSIX relative paths (`tables/checkpoint_trials/a/t.parquet`). Every implementation
makes `put` atomic: a reader sees the old object, the whole new one, or none, never part of one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path


class StorageError(RuntimeError):
    """The store could not be read or written (after retries); the message says which store, which
    object and what to do."""


class Store(ABC):
    """Byte objects addressed by relative keys."""

    #: Where the store is, for messages and metadata (a directory or `s3://bucket/prefix`).
    location: str

    @abstractmethod
    def put(self, key: str, data: bytes) -> str:
        """Store `data` at `key` atomically; return its address (path or URI)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The object at `key`; FileNotFoundError if there is none."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Every key under `prefix` (a folder: `tables/x` lists `tables/x/...`), sorted."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove `key` (no error if it is absent)."""

    def local_path(self, key: str) -> Path | None:
        """The file behind `key` when the store is a local directory (then the working copy is the store)."""
        return None

    def address(self, key: str) -> str:
        return f"{self.location.rstrip('/')}/{key}"


def check_key(key: str) -> str:
    """A key as the stores accept it: relative, no `..`, no empty parts (a wrong key names itself)."""
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad store key {key!r}: use a relative POSIX path without '.', '..' or empty parts")
    return key
