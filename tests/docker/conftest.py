"""The docker suite's engine: podman's Docker API on a socket of this session, set up by the project's script.

Every test here is `slow` (each module's pytestmark) (image builds, containers): scripts/test.sh runs them with `-m slow`.
`scripts/podman.sh setup` is idempotent (a fraction of a second once the base image exists)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from hrbench.envs.docker import LABEL, OWNER_LABEL, DockerBackend

REPO = Path(__file__).resolve().parents[2]
PODMAN_SH = REPO / "scripts" / "podman.sh"
DOCKER_FIXTURES = REPO / "tests" / "fixtures" / "docker-registry"


def _conf() -> str:
    line = subprocess.run([str(PODMAN_SH), "env"], capture_output=True, text=True, check=True).stdout
    return line.split("CONTAINERS_CONF=")[1].split()[0]


@pytest.fixture(scope="session")
def docker_host(tmp_path_factory) -> str:
    """`podman system service` on a socket under a tmp dir, for the session; stopped at its end."""
    subprocess.run([str(PODMAN_SH), "setup"], check=True, timeout=1200)
    sock = tmp_path_factory.mktemp("podman") / "podman.sock"
    env = {**os.environ, "CONTAINERS_CONF": _conf()}
    # cwd: conmon writes an empty file `oom` into the service's working directory when a container's
    # process is OOM-killed (the memory tests do that), which would litter the repository
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"], env=env,
                               cwd=sock.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    host = f"unix://{sock}"
    import docker
    import requests

    for _ in range(200):
        try:
            docker.DockerClient(base_url=host).ping()
            break
        except (docker.errors.DockerException, requests.ConnectionError):
            if service.poll() is not None:
                raise RuntimeError(f"podman system service exited: {service.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
    yield host
    service.terminate()
    service.wait(timeout=30)


@pytest.fixture(scope="session")
def backend(docker_host: str, tmp_path_factory) -> DockerBackend:
    """One backend for the session: its oracle-state images are built once and shared by the tests."""
    return DockerBackend(tmp_path_factory.mktemp("docker-cache"), docker_host=docker_host, memory_mb=512)


def hrbench_containers(backend: DockerBackend, task: str | None = None) -> list[str]:
    """Ids of every container (running or not) this backend made (of `task`, when given): the engine is
    shared, and other processes' containers are not this suite's to count."""
    labels = [f"{OWNER_LABEL}={backend.owner}"] + ([f"{LABEL}={task}"] if task else [])
    return [c.id for c in backend.client.containers.list(all=True, filters={"label": labels})]
