"""The docker suite's engine: podman's Docker API on a socket of this session, set up by the project's script.

Every test here is `slow` (each module's pytestmark) (image builds, containers): scripts/test.sh runs them with `-m slow`.
`scripts/podman.sh setup` is idempotent (a fraction of a second once the base image exists)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from hrbench.envs.docker import LABEL, OWNER_LABEL, DockerBackend, DockerEnvironment

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


# An agent that holds every process slot of its container and keeps it so: it fills the container with sleepers
# until a fork is refused, marks that in /tmp, then takes back every slot freed (its own command's too) for as
# long as it lives. It runs detached (its own session, stdio closed), so the command that starts it returns once
# the mark is there; nothing it holds ever exits, so no process can start in the container afterwards.
EXHAUST_PROCESSES = """python3 - <<'PY'
import os, subprocess, time
if os.fork():
    os._exit(0)
os.setsid()
null = os.open("/dev/null", os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
marked = False
while True:
    try:
        subprocess.Popen(["sleep", "600"])
    except OSError:
        if not marked:
            open("/tmp/exhausted", "w").close()
            marked = True
        time.sleep(0.001)
PY
while [ ! -e /tmp/exhausted ]; do :; done"""


def exhaust_processes(environment: DockerEnvironment) -> None:
    """Run EXHAUST_PROCESSES in `environment` and wait until the slots its command freed are taken back."""
    started = environment.exec(EXHAUST_PROCESSES, 60)
    assert started.exit_code == 0 and not started.timed_out, started.output
    time.sleep(1)  # the forker retakes a freed slot within milliseconds
