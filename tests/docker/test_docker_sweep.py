"""Protects the docker backend's sweep (hrbench/envs/docker/owners.py): the containers of a harness killed with
them alive are removed by the next backend on the engine; those of live owners, of another boot or pid namespace,
and containers without the owner label are never touched."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pytest

from hrbench.envs.docker import OWNER_LABEL, DockerBackend, owners
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.slow  # podman, containers

# A harness that starts a trial, says which container and owner label, and waits to be killed.
HARNESS = """
import sys
from pathlib import Path
from hrbench.envs.docker import DockerBackend
from hrbench.tasks.loader import load_task

backend = DockerBackend(Path(sys.argv[1]), docker_host=sys.argv[2], memory_mb=512)
env = backend.start(load_task(Path(sys.argv[3])), 0)
print(env.container_id, backend.owner, flush=True)
sys.stdin.read()
"""


def test_the_containers_of_a_killed_harness_are_swept_by_the_next_backend(backend: DockerBackend, monkeypatch,
                                                                          caplog):
    backend.checkpoint_state(load_task(TINY_TASK), 0)  # built here: the harness only starts a container
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(backend.cache_dir), backend.docker_host,
                                str(TINY_TASK)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = harness.stdout.readline().split()
    harness.kill()
    harness.wait()
    assert len(line) == 2, "the harness did not start its trial"
    orphan, label = line
    boot, namespace, pid, started, token = label.split(".")
    client = backend.client
    made = [orphan]

    def container(labels: dict[str, str], name: str | None = None) -> str:
        made.append(client.api.create_container(backend.base_image, ["true"], labels=labels, name=name)["Id"])
        return made[-1]

    try:
        keep = {
            container({}, f"{owners.CONTAINER_PREFIX}{token}-unlabelled"),  # not ours
            container({OWNER_LABEL: owners.owner_label("live")}, f"{owners.CONTAINER_PREFIX}{token}-live"),
            # the dead harness's pid, judged by another host or pid namespace, means nothing here
            container({OWNER_LABEL: f"{'0' * len(boot)}.{namespace}.{pid}.{started}.{token}"},
                      f"{owners.CONTAINER_PREFIX}{token}-elsewhere"),
            container({OWNER_LABEL: f"{boot}.0.{pid}.{started}.{token}"}, f"{owners.CONTAINER_PREFIX}{token}-other-ns"),
            # the dead harness's label, on a container a backend did not make (it inherits the labels of a
            # state image committed by that harness)
            container({OWNER_LABEL: label}),
        }
        # this process's pid with another start time: a process that held the pid before this one, gone
        reused = container({OWNER_LABEL: f"{boot}.{namespace}.{os.getpid()}.0.{token}"},
                           f"{owners.CONTAINER_PREFIX}{token}-reused")
        monkeypatch.setattr(owners, "_swept", set())  # as in a new process
        with caplog.at_level(logging.WARNING, logger=owners.__name__):
            DockerBackend(backend.cache_dir, docker_host=backend.docker_host).client  # noqa: B018 - sweeps
        left = {c.id for c in client.containers.list(all=True)}
        assert orphan not in left and reused not in left
        assert keep <= left
        removed = re.search(r"removed (\d+) container\(s\) left on", caplog.text)
        assert removed and int(removed.group(1)) >= 2, caplog.text
    finally:
        for made_id in made:
            backend.remove_container(made_id)
