"""Scale-out: a study's trial steps under dagster-docker's docker_executor (one podman container per step)
give the same trials and the same residual table as the in-process run of the same study."""

from __future__ import annotations

from pathlib import Path

import subprocess

import docker
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

from pipelines.defs.study.executor import STEP_LABEL, TRIAL_JOBS, ExecutorSettings
from pipelines.materialize import instance_for, run_study
from tests.docker.conftest import REPO
from tests.conftest import FIXTURES, stored_keys, stored_table

pytestmark = pytest.mark.slow

TRIAL_KEY = ["trial_key", "agent", "condition", "protocol", "task", "kind", "stage", "trial_index"]
TRIAL_OUTCOME = ["passed", "stages_passed", "stopped_stage", "exit_reason", "rewards_json"]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """One sim agent over the fixture task, few trials: each trial still runs in a real sandbox."""
    path = tmp_path_factory.mktemp("executor-study") / "study.yaml"
    path.write_text(yaml.safe_dump({
        "name": "executor", "description": "The docker executor's study.",
        "tasks": {"registry": str(FIXTURES / "registry")},
        "agents": [{"id": "rotting", "kind": "sim",
                    "sim": {"skill": 0.9, "context_rot": 0.2, "defect_rate": 0.3, "defect_penalty": 0.3}}],
        "trials": {"checkpoint": 4, "natural": 8}, "bootstrap": {"n_boot": 200, "seed": 1}}))
    return path


@pytest.fixture(scope="module")
def in_process(study: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("in-process")
    run_study(study, out, instance=DagsterInstance.ephemeral(), progress=False)
    return out


@pytest.fixture(scope="module")
def executor_image(docker_host: str) -> str:
    """The step containers' image, built by the project's script (about 3 min the first time, then < 1 s)."""
    subprocess.run([str(REPO / "scripts" / "executor_image.sh")], check=True, timeout=1200)
    return ExecutorSettings().image


@pytest.fixture(scope="module")
def in_containers(study: Path, docker_host: str, executor_image: str, tmp_path_factory):
    """The same study with HRBENCH_EXECUTOR=docker; yields (OUT, its instance, the step containers' records)."""
    out = tmp_path_factory.mktemp("docker-executor")
    client = docker.DockerClient(base_url=docker_host)
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("HRBENCH_EXECUTOR", "docker")
            env.setenv("DOCKER_HOST", docker_host)
            env.delenv("DAGSTER_HOME", raising=False)  # the instance under OUT/.dagster, which the steps see
            instance = instance_for(out)
            run_study(study, out, instance=instance, progress=False)
        containers = client.containers.list(all=True, filters={"label": STEP_LABEL})
        yield out, instance, {c.id: {"exit": c.attrs["State"]["ExitCode"], "env": c.attrs["Config"]["Env"]}
                              for c in containers}
    finally:
        for c in client.containers.list(all=True, filters={"label": STEP_LABEL}):
            c.remove(force=True)


def _worker_containers(instance: DagsterInstance, job: str) -> dict[str, str]:
    """Each step of the job's run and the container its worker was launched in (the executor's event)."""
    runs = [r for r in instance.get_runs() if r.job_name == job]
    assert len(runs) == 1, f"{job}: {len(runs)} runs"
    run = runs[0]
    events = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.STEP_WORKER_STARTING).records
    return {e.event_log_entry.step_key: e.event_log_entry.dagster_event.event_specific_data.metadata["Docker container id"].value
            for e in events}


def test_trial_steps_ran_one_container_each(in_containers):
    out, instance, records = in_containers
    for job in TRIAL_JOBS:
        steps = _worker_containers(instance, job)
        run = next(r for r in instance.get_runs() if r.job_name == job)
        executed = {e.event_log_entry.step_key for e in
                    instance.get_records_for_run(run.run_id, of_type=DagsterEventType.STEP_SUCCESS).records}
        assert executed and set(steps) == executed, f"{job}: steps {executed}, in containers {set(steps)}"
        assert len(set(steps.values())) == len(steps), "a container per step"
        for step, container in steps.items():
            assert records[container]["exit"] == 0, (step, records[container])
            assert f"DAGSTER_RUN_STEP_KEY={step}" in records[container]["env"]


def test_other_steps_stay_in_process(in_containers):
    _, instance, _ = in_containers
    assert _worker_containers(instance, "expected_success_job") == {}


def test_same_trials_as_in_process(in_process: Path, in_containers):
    out = in_containers[0]
    for folder in ("tables/checkpoint_trials", "tables/baseline/natural_trials"):
        keys = stored_keys(in_process, folder)
        assert keys and keys == stored_keys(out, folder)
        for key in keys:
            a, b = stored_table(in_process, key), stored_table(out, key)
            assert len(a) > 0
            columns = TRIAL_KEY + TRIAL_OUTCOME
            expected = a[columns].sort_values(TRIAL_KEY).reset_index(drop=True)
            got = b[columns].sort_values(TRIAL_KEY).reset_index(drop=True)
            assert expected.equals(got), key


def test_same_residual_table_as_in_process(in_process: Path, in_containers):
    out = in_containers[0]
    key = "tables/baseline/horizon_residuals/rotting.parquet"
    a, b = stored_table(in_process, key), stored_table(out, key)
    assert len(a) > 0 and a.equals(b)
