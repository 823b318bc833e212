"""The S3 server dies mid-study: the run fails with a message naming the store, and once the server is
back a re-run finishes with every trial exactly once, from the local write-ahead journal and from
the S3 copy alone.

moto keeps its objects in memory, so the "server" hrbench talks to is a TCP proxy in front of it:
killing the proxy (SIGKILL, connections dropped mid-request) and starting it again on the same port
is the outage and the restart as hrbench sees them, with the bucket's state kept."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml

import hrbench.runner as runner_module
from hrbench.design import StudyDesign
from hrbench.harness.records import TrialRecord
from hrbench.runner import TrialRunner
from hrbench.storage import S3Store, StorageError, StoreConfig
from hrbench.stores import StoreJournalMirror, StudyStores
from tests.conftest import FIXTURES, TINY_STUDY
from tests.storage.moto import tcp_proxy


def _design(tmp_path: Path) -> StudyDesign:
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["trials"] = {"checkpoint": 3, "natural": 1}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return StudyDesign.from_file(path)


def _objects(direct: S3Store, prefix: str) -> list[TrialRecord]:
    return [TrialRecord.model_validate_json(direct.get(k)) for k in direct.list(prefix)]


def test_killing_the_s3_server_mid_study_loses_and_duplicates_no_trial(tmp_path: Path, moto_s3, monkeypatch):
    endpoint, bucket = moto_s3
    proxy = tcp_proxy(int(endpoint.rsplit(":", 1)[1]))
    config = StoreConfig(kind="s3", bucket=bucket, prefix=f"outage-{uuid.uuid4().hex[:8]}/{{out}}",
                         endpoint_url=proxy.url, max_attempts=2)
    out = tmp_path / "out"
    direct = S3Store(bucket, config.open(out).prefix, endpoint)  # moto itself, past the proxy
    design = _design(tmp_path)
    task = design.tasks[0].name
    executed: list[str] = []
    killed: list[str] = []  # once
    real = runner_module.run_checkpoint_trial
    stores = StudyStores(out, config.open(out))
    journal = stores.journal(design.prereg_sha256, "checkpoint", "steady", task)

    def counted(spec, *args, **kwargs):
        executed.append(spec.key)
        return real(spec, *args, **kwargs)

    real_push = StoreJournalMirror.push

    def push(self, record, attempt=None):
        # The server dies between the third trial's local journal line and its upload (deterministic: a
        # kill timed by the trials could drop a request the server had already stored, and then every
        # trial journaled locally would also be in the bucket).
        pushed.append(record.trial_key)
        if len(pushed) == 3 and not killed:
            killed.append(record.trial_key)
            proxy.kill()
        return real_push(self, record, attempt)

    pushed: list[str] = []
    monkeypatch.setattr(runner_module, "run_checkpoint_trial", counted)
    monkeypatch.setattr(StoreJournalMirror, "push", push)
    runner = TrialRunner(design, stores, progress=False)
    specs = {s.key for s in runner.checkpoint_specs("steady", task)}
    assert len(specs) == 9
    try:
        with pytest.raises(StorageError) as failure:
            runner.run_checkpoint_trials("steady", task)
        message = str(failure.value)
        assert f"s3://{bucket}/" in message and "failed after 2 attempts" in message and "run again" in message
        uploaded = _objects(direct, journal.mirror.records_prefix)
        assert 0 < len(uploaded) < len(specs)  # it really died mid-study
        local = {TrialRecord.model_validate_json(line).trial_key for line in journal.path.read_text().splitlines()}
        assert local - {r.trial_key for r in uploaded}, "a trial journaled locally but not uploaded"

        proxy.start()  # the server is back
        again = TrialRunner(design, StudyStores(out, config.open(out)), progress=False)
        records = again.run_checkpoint_trials("steady", task)
        assert sorted(r.trial_key for r in records) == sorted(specs)
        stored = _objects(direct, journal.mirror.records_prefix)
        assert sorted(r.trial_key for r in stored) == sorted(specs)  # every trial once: none lost, none twice
        ran_twice = [k for k in set(executed) if executed.count(k) > 1]
        assert not set(ran_twice) & local  # a trial journaled before the outage never ran again
        for record in stored:  # each row's trajectory went up before the row
            assert direct.exists(record.trajectory_path)

        # Resume from the S3 copy alone: the working copy is gone, nothing runs again.
        shutil.rmtree(out)
        before = len(executed)
        alone = TrialRunner(design, StudyStores(out, config.open(out)), progress=False)
        resumed = alone.run_checkpoint_trials("steady", task)
        assert len(executed) == before
        assert {r.trial_key: r for r in resumed} == {r.trial_key: r for r in records}
    finally:
        proxy.kill()
