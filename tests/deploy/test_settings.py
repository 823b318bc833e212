"""Protects the deployment's one settings file ($DAGSTER_HOME/hrbench.yaml): every process that loads the code
location gets the same settings (the webserver and the daemon once showed different crons), a contradicting
environment is refused, and `hrbench run` keeps its own study and output directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from dagster import DefaultScheduleStatus

from pipelines import definitions
from pipelines.settings import DeploymentConfigError, read_settings
from tests.conftest import TINY, TINY_STUDY

KEYS = ["HRBENCH_SCHEDULE", "HRBENCH_STUDY", "HRBENCH_OUT", "HRBENCH_PROGRESS", "HRBENCH_SENSOR_INTERVAL"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """A DAGSTER_HOME with hrbench.yaml, and an environment without the settings (restored afterwards)."""
    for key in KEYS:
        monkeypatch.setenv(key, "")  # recorded, so the test's changes to os.environ are undone
        monkeypatch.delenv(key)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "hrbench.yaml").write_text(yaml.safe_dump({
        "HRBENCH_STUDY": str(TINY_STUDY), "HRBENCH_OUT": str(tmp_path / "out"), "HRBENCH_SCHEDULE": "17 4 * * *",
        "HRBENCH_SENSOR_INTERVAL": 5}))
    return tmp_path


def _schedule(defs):
    return defs.get_schedule_def(TINY.name("study_refresh_schedule"))


def test_the_file_sets_what_every_process_loads(home: Path):
    schedule = _schedule(definitions.current())
    assert schedule.cron_schedule == "17 4 * * *" and schedule.default_status == DefaultScheduleStatus.RUNNING
    assert definitions.study_and_out() == (str(TINY_STUDY), str(home / "out"))


def test_an_environment_that_contradicts_the_file_is_refused(home: Path, monkeypatch):
    monkeypatch.setenv("HRBENCH_SCHEDULE", "0 3 * * *")  # a daemon started with its own cron
    with pytest.raises(DeploymentConfigError, match=r"HRBENCH_SCHEDULE='0 3 \* \* \*' \(the file: '17 4 \* \* \*'\)"):
        definitions.current()
    monkeypatch.setenv("HRBENCH_SCHEDULE", "17 4 * * *")  # the same value is no contradiction
    assert _schedule(definitions.current()).cron_schedule == "17 4 * * *"


def test_hrbench_run_keeps_its_own_study_and_output(home: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HRBENCH_OUT", str(tmp_path / "elsewhere"))
    job = definitions.step_job(TINY.name("study_setup_job"))
    assert job.name == "tiny__study_setup_job"
    assert definitions.study_and_out()[1] == str(tmp_path / "elsewhere")
    with pytest.raises(DeploymentConfigError, match="HRBENCH_OUT"):
        definitions.current()  # the webserver and daemon may not


def test_only_hrbench_settings_belong_in_the_file(tmp_path: Path):
    path = tmp_path / "hrbench.yaml"
    path.write_text("AWS_SECRET_ACCESS_KEY: x\nHRBENCH_OUT: /o\n")
    with pytest.raises(DeploymentConfigError, match="AWS_SECRET_ACCESS_KEY"):
        read_settings(path)
    path.write_text("HRBENCH_AUTOMATION: true\nHRBENCH_SENSOR_INTERVAL: 30\n")
    assert read_settings(path) == {"HRBENCH_AUTOMATION": "true", "HRBENCH_SENSOR_INTERVAL": "30"}


def test_the_docker_run_launcher_mounts_what_the_file_names(home: Path, monkeypatch):
    """A run container sees the study, its task registry, OUT and DAGSTER_HOME of hrbench.yaml, the code and the
    engine's socket at their own paths (deploy/dagster-docker.yaml names none); the launching process's
    environment is left as it was."""
    from pipelines.defs.study.executor import REPO_ROOT
    from pipelines.docker_launcher import deployment_container_context, engine_socket

    monkeypatch.setenv("DOCKER_HOST", "unix:///run/podman/podman.sock")
    context = deployment_container_context(["/data:/data:ro"])
    volumes = context.container_kwargs["volumes"]
    mounts = {v.split(":")[0]: v.split(":")[2] for v in volumes}
    assert mounts["/data"] == "ro" and mounts["/run/podman/podman.sock"] == "rw"
    assert mounts[str(home / "out")] == mounts[str(home)] == "rw"
    registry = TINY_STUDY.parents[1] / "registry"  # the tiny study's tasks (tests/fixtures/registry)
    assert mounts[str(TINY_STUDY.parent)] == mounts[str(registry)] == mounts[str(REPO_ROOT)] == "ro"
    assert "DOCKER_HOST" in context.env_vars and f"PYTHONPATH={REPO_ROOT}" in context.env_vars
    assert not any(key in os.environ for key in KEYS)
    assert engine_socket(None) == "/var/run/docker.sock" and engine_socket("tcp://10.0.0.1:2375") is None
