"""The storage interface, the same contract on local disk and on moto's S3 server; S3's retries."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from hrbench.storage import LocalStore, S3Store, StorageError, StoreConfig, TableStore
from tests.storage.moto import tcp_proxy


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path: Path):
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    endpoint, bucket = request.getfixturevalue("moto_s3")
    return S3Store(bucket, f"contract-{uuid.uuid4().hex[:8]}", endpoint)


def test_objects_round_trip_list_and_delete(store):
    assert not store.exists("a/b.json")
    with pytest.raises(FileNotFoundError):
        store.get("a/b.json")
    store.put("a/b.json", b"1")
    store.put("a/c/d.json", b"2")
    store.put("ab.json", b"3")  # shares a string prefix with folder `a`, not the folder
    assert store.get("a/b.json") == b"1" and store.exists("a/c/d.json")
    assert store.list("a") == ["a/b.json", "a/c/d.json"]
    store.put("a/b.json", b"new")  # a put replaces the object whole
    assert store.get("a/b.json") == b"new"
    store.delete("a/b.json")
    store.delete("a/b.json")  # absent: no error
    assert store.list("a") == ["a/c/d.json"]


def test_bad_keys_are_refused_with_the_key_named(store):
    for key in ("../escape", "/abs", "a//b", ""):
        with pytest.raises(ValueError, match="bad store key"):
            store.put(key, b"x")


def test_tables_are_parquet_in_the_store_with_their_partitions(store):
    tables = TableStore(store)
    frame = pd.DataFrame({"trial_key": ["k1", "k2"], "passed": [True, False]})
    tables.write("natural_trials", ("steady", "t1"), frame)
    tables.write("natural_trials", ("steady", "t2"), frame.iloc[:1])
    assert tables.partitions("natural_trials") == [("steady", "t1"), ("steady", "t2")]
    pd.testing.assert_frame_equal(tables.read("natural_trials", ("steady", "t1")), frame)
    assert len(tables.read_all("natural_trials")) == 3
    assert tables.read_all("nothing_here").empty
    with pytest.raises(FileNotFoundError, match="materialize it first"):
        tables.read("natural_trials", ("steady", "t3"))


def test_a_table_read_again_is_a_fresh_copy_and_a_rewrite_is_never_served_stale(store, monkeypatch):
    """Decoded tables are cached by the SHA-256 of their bytes (a run reads each partition many times)."""
    import hrbench.storage.tables as tables_module
    decodes = []
    real = pd.read_parquet
    monkeypatch.setattr(tables_module.pd, "read_parquet", lambda *a, **k: decodes.append(1) or real(*a, **k))
    tables = TableStore(store)
    frame = pd.DataFrame({"trial_key": [f"k-{uuid.uuid4().hex}"], "passed": [True], "flags": [["a", "b"]]})
    tables.write("natural_trials", ("steady", "t1"), frame)
    first = tables.read("natural_trials", ("steady", "t1"))
    first.loc[0, "passed"] = False  # a caller's change must not reach the next reader,
    first["flags"].iloc[0][0] = "changed"  # not even inside a list cell (one array per cell, shared by copy())
    again = TableStore(store).read("natural_trials", ("steady", "t1"))
    assert list(again["flags"].iloc[0]) == ["a", "b"]
    pd.testing.assert_frame_equal(again.drop(columns="flags"), frame.drop(columns="flags"))
    assert len(decodes) == 1  # the second read was served from the cache
    tables.write("natural_trials", ("steady", "t1"), frame.assign(passed=False))
    assert not tables.read("natural_trials", ("steady", "t1"))["passed"].iloc[0]
    assert len(decodes) == 2


def test_a_failed_local_write_leaves_the_old_object_whole(tmp_path: Path, monkeypatch):
    store = LocalStore(tmp_path)
    store.put("t.parquet", b"old")

    real_write = Path.write_bytes

    def torn(self, data):  # the disk fills half-way through the new bytes
        real_write(self, data[:2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", torn)
    with pytest.raises(OSError):
        store.put("t.parquet", b"new and longer")
    monkeypatch.undo()
    assert store.get("t.parquet") == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # the scratch file is gone too


def test_a_transient_outage_is_retried_by_botocore(moto_s3):
    endpoint, bucket = moto_s3
    proxy = tcp_proxy(int(endpoint.rsplit(":", 1)[1]))
    store = S3Store(bucket, f"retry-{uuid.uuid4().hex[:8]}", proxy.url, max_attempts=10, connect_timeout=1)
    store.put("before.json", b"1")
    proxy.kill()
    threading.Timer(1.0, proxy.start).start()  # the server is back a second later
    try:
        start = time.monotonic()
        store.put("during.json", b"2")  # refused connections, retried with backoff until it is back
        assert time.monotonic() - start >= 0.9
        assert store.get("during.json") == b"2"
    finally:
        time.sleep(0.2)
        proxy.kill()


def test_an_unreachable_server_fails_with_the_store_and_what_to_do(moto_s3):
    _, bucket = moto_s3
    from tests.storage.moto import free_port

    store = S3Store(bucket, "nowhere", f"http://127.0.0.1:{free_port()}", max_attempts=2, connect_timeout=0.5)
    with pytest.raises(StorageError) as info:
        store.put("x.json", b"1")
    message = str(info.value)
    assert "s3://hrbench-test/nowhere" in message and "PUT x.json failed after 2 attempts" in message
    assert "run again" in message


def test_a_missing_bucket_says_to_create_it(moto_s3):
    endpoint, _ = moto_s3
    with pytest.raises(StorageError, match="bucket 'no-such-bucket' does not exist; create it"):
        S3Store("no-such-bucket", "p", endpoint).put("x.json", b"1")


def test_configuration_selects_the_store(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HRBENCH_STORE", "local")
    assert isinstance(StoreConfig.from_env().open(tmp_path), LocalStore)
    monkeypatch.setenv("HRBENCH_STORE", "s3")
    monkeypatch.setenv("HRBENCH_S3_BUCKET", "b")
    monkeypatch.setenv("HRBENCH_S3_PREFIX", "team/{out}")
    monkeypatch.setenv("HRBENCH_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    store = StoreConfig.from_env().open(tmp_path / "out")
    assert isinstance(store, S3Store) and store.prefix == f"team/{str(tmp_path / 'out').strip('/')}"
    monkeypatch.setenv("HRBENCH_STORE", "gcs")
    with pytest.raises(StorageError, match="HRBENCH_STORE='gcs': use 'local'"):
        StoreConfig.from_env()
