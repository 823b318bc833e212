"""Dagster resources wrapping the core: the study being run, and the table store."""

from __future__ import annotations

import threading
from typing import Optional
from pathlib import Path

import pandas as pd
from dagster import ConfigurableIOManager, ConfigurableResource, InputContext, MultiPartitionKey, OutputContext

from hrbench.catalogue import table_key
from hrbench.lineage import inputs_digest, read_record, write_record
from hrbench.preregistration import code_version
from hrbench.protocol import load_study, sha256_json
from hrbench.design import StudyDesign
from hrbench.storage import TableStore
from hrbench.study_run import StudyRun
from resources.storage import StorageResource, storage_from_env


class StudyResource(ConfigurableResource):
    """The pre-registered study file and the directory its run writes to."""

    study_path: str
    out_dir: str
    progress: bool = True
    storage: Optional[StorageResource] = None  # None: as the environment configures it (storage_from_env)

    def run(self) -> StudyRun:
        """The study as its file says now (a sensor may have added an agent since the code loaded)."""
        loaded = load_study(self.study_path)
        store = (self.storage or storage_from_env()).open(self.out_dir)
        key = (self.study_path, self.out_dir, self.progress, store.location,
               sha256_json(loaded.study.model_dump(mode="json")))
        with _LOCK:
            if key not in _RUNS:  # one StudyRun per study content: tasks, hashes and snapshots computed once
                _RUNS[key] = StudyRun(StudyDesign(loaded), self.out_dir, self.progress, store=store)
            return _RUNS[key]


_RUNS: dict[tuple, StudyRun] = {}
_LOCK = threading.Lock()
# Tables read by each step of a run, so the tables it writes record their inputs: (run id, op) -> asset -> digest.
_READ: dict[tuple[str, str], dict[str, str]] = {}


def _partition(key: str | None) -> tuple[str, ...]:
    if key is None:
        return ()
    if isinstance(key, MultiPartitionKey):
        return tuple(key.keys_by_dimension[d] for d in sorted(key.keys_by_dimension))
    # A multi-partition key as a plain string joins the dimensions (sorted by name) with "|".
    return tuple(key.split("|"))


def _table(context: InputContext | OutputContext) -> str:
    # A study's asset (`demo/context_reset/natural_trials`) is its table without the study's namespace (one store
    # per study); a condition's assets are tables under their condition.
    return table_key(context.asset_key.path)


class TableIOManager(ConfigurableIOManager):
    """Parquet tables in the configured store (`storage`: the output directory by default), each with a
    lineage record beside it.

    A run over many partitions (a single-run backfill) hands over a dict partition key -> table.
    """

    root: str
    storage: Optional[StorageResource] = None  # None: as the environment configures it (storage_from_env)

    def store(self) -> TableStore:
        return TableStore((self.storage or storage_from_env()).open(self.root))

    def handle_output(self, context: OutputContext, obj: pd.DataFrame | dict[str, pd.DataFrame]) -> None:
        asset = _table(context)
        if isinstance(obj, dict):
            tables = {_partition(k): frame for k, frame in obj.items()}
        else:
            tables = {_partition(context.partition_key if context.has_asset_partitions else None): obj}
        inputs = _READ.pop((context.run_id, context.op_def.name), {})
        records, store = [], self.store()
        for partition, frame in sorted(tables.items()):
            address, sha256 = store.write_bytes(asset, partition, frame)
            records.append(write_record(store.store, asset, partition, sha256, frame, context.run_id,
                                        code_version().label, inputs))
        paths = [r.path for r in records]
        context.add_output_metadata({
            "path": paths[0] if len(paths) == 1 else f"{Path(paths[0]).parent}/ ({len(paths)} tables)",
            "rows": sum(r.rows for r in records),
            "sha256": records[0].sha256 if len(records) == 1 else inputs_digest(records),
            "run_id": context.run_id,
            **{f"input/{name}": digest for name, digest in sorted(inputs.items())},
        })

    def load_input(self, context: InputContext) -> pd.DataFrame:
        asset = _table(context)
        store = self.store()
        keys = [_partition(k) for k in context.asset_partition_keys] if context.has_asset_partitions else [()]
        present = [k for k in keys if store.exists(asset, k)]
        if not present:
            raise FileNotFoundError(f"no materialized partitions of {asset} among {[ '/'.join(k) for k in keys][:5]}; "
                                    "materialize them first")
        records = [r for r in (read_record(store.store, asset, k) for k in present) if r is not None]
        _READ.setdefault((context.step_context.run_id, context.op_def.name), {})[asset] = inputs_digest(records)
        return pd.concat([store.read(asset, k) for k in present], ignore_index=True)
