"""Dagster resources wrapping the core: the study being run, and the table store."""

from __future__ import annotations

import functools

import pandas as pd
from dagster import ConfigurableIOManager, ConfigurableResource, InputContext, MultiPartitionKey, OutputContext

from hrbench.storage import LocalTableStore, TableStore
from hrbench.study_run import StudyRun


class StudyResource(ConfigurableResource):
    """The pre-registered study file and the directory its run writes to."""

    study_path: str
    out_dir: str
    progress: bool = True

    def run(self) -> StudyRun:
        return _study_run(self.study_path, self.out_dir, self.progress)


@functools.cache
def _study_run(study_path: str, out_dir: str, progress: bool) -> StudyRun:
    # One StudyRun per process: tasks, hashes and snapshots are computed once.
    return StudyRun.from_file(study_path, out_dir, progress)


def _partition(context: InputContext | OutputContext, key: str | None) -> tuple[str, ...]:
    if key is None:
        return ()
    if isinstance(key, MultiPartitionKey):
        return tuple(key.keys_by_dimension[d] for d in sorted(key.keys_by_dimension))
    # A multi-partition key as a plain string joins the dimensions (sorted by name) with "|".
    return tuple(key.split("|"))


def _table(context: InputContext | OutputContext) -> str:
    # A condition's assets (`context_reset/natural_trials`) are tables under their condition.
    return "/".join(context.asset_key.path)


class TableIOManager(ConfigurableIOManager):
    """Parquet tables through a pluggable `TableStore` (a local directory by default)."""

    root: str

    def store(self) -> TableStore:
        return LocalTableStore(self.root)

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        key = context.partition_key if context.has_asset_partitions else None
        address = self.store().write(_table(context), _partition(context, key), obj)
        context.add_output_metadata({"path": address, "rows": len(obj)})

    def load_input(self, context: InputContext) -> pd.DataFrame:
        asset = _table(context)
        if not context.has_asset_partitions:
            return self.store().read(asset, ())
        keys = context.asset_partition_keys
        frames = [self.store().read(asset, _partition(context, k)) for k in keys
                  if self.store().exists(asset, _partition(context, k))]
        if not frames:
            raise FileNotFoundError(f"no materialized partitions of {asset} among {list(keys)[:5]}…")
        return pd.concat(frames, ignore_index=True)
