"""Protects the cross-run caches (hrbench.content_cache): a task's passing audit and its depth row are
reused while nothing they depend on changed, and a changed task is audited and measured again."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import hrbench.structure.study_depth as study_depth
import hrbench.tasks.audit_cache as audit_cache
from hrbench.content_cache import ContentCache
from hrbench.design import StudyDesign
from hrbench.envs.local import LocalBackend
from hrbench.stores import StudyStores
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
from tests.structure.test_study_depth import _study



@pytest.fixture
def audits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tasks really audited (the real audit runs; each call is recorded)."""
    calls: list[str] = []
    real = audit_cache.audit_task

    def counted(task, backend):
        calls.append(task.name)
        return real(task, backend)

    monkeypatch.setattr(audit_cache, "audit_task", counted)
    return calls


@pytest.mark.no_store
def test_a_passing_audit_is_reused_and_a_changed_task_is_audited_again(tiny_task_copy: Path, tmp_path: Path,
                                                                         audits: list[str]):
    cache, backend = ContentCache("audit", tmp_path / "cache"), LocalBackend(tmp_path / "snapshots")
    first = audit_cache.cached_audit(load_task(tiny_task_copy), backend, cache)
    again = audit_cache.cached_audit(load_task(tiny_task_copy), backend, cache)
    assert audits == ["tiny-chain"] and all(r.ok for r in first)
    assert [r.model_dump() for r in again] == [r.model_dump() for r in first]
    # any byte of the package changes the key (the audit depends on every file a verifier may read)
    readme = tiny_task_copy / "steps" / "make" / "instruction.md"
    readme.write_text(readme.read_text() + "\n")
    audit_cache.cached_audit(load_task(tiny_task_copy), backend, cache)
    assert audits == ["tiny-chain", "tiny-chain"]


@pytest.mark.no_store
def test_the_key_covers_the_sandbox_and_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    task = load_task(TINY_TASK)
    base = audit_cache.audit_key(task, LocalBackend(tmp_path, memory_mb=1024))
    assert audit_cache.audit_key(task, LocalBackend(tmp_path / "elsewhere", memory_mb=1024)) == base
    assert audit_cache.audit_key(task, LocalBackend(tmp_path, memory_mb=512)) != base
    changed = audit_cache.code_version().model_copy(update={"source_sha256": "0" * 64})
    monkeypatch.setattr(audit_cache, "code_version", lambda: changed)
    assert audit_cache.audit_key(task, LocalBackend(tmp_path, memory_mb=1024)) != base


@pytest.mark.no_store
def test_a_failing_audit_is_never_cached(tiny_task_copy: Path, tmp_path: Path, audits: list[str]):
    (tiny_task_copy / "steps" / "report" / "tests" / "test.sh").write_text(
        '#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n')
    cache, backend = ContentCache("audit", tmp_path / "cache"), LocalBackend(tmp_path / "snapshots")
    for _ in range(2):
        assert not all(r.ok for r in audit_cache.cached_audit(load_task(tiny_task_copy), backend, cache))
    assert audits == ["tiny-chain", "tiny-chain"]


@pytest.mark.no_store
def test_an_unreadable_entry_is_a_miss_and_off_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = ContentCache("audit", tmp_path / "cache")
    cache.put("k", [1])
    assert cache.get("k") == [1]
    (tmp_path / "cache" / "audit" / "k.json").write_text('{"key": "k", "value": [1')
    assert cache.get("k") is None
    monkeypatch.setenv("HRBENCH_CACHE_DIR", "off")
    off = ContentCache("audit")
    off.put("k", [1])
    assert off.root is None and off.get("k") is None


def test_depth_rows_are_reused_and_a_changed_task_is_measured_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    measured: list[str] = []
    real = study_depth.harness_runner

    def counted(task, *args, **kwargs):
        measured.append(task.name)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(study_depth, "harness_runner", counted)
    monkeypatch.setenv("HRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    study = _study(tmp_path, {"agents": ["steady"], "tasks": ["calib-parallel"]})
    backend = LocalBackend(tmp_path / "snapshots")
    first = study_depth.measure_study_depth(StudyDesign.from_file(study), backend, StudyStores(tmp_path / "a"))
    again = study_depth.measure_study_depth(StudyDesign.from_file(study), backend, StudyStores(tmp_path / "b"))
    assert measured == ["calib-parallel"]
    pd.testing.assert_frame_equal(first, again)
    # another agent spec (agents are not in the pre-registration) is another key
    study.write_text(study.read_text().replace("skill: 1.0", "skill: 0.99", 1))
    study_depth.measure_study_depth(StudyDesign.from_file(study), backend, StudyStores(tmp_path / "c"))
    assert measured == ["calib-parallel", "calib-parallel"]
