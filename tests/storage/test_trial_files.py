"""A trial row's files (its trajectory and the Harbor artifacts its verifications saved) go to the
store with the row, so a resume from the bucket alone can open every file a row names."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from hrbench.agents.oracle import OracleAgent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.storage import S3Store
from hrbench.stores import StudyStores
from hrbench.tasks.loader import load_task
from tests.conftest import FIXTURES


def test_a_rows_trajectory_and_artifacts_are_in_the_bucket_and_come_back_from_it(tmp_path: Path, moto_s3):
    endpoint, bucket = moto_s3
    out = tmp_path / "out"
    stores = StudyStores(out, S3Store(bucket, f"files-{uuid.uuid4().hex[:8]}", endpoint))
    task = load_task(FIXTURES / "harbor" / "ledger")
    spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition="baseline", protocol="natural-full-own",
                     task=task.name, kind="natural", stage=None, trial_index=0)
    record = run_natural_trial(spec, task, OracleAgent(), LocalBackend(tmp_path / "cache"), CONDITIONS["baseline"],
                               CheckpointProtocol().budget, 1, trajectory_dir=stores.trajectory_dir)
    artifacts = [p for paths in json.loads(record.artifacts_json).values() for p in paths]
    assert record.passed and len(artifacts) >= 2, record.error

    stores.journal(spec.prereg_sha256, "natural", spec.agent, task.name, "baseline").append(record)
    files = [record.trajectory_path, *artifacts]
    assert set(files) <= set(stores.store.list("trajectories"))

    shutil.rmtree(out)  # the working copy is gone: every file the row names comes back from the bucket
    fetched = StudyStores(out, stores.store)
    restored = fetched.journal(spec.prereg_sha256, "natural", spec.agent, task.name, "baseline").load()
    assert list(restored) == [record.trial_key]
    for relpath in files:
        assert fetched.trajectory_file(relpath) == out / relpath
    assert (out / artifacts[0]).read_text() == "opened with 100\n"
