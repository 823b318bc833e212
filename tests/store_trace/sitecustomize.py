"""Records which test opens a store, for the suite's `no_store` guard (tests/conftest.py).

On PYTHONPATH during the default (local) pass, so every Python subprocess a test starts loads it:
with HRBENCH_TEST_STORE_TRACE set, it wraps `StoreConfig.from_env` and `StoreConfig.open` once
`hrbench.storage.config` is imported, and each call appends the running test's id (pytest exports it
as PYTEST_CURRENT_TEST, and subprocesses inherit it) to that file. Without the variable it does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

TRACE_ENV = "HRBENCH_TEST_STORE_TRACE"
CONFIG_MODULE = "hrbench.storage.config"


def record_store_use() -> None:
    """Append the running test's node id to the trace file (one short O_APPEND write: atomic)."""
    path, current = os.environ.get(TRACE_ENV), os.environ.get("PYTEST_CURRENT_TEST")
    if not path or not current:
        return
    nodeid = current.rsplit(" (", 1)[0]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (nodeid + "\n").encode())
    finally:
        os.close(fd)


def trace(config_class: type) -> None:
    """Wrap the two ways a store is configured so each use is recorded (idempotent)."""
    if getattr(config_class, "_traced", False):
        return
    from_env, open_ = config_class.from_env.__func__, config_class.open

    def traced_from_env(cls):
        record_store_use()
        return from_env(cls)

    def traced_open(self, out_dir):
        record_store_use()
        return open_(self, out_dir)

    config_class.from_env = classmethod(traced_from_env)
    config_class.open = traced_open
    config_class._traced = True


class _TraceOnImport(importlib.abc.MetaPathFinder):
    """Patches the store configuration right after its module runs, without importing it early."""

    def find_spec(self, name, path, target=None):
        if name != CONFIG_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_trace(module):
            exec_module(module)
            trace(module.StoreConfig)

        spec.loader.exec_module = exec_and_trace
        return spec


if os.environ.get(TRACE_ENV) and not any(isinstance(f, _TraceOnImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _TraceOnImport())
