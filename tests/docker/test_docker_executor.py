"""Scale-out: a study's trial steps under dagster-docker's docker_executor (one podman container per step), on a
team instance whose runs the daemon launches in containers (deploy/dagster-docker.yaml as shipped, PostgreSQL, the
store on moto's S3), give the same trials and the same residual table as the in-process run of the same study."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import docker
import pandas as pd
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter
from dagster._core.storage.tags import DOCKER_IMAGE_TAG
from dagster_docker.docker_run_launcher import DOCKER_CONTAINER_ID_TAG

from hrbench.catalogue import CHECKPOINT, CHECKPOINT_TRIALS, REGISTRATION, SETUP, StudyNames
from hrbench.lineage import check_problems
from hrbench.storage import Store, store_for
from pipelines.defs.study.executor import STEP_LABEL, TRIAL_JOBS, ExecutorSettings
from pipelines.materialize import launch_step, run_study
from tests.conftest import FIXTURES, stored_keys, stored_table
from tests.docker.conftest import REPO

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


class Launched(NamedTuple):
    """The study run with the docker executor on a team instance: OUT, the instance, the step containers'
    records (by id), the checkpoint run (launched through the run launcher), its run container's record, the
    study's store (moto's S3)."""

    out: Path
    instance: DagsterInstance
    records: dict[str, dict]
    checkpoint: DagsterRun
    run_container: dict
    store: Store


def _record(container) -> dict:
    return {"exit": container.attrs["State"]["ExitCode"], "env": container.attrs["Config"]["Env"],
            "image": container.attrs["Config"]["Image"], "mounts": {m["Destination"]: m["RW"] for m in
                                                                    container.attrs["Mounts"]}}


@pytest.fixture(scope="module")
def in_containers(study: Path, docker_host: str, executor_image: str, moto_s3, postgres_url: str, tmp_path_factory):
    """The same study with HRBENCH_EXECUTOR=docker on an instance made of deploy/dagster-docker.yaml as shipped
    (PostgreSQL; each run in a container of SamePathsDockerRunLauncher), its store on moto's S3 and its settings in
    $DAGSTER_HOME/hrbench.yaml: the setup and the registration run here; the daemon's agent sensor requests the
    checkpoint trials, which the daemon launches in a run container whose docker executor starts a container per
    step; the rest runs as `hrbench run` resumes a study (the natural trials under the docker executor from here)."""
    root = tmp_path_factory.mktemp("docker-executor")
    out, home = root / "out", root / "dagster-home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster-docker.yaml", home / "dagster.yaml")  # as shipped: no path to rewrite
    endpoint, bucket = moto_s3
    settings = {"HRBENCH_STUDY": str(study), "HRBENCH_OUT": str(out), "HRBENCH_EXECUTOR": "docker",
                "HRBENCH_STORE": "s3", "HRBENCH_S3_ENDPOINT_URL": endpoint, "HRBENCH_S3_BUCKET": bucket,
                "HRBENCH_S3_PREFIX": f"run-launcher-{uuid.uuid4().hex[:8]}/{{out}}",
                # the agent sensor ticks once while the daemon runs: it requests the checkpoint step, nothing after
                "HRBENCH_SENSOR_INTERVAL": "3600"}
    (home / "hrbench.yaml").write_text(yaml.safe_dump(settings))
    instance_env = {"DAGSTER_HOME": str(home), "DAGSTER_PG_URL": postgres_url, "DOCKER_HOST": docker_host}
    client = docker.DockerClient(base_url=docker_host)
    daemon, log, instance = None, root / "daemon.log", None
    try:
        with pytest.MonkeyPatch.context() as env:
            for key, value in {**settings, **instance_env}.items():
                env.setenv(key, value)
            instance = DagsterInstance.get()
            instance.add_dynamic_partitions(EXECUTOR.agents, ["rotting"])
            tags = {"hrbench/study": "executor"}
            launch_step(instance, EXECUTOR.name(SETUP), tags, study, out)
            launch_step(instance, EXECUTOR.name(REGISTRATION), {**tags, "dagster/partition": "rotting",
                                                                "hrbench/agent": "rotting"}, study, out)
            # the daemon reads hrbench's settings from $DAGSTER_HOME/hrbench.yaml only, as a deployment's does
            daemon_env = {**{k: v for k, v in os.environ.items() if not k.startswith("HRBENCH_")},
                          "PYTHONPATH": str(REPO)}
            with open(log, "w") as sink:
                daemon = subprocess.Popen([str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w",
                                           str(REPO / "workspace.yaml")], cwd=REPO, env=daemon_env, stdout=sink,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            checkpoint = _finished_run(instance, EXECUTOR.name(CHECKPOINT), daemon, log)
            _stop(daemon)
            assert checkpoint.status == DagsterRunStatus.SUCCESS, log.read_text()[-5000:]
            run_container = _record(client.containers.get(checkpoint.tags[DOCKER_CONTAINER_ID_TAG]))
            run_study(study, out, instance=instance, progress=False)  # the steps left, as `hrbench run` resumes
            store = store_for(out)
        containers = client.containers.list(all=True, filters={"label": f"{STEP_LABEL}={out.resolve()}"})
        yield Launched(out, instance, {c.id: _record(c) for c in containers}, checkpoint, run_container, store)
    finally:
        if daemon is not None:
            _stop(daemon)
        for c in client.containers.list(all=True, filters={"label": f"{STEP_LABEL}={out.resolve()}"}):
            c.remove(force=True)
        for run in instance.get_runs() if instance is not None else []:  # the run containers
            for c in client.containers.list(all=True, filters={"label": f"dagster/run_id={run.run_id}"}):
                c.remove(force=True)


def _finished_run(instance: DagsterInstance, job: str, daemon: subprocess.Popen, log: Path) -> DagsterRun:
    """The first run of `job` once it finished (the daemon's sensor requests it; 20 minutes at most)."""
    deadline = time.monotonic() + 1200
    while True:
        runs = instance.get_runs(RunsFilter(job_name=job))
        if runs and runs[-1].status in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
            return runs[-1]
        assert daemon.poll() is None, "the daemon exited\n" + log.read_text()[-5000:]
        assert time.monotonic() < deadline, f"{job}: {[r.status for r in runs]}\n" + log.read_text()[-5000:]
        time.sleep(2)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process group (the daemon and the code server it started), SIGKILL after 30 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _worker_containers(instance: DagsterInstance, job: str) -> dict[str, str]:
    """Each step of the job's run and the container its worker was launched in (the executor's event)."""
    runs = [r for r in instance.get_runs() if r.job_name == EXECUTOR.name(job)]
    assert len(runs) == 1, f"{job}: {len(runs)} runs"
    run = runs[0]
    events = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.STEP_WORKER_STARTING).records
    return {e.event_log_entry.step_key: e.event_log_entry.dagster_event.event_specific_data.metadata["Docker container id"].value
            for e in events}


