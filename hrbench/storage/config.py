"""Which store a study writes to, from configuration (the Dagster resource or the environment).

    HRBENCH_STORE            `local` (default: the output directory itself) or `s3`
    HRBENCH_S3_BUCKET        the bucket (must exist)
    HRBENCH_S3_PREFIX        key prefix; `{out}` in it is replaced by the output directory's absolute
                             path (default `hrbench/{out}`), so one bucket holds many output directories
                             and a re-run with the same --out finds its objects again
    HRBENCH_S3_ENDPOINT_URL  an S3-compatible server (MinIO, Ceph, moto); unset: AWS
    HRBENCH_S3_REGION        default us-east-1
    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or any other boto3 credential source)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from hrbench.storage.base import StorageError, Store
from hrbench.storage.local import LocalStore
from hrbench.storage.s3 import S3Store

DEFAULT_PREFIX = "hrbench/{out}"


class StoreConfig(BaseModel):
    """A store's settings; `open(out_dir)` makes the store of one output directory."""

    kind: Literal["local", "s3"] = "local"
    bucket: str | None = None
    prefix: str = DEFAULT_PREFIX
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    max_attempts: int = 5

    @classmethod
    def from_env(cls) -> "StoreConfig":
        kind = os.environ.get("HRBENCH_STORE", "local") or "local"
        if kind not in ("local", "s3"):
            raise StorageError(f"HRBENCH_STORE={kind!r}: use 'local' (the output directory) or 's3'")
        return cls(kind=kind, bucket=os.environ.get("HRBENCH_S3_BUCKET"),
                   prefix=os.environ.get("HRBENCH_S3_PREFIX") or DEFAULT_PREFIX,
                   endpoint_url=os.environ.get("HRBENCH_S3_ENDPOINT_URL"), region=os.environ.get("HRBENCH_S3_REGION"))

    def open(self, out_dir: str | Path) -> Store:
        out = Path(out_dir).resolve()
        if self.kind == "local":
            return LocalStore(out)
        prefix = self.prefix.replace("{out}", str(out).strip("/"))
        return S3Store(self.bucket or "", prefix, self.endpoint_url, self.region, self.access_key_id,
                       self.secret_access_key, self.max_attempts)


def store_for(out_dir: str | Path) -> Store:
    """The store of an output directory as the environment configures it (local disk by default)."""
    return StoreConfig.from_env().open(out_dir)
