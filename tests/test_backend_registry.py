"""Protects the environment-backend registry: trials run on the backend a run names, never a hard-wired class."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from hrbench.envs.local import LocalBackend
from hrbench.envs.registry import (
    BackendOptions,
    TaskBackends,
    backend_names,
    make_backend,
    register_backend,
    task_backend,
)
from hrbench.protocol import DEMO_STUDY
from hrbench.study_run import StudyRun
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK


def test_local_is_registered_and_built_with_the_study_limits(tmp_path: Path):
    backend = make_backend("local", BackendOptions(cache_dir=tmp_path, memory_mb=256))
    assert "local" in backend_names()
    assert isinstance(backend, LocalBackend) and backend.memory_mb == 256 and backend.cache_dir == tmp_path


def test_an_unknown_backend_names_the_registered_ones(tmp_path: Path):
    with pytest.raises(ValueError, match=r"no environment backend 'nowhere'; registered: \[.*'local'"):
        make_backend("nowhere", BackendOptions(cache_dir=tmp_path))


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="registered twice"):
        register_backend("local", lambda options: None)  # type: ignore[arg-type,return-value]


def test_a_study_run_uses_the_backend_registered_under_its_name(tmp_path: Path):
    built: list[BackendOptions] = []

    class Recording:
        def __init__(self, options: BackendOptions):
            built.append(options)

        def check_supported(self, task) -> None:
            pass

    name = f"recording-{uuid.uuid4().hex[:8]}"
    register_backend(name, Recording)  # type: ignore[arg-type]
    study = yaml.safe_load(DEMO_STUDY.read_text())
    study["backend"] = name
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    run = StudyRun.from_file(path, tmp_path / "out", progress=False)
    assert isinstance(run.runner.backend.for_task(run.design.tasks[0]), Recording)
    assert built == [BackendOptions(cache_dir=(tmp_path / "out" / "cache").resolve(),
                                    memory_mb=run.study.checkpoint.budget.memory_mb)]


def test_task_backend_names_the_backend_that_runs_each_task(tmp_path: Path):
    # The audit and depth caches key on it: one helper, whether the run holds a study's backends or one backend.
    task = load_task(TINY_TASK)
    local = LocalBackend(tmp_path)
    assert task_backend(local, task) is local
    routed = TaskBackends("auto", BackendOptions(cache_dir=tmp_path))
    chosen = task_backend(routed, task)
    assert isinstance(chosen, LocalBackend) and chosen is task_backend(routed, task)
    built: list[str] = []
    name = f"named-{uuid.uuid4().hex[:6]}"
    register_backend(name, lambda options: built.append(name) or local)
    assert task_backend(TaskBackends(name, BackendOptions(cache_dir=tmp_path)), task) is local and built == [name]
