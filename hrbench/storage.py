"""Where tables live: one interface, a local-directory implementation (S3 slots in beside it)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path

import pandas as pd


class TableStore(ABC):
    """Parquet tables addressed by asset name and partition keys."""

    @abstractmethod
    def write(self, asset: str, partition: tuple[str, ...], table: pd.DataFrame) -> str:
        """Store a table; return its address (path or URI) for metadata."""

    @abstractmethod
    def read(self, asset: str, partition: tuple[str, ...]) -> pd.DataFrame: ...

    @abstractmethod
    def exists(self, asset: str, partition: tuple[str, ...]) -> bool: ...


class LocalTableStore(TableStore):
    """`root/tables/<asset>.parquet`, or `root/tables/<asset>/<key>/.../<last>.parquet` when partitioned."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, asset: str, partition: tuple[str, ...]) -> Path:
        base = self.root / "tables"
        if not partition:
            return base / f"{asset}.parquet"
        return base.joinpath(asset, *partition[:-1], f"{partition[-1]}.parquet")

    def write(self, asset: str, partition: tuple[str, ...], table: pd.DataFrame) -> str:
        target = self.path(asset, partition)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_suffix(f".tmp-{os.getpid()}")
        table.to_parquet(scratch, index=False)
        os.replace(scratch, target)  # readers never see a half-written table
        return str(target)

    def read(self, asset: str, partition: tuple[str, ...]) -> pd.DataFrame:
        target = self.path(asset, partition)
        if not target.is_file():
            raise FileNotFoundError(f"no table {asset} {'/'.join(partition) or ''} at {target}; materialize it first")
        return pd.read_parquet(target)

    def exists(self, asset: str, partition: tuple[str, ...]) -> bool:
        return self.path(asset, partition).is_file()
