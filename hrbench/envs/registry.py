"""Environment backends by name: a study's trials run on whichever backend is registered as asked.

`local` (bubblewrap sandboxes, envs/local/) and `docker` (any Docker-API engine, envs/docker/)
are registered here; another backend registers beside them with `register_backend` and is then
chosen by name, never by class.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from pydantic import BaseModel, ConfigDict

from hrbench.envs.base import Backend
from hrbench.envs.local import LocalBackend


class BackendOptions(BaseModel):
    """What every backend is built from: its snapshot cache and the sandbox limits of the study."""

    model_config = ConfigDict(frozen=True)
    cache_dir: Path
    memory_mb: int = 1024


BackendFactory = Callable[[BackendOptions], Backend]
_BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make a backend available by name (a second registration of a name is a programming error)."""
    if name in _BACKENDS:
        raise ValueError(f"environment backend {name!r} is registered twice")
    _BACKENDS[name] = factory


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def make_backend(name: str, options: BackendOptions) -> Backend:
    """The backend registered as `name`, built for one study's output directory."""
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"no environment backend {name!r}; registered: {backend_names()}") from None
    return factory(options)


def _local(options: BackendOptions) -> Backend:
    return LocalBackend(cache_dir=options.cache_dir, memory_mb=options.memory_mb)


register_backend("local", _local)


def _docker(options: BackendOptions) -> Backend:
    # Imported on use: the docker SDK and an engine are needed only by studies that ask for them.
    from hrbench.envs.docker import DockerBackend

    return DockerBackend(cache_dir=options.cache_dir, memory_mb=options.memory_mb)


register_backend("docker", _docker)
