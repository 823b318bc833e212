"""An S3-compatible object store (AWS S3, MinIO, Ceph, moto's server) through boto3.

Atomic by construction: S3 makes an object visible only once its PUT completed, so a reader never
sees half of one. Transient errors (connection refused or reset, timeouts, throttling, 5xx) are
retried with exponential backoff by botocore's `standard` retry mode; once its attempts are spent
the operation raises `StorageError` naming the store, the object and what to do.
"""

from __future__ import annotations

import os
import threading
from functools import cache, cached_property

from hrbench.storage.base import StorageError, Store, check_key

_MISSING = {"NoSuchKey", "404", "NotFound"}
_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
_LOCK = threading.Lock()  # boto3 sessions are not thread-safe to create clients from


@cache
def _client(endpoint_url: str | None, region: str, key_id: str | None, secret: str | None, max_attempts: int,
            connect_timeout: float, read_timeout: float, environment: tuple, pid: int):
    """One client per process and configuration: building one loads botocore's S3 model (~0.5 s), and
    every study step opens several stores. Clients are thread-safe; `pid` keeps a forked child from
    using its parent's connection pool."""
    import boto3  # only S3 runs need it
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": max_attempts},
                    connect_timeout=connect_timeout, read_timeout=read_timeout,
                    s3={"addressing_style": "path"})  # endpoints on loopback have no per-bucket DNS
    with _LOCK:
        return boto3.session.Session().client("s3", endpoint_url=endpoint_url, region_name=region,
                                              aws_access_key_id=key_id, aws_secret_access_key=secret, config=config)


class S3Store(Store):
    """Objects under `s3://bucket/prefix/`."""

    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str | None = None, region: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 max_attempts: int = 5, connect_timeout: float = 3.0, read_timeout: float = 20.0):
        if not bucket:
            raise StorageError("the S3 store needs a bucket: set HRBENCH_S3_BUCKET (or the resource's `bucket`)")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url or None
        self.region = region or "us-east-1"
        self._credentials = (access_key_id or None, secret_access_key or None)
        self.max_attempts = max_attempts
        self._timeouts = (connect_timeout, read_timeout)
        self.location = f"s3://{bucket}/{self.prefix}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    @cached_property
    def client(self):
        # the credential environment is part of the key: boto3 reads it when it builds the client
        environment = tuple(os.environ.get(name) for name in _CREDENTIAL_ENV)
        return _client(self.endpoint_url, self.region, *self._credentials, self.max_attempts, *self._timeouts,
                       environment, os.getpid())

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def address(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _fail(self, op: str, key: str, exc: Exception) -> StorageError:
        from botocore.exceptions import ClientError

        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return StorageError(f"S3 store {self.location}: bucket {self.bucket!r} does not exist; create it "
                                "(aws s3 mb s3://BUCKET) or set HRBENCH_S3_BUCKET to an existing one")
        return StorageError(
            f"S3 store {self.location}: {op} {key} failed after {self.max_attempts} attempts "
            f"({type(exc).__name__}: {exc}); check that the server is reachable and the credentials are right, "
            "then run again (finished trials are kept in the local journal and uploaded then)")

    def _call(self, op: str, key: str, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING:
                raise FileNotFoundError(f"no object {key} in {self.location}") from exc
            raise self._fail(op, key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail(op, key, exc) from exc

    def put(self, key: str, data: bytes) -> str:
        self._call("PUT", key, self.client.put_object, Bucket=self.bucket, Key=self._key(key), Body=data)
        return self.address(key)

    def get(self, key: str) -> bytes:
        response = self._call("GET", key, self.client.get_object, Bucket=self.bucket, Key=self._key(key))
        from botocore.exceptions import BotoCoreError

        try:
            return response["Body"].read()
        except BotoCoreError as exc:  # the connection dropped mid-body
            raise self._fail("GET", key, exc) from exc

    def exists(self, key: str) -> bool:
        try:
            self._call("HEAD", key, self.client.head_object, Bucket=self.bucket, Key=self._key(key))
            return True
        except FileNotFoundError:
            return False

    def list(self, prefix: str) -> list[str]:
        folder = prefix.strip("/")
        full = self._key(folder) + "/" if folder else (f"{self.prefix}/" if self.prefix else "")
        strip = len(f"{self.prefix}/") if self.prefix else 0
        keys: list[str] = []
        token: dict = {}
        while True:
            page = self._call("LIST", folder or "/", self.client.list_objects_v2, Bucket=self.bucket,
                              Prefix=full, **token)
            keys += [item["Key"][strip:] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return sorted(keys)
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def delete(self, key: str) -> None:
        self._call("DELETE", key, self.client.delete_object, Bucket=self.bucket, Key=self._key(key))
