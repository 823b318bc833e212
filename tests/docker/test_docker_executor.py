"""Scale-out: a study's trial steps under dagster-docker's docker_executor (one podman container per step)
give the same trials and the same residual table as the in-process run of the same study."""

from __future__ import annotations

from pathlib import Path

import subprocess

import docker
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance

from pipelines.defs.study.executor import STEP_LABEL, TRIAL_JOBS, ExecutorSettings
from pipelines.materialize import instance_for, run_study
from tests.docker.conftest import REPO
from hrbench.catalogue import StudyNames
from tests.conftest import FIXTURES, stored_keys, stored_table

EXECUTOR = StudyNames.of("executor")  # the Dagster names of the study below

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
    """The step containers' image, built by the project's script (about 15 s the first time, then < 1 s)."""
    subprocess.run([str(REPO / "scripts" / "executor_image.sh")], check=True, timeout=1200)
    return ExecutorSettings().image


@pytest.fixture(scope="module")
def in_containers(study: Path, docker_host: str, executor_image: str, tmp_path_factory):
    """The same study with HRBENCH_EXECUTOR=docker; yields (OUT, its instance, the step containers' records)."""
    out = tmp_path_factory.mktemp("docker-executor")
    client = docker.DockerClient(base_url=docker_host)
    mine = f"{STEP_LABEL}={out.resolve()}"  # this run's step containers, not another session's on the engine
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("HRBENCH_EXECUTOR", "docker")
            env.setenv("DOCKER_HOST", docker_host)
            env.delenv("DAGSTER_HOME", raising=False)  # the instance under OUT/.dagster, which the steps see
            instance = instance_for(out)
            run_study(study, out, instance=instance, progress=False)
        containers = client.containers.list(all=True, filters={"label": mine})
        yield out, instance, {c.id: {"exit": c.attrs["State"]["ExitCode"], "env": c.attrs["Config"]["Env"]}
                              for c in containers}
    finally:
        for c in client.containers.list(all=True, filters={"label": mine}):
            c.remove(force=True)


def _worker_containers(instance: DagsterInstance, job: str) -> dict[str, str]:
    """Each step of the job's run and the container its worker was launched in (the executor's event)."""
    runs = [r for r in instance.get_runs() if r.job_name == EXECUTOR.name(job)]
    assert len(runs) == 1, f"{job}: {len(runs)} runs"
    run = runs[0]
    events = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.STEP_WORKER_STARTING).records
    return {e.event_log_entry.step_key: e.event_log_entry.dagster_event.event_specific_data.metadata["Docker container id"].value
            for e in events}


def test_trial_steps_ran_one_container_each(in_containers):
    out, instance, records = in_containers
    for job in TRIAL_JOBS:
        steps = _worker_containers(instance, job)
        run = next(r for r in instance.get_runs() if r.job_name == EXECUTOR.name(job))
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


def test_step_containers_leave_no_cgroups_on_the_host(in_containers):
    """The trial cgroups are children of a step container's own: every one is gone with the container."""
    _, _, records = in_containers
    assert records
    left = [p for c in records for p in Path("/sys/fs/cgroup").glob(f"*/libpod_parent/libpod-{c}*")]
    assert not left, left


def test_executor_setting_selects_the_trial_steps_executor(study: Path, tmp_path: Path, monkeypatch):
    from pipelines.builder import build_definitions

    monkeypatch.setenv("HRBENCH_EXECUTOR", "docker")
    defs = build_definitions(study, tmp_path, executor=ExecutorSettings.from_env())
    executors = {job.name: job.executor_def.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__")}
    trial_jobs = {EXECUTOR.name(j) for j in TRIAL_JOBS}
    assert {executors[j] for j in trial_jobs} == {"hrbench_docker_executor"}
    assert len(executors) == 8 and {e for j, e in executors.items() if j not in trial_jobs} == {"in_process"}
    monkeypatch.delenv("HRBENCH_EXECUTOR")
    defs = build_definitions(study, tmp_path, executor=ExecutorSettings.from_env())
    assert {job.executor_def.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__")} == {"in_process"}
    monkeypatch.setenv("HRBENCH_EXECUTOR", "celery")  # k8s is one now (deploy/k8s)
    with pytest.raises(ValueError, match="HRBENCH_EXECUTOR='celery' is not an executor hrbench knows: use in_process"):
        ExecutorSettings.from_env()


def test_step_mounts_are_the_same_paths_and_read_only_but_out(study: Path, tmp_path: Path):
    from pipelines.defs.study.executor import REPO_ROOT, docker_executor_config

    config = docker_executor_config(ExecutorSettings(kind="docker"), study, FIXTURES / "registry", tmp_path)
    volumes = config["container_kwargs"]["volumes"]
    assert all(v["bind"] == host for host, v in volumes.items())
    writable = {host for host, v in volumes.items() if v["mode"] == "rw"}
    assert writable == {str(tmp_path.resolve()), "/sys/fs/cgroup"}
    assert {str(REPO_ROOT), str(study.parent)} <= set(volumes)
    assert f"PYTHONPATH={REPO_ROOT}" in config["env_vars"]
    assert config["container_kwargs"]["labels"] == {STEP_LABEL: str(tmp_path.resolve())}


def test_docker_run_launcher_instance_differs_only_in_its_launcher(tmp_path: Path, monkeypatch):
    """deploy/dagster-docker.yaml validates against the launcher's schema and is deploy/dagster.yaml otherwise."""
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster_docker import DockerRunLauncher

    plain = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    text = (REPO / "deploy" / "dagster-docker.yaml").read_text()
    docker_yaml = yaml.safe_load(text)
    launcher = docker_yaml.pop("run_launcher")
    plain.pop("run_launcher")
    assert docker_yaml == plain
    assert launcher["module"] == "dagster_docker" and launcher["class"] == "DockerRunLauncher"
    checked = process_config(DockerRunLauncher.config_type(), launcher["config"])
    assert checked.success, checked.errors
    DockerRunLauncher(**checked.value)  # its own checks (no `network` in container_kwargs, ...)
    (tmp_path / "dagster.yaml").write_text(text)
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql+psycopg2://dagster@127.0.0.1:1/dagster")
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_launcher"]["class"] == "DockerRunLauncher"
