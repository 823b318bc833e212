"""Shared fixtures: the fixture registry, a tiny study, and task-package builders."""

from __future__ import annotations

import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_STUDY = FIXTURES / "studies" / "tiny.yaml"
TINY_TASK = FIXTURES / "registry" / "tiny-chain"


@pytest.fixture
def tiny_task_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture task, for tests that break it."""
    target = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, target)
    return target


# -- the store the suite runs against -----------------------------------------------------------
# HRBENCH_STORE=s3 runs every test against moto's S3 server on loopback (started once per session):
# each output directory a test makes gets its own prefix (`{out}`), so tests stay independent.
# scripts/test.sh runs the default suite a second time this way.


@pytest.fixture(scope="session")
def moto_s3():
    """moto's S3 server on loopback: (endpoint URL, bucket)."""
    from tests.storage.moto import CREDENTIALS, create_bucket, moto_server

    server = moto_server()
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    create_bucket(server.url, "hrbench-test")
    yield server.url, "hrbench-test"
    server.kill()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session", autouse=True)
def suite_store(request):
    """Under HRBENCH_STORE=s3, point every store of the session at moto (subprocesses inherit it)."""
    if os.environ.get("HRBENCH_STORE", "local") != "s3":
        yield "local"
        return
    endpoint, bucket = request.getfixturevalue("moto_s3")
    os.environ.update({"HRBENCH_S3_ENDPOINT_URL": endpoint, "HRBENCH_S3_BUCKET": bucket,
                       "HRBENCH_S3_PREFIX": f"suite-{uuid.uuid4().hex[:8]}/{{out}}"})
    yield "s3"


def stored_keys(out: Path, folder: str) -> list[str]:
    """Keys under `folder` in an output directory's store (local or S3, as the suite runs)."""
    from hrbench.storage import store_for

    return store_for(out).list(folder)


def stored_table(out: Path, key: str):
    """A stored parquet table by key (`tables/checkpoint_trials/steady/tiny-chain.parquet`)."""
    import io

    import pandas as pd

    from hrbench.storage import store_for

    return pd.read_parquet(io.BytesIO(store_for(out).get(key)))


def store_table(out: Path, key: str, frame) -> None:
    """Overwrite a stored table (tests that tamper with results)."""
    import io

    from hrbench.storage import store_for

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    store_for(out).put(key, buffer.getvalue())


def copy_output(source: Path, target: Path, ignore=None) -> None:
    """Copy an output directory and, with an S3 store, its objects (to the target's own prefix)."""
    from hrbench.storage import LocalStore, store_for

    shutil.copytree(source, target, ignore=ignore)
    src, dst = store_for(source), store_for(target)
    if not isinstance(src, LocalStore):
        # a study holds hundreds of objects (a row and a trajectory per trial): one at a time, the copy
        # took ~10 s per test under load
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: dst.put(key, src.get(key)), src.list("")))
