"""Shared fixtures: the fixture registry, a tiny study, and task-package builders."""

from __future__ import annotations

import os
import shutil
import uuid
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


def read_table(out: Path, asset: str, *partition: str):
    """A stored table of an output directory, through its store (local or S3, as the suite runs)."""
    from hrbench.stores import StudyStores

    return StudyStores(out).tables.read(asset, tuple(partition))
