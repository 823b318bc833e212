"""Where a study's output is stored, as a Dagster resource: `LocalStorage` (the output directory,
the default) or `S3Storage` (an S3-compatible bucket; credentials through `EnvVar`)."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import ConfigurableResource, EnvVar

from hrbench.storage import Store, StoreConfig
from hrbench.storage.config import DEFAULT_PREFIX


class StorageResource(ConfigurableResource):
    """A store for an output directory (the one interface the IO manager and the study use)."""

    def config(self) -> StoreConfig:
        raise NotImplementedError

    def open(self, out_dir: str | Path) -> Store:
        """The store of `out_dir`."""
        return self.config().open(out_dir)


class LocalStorage(StorageResource):
    """The output directory itself on local disk."""

    def config(self) -> StoreConfig:
        return StoreConfig(kind="local")


class S3Storage(StorageResource):
    """An S3-compatible bucket; `prefix` may contain `{out}` (the output directory's absolute path)."""

    bucket: str
    prefix: str = DEFAULT_PREFIX
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    max_attempts: int = 5

    def config(self) -> StoreConfig:
        # Dagster resolves EnvVar fields only for resources it initialises; one built in code and used
        # directly (the agent sensor's study, a script) still holds the EnvVars, which read their variables now
        values = {name: _resolved(getattr(self, name)) for name in
                  ("bucket", "prefix", "endpoint_url", "region", "access_key_id", "secret_access_key")}
        return StoreConfig(kind="s3", max_attempts=self.max_attempts, **{k: v for k, v in values.items() if v is not None})


def _resolved(value: str | None) -> str | None:
    return value.get_value() if isinstance(value, EnvVar) else value


def storage_from_env() -> StorageResource:
    """The storage the environment selects (HRBENCH_STORE, HRBENCH_S3_*; docs/storage.md): values through
    `EnvVar`, so they are read where the run executes and never stored in the run's config."""
    config = StoreConfig.from_env()  # validates HRBENCH_STORE
    if config.kind == "local":
        return LocalStorage()
    optional = {field: EnvVar(var) for field, var in (
        ("endpoint_url", "HRBENCH_S3_ENDPOINT_URL"), ("region", "HRBENCH_S3_REGION"),
        ("prefix", "HRBENCH_S3_PREFIX"), ("access_key_id", "AWS_ACCESS_KEY_ID"),
        ("secret_access_key", "AWS_SECRET_ACCESS_KEY")) if os.environ.get(var)}
    return S3Storage(bucket=EnvVar("HRBENCH_S3_BUCKET"), **optional)
