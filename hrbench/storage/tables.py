"""Parquet tables (via pyarrow, on in-memory buffers) in a `Store`."""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd

from hrbench.storage.base import Store
from hrbench.storage.local import LocalStore


# Decoded tables by the SHA-256 of their bytes. The steps of one Dagster run read the same partitions
# many times (every analysis asset of an agent reads its checkpoint trials), and decoding a small
# parquet file costs ~100 times reading its bytes. Keyed by content, so a rewritten table is never
# served stale; bounded by the memory the decoded tables take.
_DECODED: OrderedDict[bytes, tuple[int, pd.DataFrame]] = OrderedDict()  # digest -> (memory, table)
_DECODED_MAX_BYTES = 256 * 2**20
_DECODED_LOCK = threading.Lock()
_decoded_bytes = 0


def _isolated(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy that shares nothing mutable with `frame`: DataFrame.copy leaves the arrays a parquet list
    column decodes to (one per cell) shared."""
    out = frame.copy()
    for column in out.columns[out.dtypes == object]:
        values = out[column].tolist()
        if any(isinstance(v, np.ndarray) for v in values):
            out[column] = pd.Series([v.copy() if isinstance(v, np.ndarray) else v for v in values],
                                    index=out.index, dtype=object)
    return out


def decode_table(data: bytes) -> pd.DataFrame:
    """The table stored as parquet `data` (a fresh copy: callers may modify it)."""
    global _decoded_bytes
    digest = hashlib.sha256(data).digest()
    with _DECODED_LOCK:
        hit = _DECODED.get(digest)
        if hit is not None:
            _DECODED.move_to_end(digest)
    if hit is not None:
        return _isolated(hit[1])
    frame = pd.read_parquet(io.BytesIO(data), engine="pyarrow")
    size = int(frame.memory_usage(deep=True).sum())
    if size <= _DECODED_MAX_BYTES // 8:
        cached = _isolated(frame)
        with _DECODED_LOCK:
            if digest not in _DECODED:
                _DECODED[digest] = (size, cached)
                _decoded_bytes += size
            while _decoded_bytes > _DECODED_MAX_BYTES:
                _decoded_bytes -= _DECODED.popitem(last=False)[1][0]
    return frame


class TableStore:
    """`tables/<asset>.parquet`, or `tables/<asset>/<key>/.../<last>.parquet` when partitioned."""

    def __init__(self, store: Store):
        self.store = store

    @staticmethod
    def key(asset: str, partition: tuple[str, ...]) -> str:
        if not partition:
            return f"tables/{asset}.parquet"
        return "/".join(("tables", asset, *partition[:-1], f"{partition[-1]}.parquet"))

    def write(self, asset: str, partition: tuple[str, ...], table: pd.DataFrame) -> str:
        """Store a table; return its address (path or URI) for metadata."""
        return self.write_bytes(asset, partition, table)[0]

    def write_bytes(self, asset: str, partition: tuple[str, ...], table: pd.DataFrame) -> tuple[str, str]:
        """Store a table; return its address and the sha256 of the bytes stored (for its lineage record)."""
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False, engine="pyarrow")
        data = buffer.getvalue()
        return self.store.put(self.key(asset, partition), data), hashlib.sha256(data).hexdigest()

    def read(self, asset: str, partition: tuple[str, ...]) -> pd.DataFrame:
        key = self.key(asset, partition)
        try:
            data = self.store.get(key)
        except FileNotFoundError:
            raise FileNotFoundError(f"no table {asset} {'/'.join(partition)} at {self.store.address(key)}; "
                                    "materialize it first") from None
        return decode_table(data)

    def exists(self, asset: str, partition: tuple[str, ...]) -> bool:
        return self.store.exists(self.key(asset, partition))

    def partitions(self, asset: str) -> list[tuple[str, ...]]:
        """Every stored partition of `asset` (`()` for an unpartitioned table), sorted."""
        found = [() for _ in [0] if self.store.exists(self.key(asset, ()))]
        prefix = f"tables/{asset}/"
        for key in self.store.list(prefix):
            if key.endswith(".parquet"):
                found.append(tuple(key[len(prefix):].removesuffix(".parquet").split("/")))
        return found

    def read_all(self, asset: str) -> pd.DataFrame:
        """Every stored partition of a table, concatenated (empty if none is stored)."""
        frames = [self.read(asset, p) for p in self.partitions(asset)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class LocalTableStore(TableStore):
    """Tables under a local directory (`root/tables/...`)."""

    def __init__(self, root: str | Path):
        super().__init__(LocalStore(root))
        self.root = Path(root)

    def path(self, asset: str, partition: tuple[str, ...]) -> Path:
        return self.store.local_path(self.key(asset, partition))
