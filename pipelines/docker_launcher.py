"""The run launcher of a team host that runs each run in a container: dagster-docker's DockerRunLauncher, plus the
deployment mounted at the paths it has on the host, found when a run is launched.

deploy/dagster-docker.yaml used to list those mounts (`/srv/hrbench/...`), to be rewritten by hand for each host.
This launcher adds them to every run container from what the deployment already says: the code and the virtualenv
the launching process runs from, the study and output directory of $DAGSTER_HOME/hrbench.yaml (or of the
environment), DAGSTER_HOME, and the engine's socket (DOCKER_HOST), through which the run starts the trial steps'
containers (HRBENCH_EXECUTOR=docker). The mounts are the docker executor's (pipelines/defs/study/executor.py),
plus the socket. dagster-docker's executor builds a step container from the launcher's configuration, not from
these additions, so a step container still gets no socket.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterRun
from dagster_docker import DockerRunLauncher
from dagster_docker.container_context import DockerContainerContext

from hrbench.protocol import load_study
from pipelines.definitions import study_and_out
from pipelines.defs.study.executor import REPO_ROOT, same_path_environment, same_path_volumes
from pipelines.settings import read_settings, settings_file

DEFAULT_SOCKET = "/var/run/docker.sock"  # the engine docker's client uses when DOCKER_HOST is unset


class SamePathsDockerRunLauncher(DockerRunLauncher):
    """DockerRunLauncher whose run containers see the deployment at the host's paths, with the engine's socket."""

    def get_container_context(self, dagster_run: DagsterRun) -> DockerContainerContext:
        configured = super().get_container_context(dagster_run)
        return configured.merge(deployment_container_context(configured.container_kwargs.get("volumes")))


def deployment_container_context(configured_volumes: list | dict | None = None) -> DockerContainerContext:
    """The mounts (after the instance file's own `configured_volumes`) and environment of a run container, from this
    process's environment and $DAGSTER_HOME/hrbench.yaml."""
    path = settings_file()
    settings = {**(read_settings(path) if path else {}), **os.environ}
    study_file, out = study_and_out(settings)
    loaded = load_study(study_file)
    volumes = same_path_volumes(loaded.source, loaded.registry, Path(out))
    socket = engine_socket(os.environ.get("DOCKER_HOST"))
    if socket:
        volumes[socket] = {"bind": socket, "mode": "rw"}
    environment = same_path_environment() + (["DOCKER_HOST"] if os.environ.get("DOCKER_HOST") else [])
    return DockerContainerContext(env_vars=environment, container_kwargs={
        "volumes": _merged_volumes(configured_volumes, volumes), "working_dir": str(REPO_ROOT)})


def engine_socket(docker_host: str | None) -> str | None:
    """The engine's unix socket on this host (DOCKER_HOST's, or docker's default); None for a TCP engine."""
    if not docker_host:
        return DEFAULT_SOCKET
    return docker_host.removeprefix("unix://") if docker_host.startswith("unix://") else None


def _merged_volumes(configured: list | dict | None, deployment: dict[str, dict[str, str]]) -> list | dict:
    """The instance file's own volumes (docker's list or mapping form), then the deployment's."""
    if isinstance(configured, list):
        return [*configured, *(f"{host}:{v['bind']}:{v['mode']}" for host, v in deployment.items())]
    return {**(configured or {}), **deployment}
