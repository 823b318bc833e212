"""Protects `backend` as a study setting (issue 24): local, docker or auto, pre-registered, each task's
choice in the catalog and the lineage, and a docker study without an engine stopped before any trial."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hrbench.design import StudyDesign
from hrbench.envs.base import SandboxError
from hrbench.protocol import StudyError, load_study
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from tests.conftest import FIXTURES, TINY_STUDY, TINY_TASK

DOCKER_ONLY = FIXTURES / "docker-registry" / "tree-tools"
NO_ENGINE = "unix:///nonexistent/hrbench-no-engine.sock"


def _study(tmp_path: Path, backend: str | None, tasks: tuple[Path, ...] = (TINY_TASK,)) -> Path:
    registry = tmp_path / "registry"
    for task in tasks:
        shutil.copytree(task, registry / task.name, dirs_exist_ok=True)
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(registry)
    study["trials"] = {"checkpoint": 1, "natural": 1}
    if backend is not None:
        study["backend"] = backend
    path = tmp_path / f"study-{backend}.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_an_unknown_backend_is_refused_naming_the_choices(tmp_path: Path):
    with pytest.raises(StudyError, match=r"unknown backend 'kubernetes'; choose from \[.*'docker'.*'local'.*'auto'\]"):
        load_study(_study(tmp_path, "kubernetes"))


def test_the_backend_is_pre_registered_and_auto_records_each_tasks_choice(tmp_path: Path):
    local, auto, docker = (StudyDesign.from_file(_study(tmp_path, b, (TINY_TASK, DOCKER_ONLY)))
                           for b in (None, "auto", "docker"))  # one registry: only the backend differs
    assert local.preregistration.sandbox["backend"] == "local" and "task_backends" not in local.preregistration.sandbox
    assert docker.preregistration.sandbox["backend"] == "docker"
    assert auto.preregistration.sandbox["task_backends"] == {"tiny-chain": "local", "tree-tools": "docker"}
    assert len({local.prereg_sha256, auto.prereg_sha256, docker.prereg_sha256}) == 3  # a new backend: a new version
    catalog = auto.catalog().drop_duplicates("task").set_index("task")["backend"].to_dict()
    assert catalog == {"tiny-chain": "local", "tree-tools": "docker"}
    assert set(docker.catalog()["backend"]) == {"docker"}


def test_auto_sends_each_task_to_its_backend_and_needs_no_engine_for_local_tasks(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    design = StudyDesign.from_file(_study(tmp_path, "auto"))  # tiny-chain only: local, no engine asked for
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    runner.check_backends()
    assert runner.backend.for_task(design.tasks[0]).name == "local"


@pytest.mark.parametrize("backend, match", [
    ("docker", r"cannot reach a Docker API.*scripts/podman\.sh"),
    ("auto", r"cannot reach a Docker API.*scripts/podman\.sh"),
    ("local", r"task 'tree-tools' needs the docker backend"),
])
def test_a_study_whose_tasks_cannot_run_stops_before_any_trial(tmp_path: Path, monkeypatch, backend: str, match: str):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    design = StudyDesign.from_file(_study(tmp_path, backend, (TINY_TASK, DOCKER_ONLY)))
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    with pytest.raises(SandboxError, match=match):
        runner.run_natural_trials("steady", "tiny-chain")
    assert not (tmp_path / "out" / "journal").exists()


def test_hrbench_run_on_docker_without_an_engine_fails_with_one_line_naming_podman_sh(tmp_path: Path):
    study = _study(tmp_path, "docker")
    env = {**os.environ, "DOCKER_HOST": NO_ENGINE}
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(study), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "scripts/podman.sh" in lines[0], proc.stderr
    assert not (tmp_path / "out" / "journal").exists()


def test_tasks_audit_takes_a_backend(tmp_path: Path):
    env = {**os.environ, "DOCKER_HOST": NO_ENGINE}
    proc = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "audit", str(DOCKER_ONLY), "--backend", "docker"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1 and "scripts/podman.sh" in proc.stdout, proc.stdout + proc.stderr
    local = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "audit", str(DOCKER_ONLY)],
                           capture_output=True, text=True, timeout=300, env=env)
    assert local.returncode == 1 and "--backend docker" in local.stdout, local.stdout
    bad = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "audit", str(DOCKER_ONLY), "--backend", "k8s"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 1 and "choose from" in bad.stderr


def test_the_dagster_code_location_runs_the_studys_backend(tmp_path: Path, monkeypatch):
    from resources.study import StudyResource

    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    study = _study(tmp_path, "auto", (TINY_TASK, DOCKER_ONLY))
    run = StudyResource(study_path=str(study), out_dir=str(tmp_path / "out"), progress=False).run()
    with pytest.raises(SandboxError, match="scripts/podman.sh"):  # tree-tools needs the engine it cannot reach
        run.runner.check_backends()