def test_trial_steps_ran_one_container_each(in_containers):
    instance, records = in_containers.instance, in_containers.records
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
    instance = in_containers.instance
    assert _worker_containers(instance, "expected_success_job") == {}


def _table(store: Store, key: str) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(store.get(key)))


def test_same_trials_as_in_process(in_process: Path, in_containers):
    store = in_containers.store
    for folder in ("tables/checkpoint_trials", "tables/baseline/natural_trials"):
        keys = stored_keys(in_process, folder)
        assert keys and keys == store.list(folder)
        for key in keys:
            a, b = stored_table(in_process, key), _table(store, key)
            assert len(a) > 0
            columns = TRIAL_KEY + TRIAL_OUTCOME
            expected = a[columns].sort_values(TRIAL_KEY).reset_index(drop=True)
            got = b[columns].sort_values(TRIAL_KEY).reset_index(drop=True)
            assert expected.equals(got), key


def test_same_residual_table_as_in_process(in_process: Path, in_containers):
    key = "tables/baseline/horizon_residuals/rotting.parquet"
    a, b = stored_table(in_process, key), _table(in_containers.store, key)
    assert len(a) > 0 and a.equals(b)


def test_the_daemon_launched_the_checkpoint_step_in_a_run_container(in_containers, docker_host: str):
    """The agent sensor's run of the checkpoint step, launched by the shipped instance's run launcher: a container of
    the executor image that saw the deployment at its own paths and the engine's socket (its step containers not
    the socket), exited 0, and whose docker executor wrote the step's tables to the bucket, their checks passed."""
    run, container, store = in_containers.checkpoint, in_containers.run_container, in_containers.store
    assert run.tags.get("dagster/sensor_name") == EXECUTOR.name("agent_files_sensor")  # requested in the daemon
    assert run.tags[DOCKER_IMAGE_TAG] == ExecutorSettings().image and container["image"].endswith(ExecutorSettings().image)
    assert container["exit"] == 0
    socket = docker_host.removeprefix("unix://")
    home = dict(e.split("=", 1) for e in container["env"])["DAGSTER_HOME"]
    read_write = {str(in_containers.out.resolve()): True, home: True, socket: True, str(REPO): False}
    assert {path: container["mounts"].get(path) for path in read_write} == read_write
    assert in_containers.records and not any(socket in r["mounts"] for r in in_containers.records.values())
    keys = store.list("tables/checkpoint_trials")
    assert keys and not (in_containers.out / "tables").exists()  # in the bucket, not on the host's disk
    for key in keys:
        assert not check_problems(store, CHECKPOINT_TRIALS.name, ("rotting", Path(key).stem)), key


def test_step_containers_leave_no_cgroups_on_the_host(in_containers):
    """The trial cgroups are children of a step container's own: every one is gone with the container."""
    records = in_containers.records
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
    """deploy/dagster-docker.yaml validates against the launcher's schema, names no path of a host (the launcher
    finds them: pipelines/docker_launcher.py) and is deploy/dagster.yaml otherwise."""
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config

    from pipelines.docker_launcher import SamePathsDockerRunLauncher

    plain = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    text = (REPO / "deploy" / "dagster-docker.yaml").read_text()
    docker_yaml = yaml.safe_load(text)
    launcher = docker_yaml.pop("run_launcher")
    plain.pop("run_launcher")
    assert docker_yaml == plain
    assert launcher["module"] == "pipelines.docker_launcher" and launcher["class"] == "SamePathsDockerRunLauncher"
    assert "volumes" not in launcher["config"]["container_kwargs"] and "/srv" not in text
    checked = process_config(SamePathsDockerRunLauncher.config_type(), launcher["config"])
    assert checked.success, checked.errors
    SamePathsDockerRunLauncher(**checked.value)  # its own checks (no `network` in container_kwargs, ...)
    (tmp_path / "dagster.yaml").write_text(text)
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql+psycopg2://dagster@127.0.0.1:1/dagster")
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_launcher"]["class"] == "SamePathsDockerRunLauncher"
