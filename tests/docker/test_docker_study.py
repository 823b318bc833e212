"""Protects `backend` as a study setting on a real engine (issue 24): a `backend: docker` study over a
docker-only task runs end to end (audit, trials, residual), and `backend: auto` sends each task of a
mixed registry to the backend it needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hrbench.design import StudyDesign
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from tests.conftest import TINY_TASK
from tests.docker.conftest import DOCKER_FIXTURES

pytestmark = pytest.mark.slow  # podman, image builds, containers, a whole `hrbench run`

DOCKER_ONLY = DOCKER_FIXTURES / "tree-tools"
SEALED = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "sealed"


def _study(tmp_path: Path, backend: str, tasks: tuple[Path, ...], natural: int = 2) -> Path:
    registry = tmp_path / "registry"
    for task in tasks:
        shutil.copytree(task, registry / task.name)
    study = {
        "name": f"on-{backend}", "description": "a small study on a container backend",
        "tasks": {"registry": str(registry)}, "backend": backend,
        "agents": [{"id": "reference", "kind": "oracle"}, {"id": "skilled", "kind": "sim", "sim": {"skill": 1.0}}],
        "checkpoint": {"budget": {"max_turns": 3, "timeout_sec": 120, "command_timeout_sec": 30, "memory_mb": 512}},
        "trials": {"checkpoint": 1, "natural": natural}, "bootstrap": {"n_boot": 100, "seed": 1}, "concurrency": 2,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_a_docker_study_over_a_docker_only_task_runs_end_to_end(docker_host: str, tmp_path: Path):
    study = _study(tmp_path, "docker", (DOCKER_ONLY,))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(study), "--out", str(out)],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, "DOCKER_HOST": docker_host})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stores = StudyStores(out)
    audit = stores.tables.read("verifier_audit", ())
    assert audit["reference_reward"].tolist() == [1.0, 1.0] and audit["nothing_reward"].tolist() == [0.0, 0.0]
    trials = pd.concat([stores.read_all(t) for t in ("checkpoint_trials", "baseline/natural_trials")])
    assert len(trials) == 2 * (2 * 1 + 2) and trials["passed"].all(), trials["error"].dropna().tolist()
    residuals = stores.read_all("baseline/horizon_residuals")
    overall = residuals[(residuals["scope"] == "all") & (residuals["agent"] == "reference")].iloc[0]
    # every trial passed: both probabilities are the zero rule's shrinkage of 1 (the residual is computed, not NaN)
    assert 0.5 < overall["p_expected"] < 1 and 0.5 < overall["p_observed"] < 1 and overall["n_tasks"] == 1
    assert set(stores.tables.read("task_catalog", ())["backend"]) == {"docker"}


def _prebuilt_image_task(tmp_path: Path) -> Path:
    """A one-stage docker-only task that costs the engine almost nothing: a prebuilt image and no Dockerfile
    (docker-only; the docker backend runs it on the base image), with a separate verifier besides."""
    task = tmp_path / "tasks" / "sealed"
    shutil.copytree(SEALED, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]\n", '[environment]\ndocker_image = "acme/sealed:1"\n'))
    return task


def test_auto_sends_each_task_of_a_mixed_registry_where_it_belongs(docker_host: str, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    design = StudyDesign.from_file(_study(tmp_path, "auto", (TINY_TASK, _prebuilt_image_task(tmp_path)), natural=1))
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    on = {t.name: type(runner.backend.for_task(t)).__name__ for t in design.tasks}
    assert on == {"tiny-chain": "LocalBackend", "acme/sealed": "DockerBackend"}
    for task in ("tiny-chain", "acme/sealed"):
        rows = runner.run_natural_trials("reference", task)
        assert [r.passed for r in rows] == [True], [r.error for r in rows]
    # local kept its oracle states on disk for tiny-chain only; acme/sealed's are images in the engine
    states = runner.stores.cache_dir / "states"
    assert sorted(p.name for p in states.iterdir()) == ["tiny-chain"]
    docker, sealed = runner.backend.for_task(design.task("acme/sealed")), design.task("acme/sealed")
    assert docker.sealed_image(docker.state_image(sealed, 0))[0] is not None  # one image per state, not the whole list


def test_tasks_audit_on_the_docker_backend_passes_a_docker_only_task(docker_host: str):
    proc = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "audit", str(DOCKER_ONLY), "--backend", "docker"],
                          capture_output=True, text=True, timeout=1200, env={**os.environ, "DOCKER_HOST": docker_host})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ok tree-tools (2 stages)" in proc.stdout and "all tasks pass the verifier audit" in proc.stdout
