"""Where a study's output lives: one `Store` interface (named byte objects, atomic writes) with a
local-directory and an S3-compatible implementation, and parquet tables on top of it.

`hrbench/stores.py` maps a study's output (tables, journals, trajectories, reports) onto a store;
docs/storage.md describes the layout and the crash semantics.
"""

from hrbench.storage.base import StorageError, Store
from hrbench.storage.config import StoreConfig, store_for
from hrbench.storage.local import LocalStore
from hrbench.storage.s3 import S3Store
from hrbench.storage.tables import LocalTableStore, TableStore

__all__ = ["LocalStore", "LocalTableStore", "S3Store", "StorageError", "Store", "StoreConfig", "TableStore",
           "store_for"]
