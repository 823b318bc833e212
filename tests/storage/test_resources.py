"""The storage resources: selected by the environment, credentials as EnvVar, and the IO manager
writing and reading tables (with their lineage records) in the S3 bucket."""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
from dagster import AssetIn, EnvVar, asset, materialize

from hrbench.lineage import read_record
from hrbench.storage import S3Store
from resources.storage import LocalStorage, S3Storage, storage_from_env
from resources.study import TableIOManager


def test_the_environment_selects_the_storage_with_its_settings_as_env_vars(monkeypatch):
    monkeypatch.setenv("HRBENCH_STORE", "local")
    assert isinstance(storage_from_env(), LocalStorage)
    monkeypatch.setenv("HRBENCH_STORE", "s3")
    monkeypatch.setenv("HRBENCH_S3_BUCKET", "results")
    monkeypatch.setenv("HRBENCH_S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-store-me")
    monkeypatch.delenv("HRBENCH_S3_PREFIX", raising=False)  # the default prefix (the S3 pass sets its own)
    storage = storage_from_env()
    assert isinstance(storage, S3Storage)
    assert storage.bucket == EnvVar("HRBENCH_S3_BUCKET") and storage.secret_access_key == EnvVar("AWS_SECRET_ACCESS_KEY")
    # used outside a Dagster run (the agent sensor's study resource), it reads the variables itself
    config = storage.config()
    assert (config.bucket, config.endpoint_url, config.secret_access_key) == \
        ("results", "http://127.0.0.1:9000", "do-not-store-me")
    assert storage.open("/tmp/out").location == "s3://results/hrbench/tmp/out at http://127.0.0.1:9000"


def test_the_io_manager_round_trips_partitioned_tables_through_s3(moto_s3, tmp_path: Path, monkeypatch):
    endpoint, bucket = moto_s3
    prefix = f"io-{uuid.uuid4().hex[:8]}/{{out}}"
    monkeypatch.setenv("TEST_BUCKET", bucket)
    storage = S3Storage(bucket=EnvVar("TEST_BUCKET"), prefix=prefix, endpoint_url=endpoint)
    out = tmp_path / "out"

    # a study's keys start with its namespace, which its one store leaves out of the table names
    @asset(key_prefix="study")
    def numbers() -> pd.DataFrame:
        return pd.DataFrame({"trial_key": ["a", "b"], "prereg_sha256": ["p", "p"]})

    @asset(key_prefix="study", ins={"numbers": AssetIn(key=["study", "numbers"])})
    def doubled(numbers: pd.DataFrame) -> pd.DataFrame:
        return numbers.assign(n=len(numbers) * 2)

    result = materialize([numbers, doubled], resources={"io_manager": TableIOManager(root=str(out), storage=storage)})
    assert result.success
    store = S3Store(bucket, prefix.replace("{out}", str(out.resolve()).strip("/")), endpoint)
    assert store.list("tables") == ["tables/doubled.parquet", "tables/numbers.parquet"]
    assert not (out / "tables").exists()  # nothing written beside the bucket
    record = read_record(store, "doubled", ())
    assert record is not None and record.rows == 2 and record.inputs == {"numbers": record.inputs["numbers"]}
