"""Environment backends by name: a study's trials run on whichever backend is registered as asked.

`local` (bubblewrap sandboxes, envs/local/) and `docker` (any Docker-API engine, envs/docker/)
are registered here; another backend registers beside them with `register_backend` and is then
chosen by name, never by class. A study names one in its `backend` setting, or `auto`: each task on
`docker` when the local backend cannot run it, on `local` otherwise (`TaskBackends`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from pydantic import BaseModel, ConfigDict

from hrbench.envs.base import Backend, Environment
from hrbench.tasks.model import Task
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


AUTO = "auto"  # a study's `backend: auto`: every task where it can run (`backend_for_task`)


def backend_choices() -> list[str]:
    """What a study's `backend` (and a command's `--backend`) may say: a registered name, or `auto`."""
    return [*backend_names(), AUTO]


def backend_for_task(choice: str, task: Task) -> str:
    """The backend a task runs on under a study's `backend` choice: `auto` sends a task the local backend
    cannot run (`Task.docker_only`) to `docker` and every other task to `local`; a named backend runs all."""
    if choice != AUTO:
        return choice
    return "docker" if task.docker_only else "local"


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


class TaskBackends:
    """The backends of one study (or one command): each task on the one its `choice` gives it.

    A Backend itself, routing every call by task, so a study with `backend: auto` runs its trials,
    audit and depth runs through one object. Each backend is built on first use: a study whose tasks
    all run on local never needs a docker engine."""

    def __init__(self, choice: str, options: BackendOptions):
        if choice not in backend_choices():
            raise ValueError(f"no environment backend {choice!r}; choose from {backend_choices()}")
        self.name = choice
        self.options = options
        self._built: dict[str, Backend] = {}

    def for_task(self, task: Task) -> Backend:
        name = backend_for_task(self.name, task)
        if name not in self._built:
            self._built[name] = make_backend(name, self.options)
        return self._built[name]

    def check(self, tasks: Iterable[Task]) -> None:
        """Raise SandboxError, before any trial, when a task's backend cannot run it (a docker-only task on
        local, no reachable engine for docker: one line saying what to start)."""
        for task in tasks:
            self.for_task(task).check_supported(task)

    def saves_agent_states_for(self, task: Task) -> bool:
        return self.for_task(task).saves_agent_states

    def check_supported(self, task: Task) -> None:
        self.for_task(task).check_supported(task)

    def start(self, task: Task, stages_done: int = 0, state: str | None = None) -> Environment:
        return self.for_task(task).start(task, stages_done, state)

    def save_state(self, env: Environment, state: str) -> None:
        self.for_task(env.task).save_state(env, state)

    def restore(self, env: Environment, stages_done: int) -> None:
        self.for_task(env.task).restore(env, stages_done)


def task_backend(backend: Backend, task: Task) -> Backend:
    """The backend that runs `task` itself: a study's TaskBackends routes each task to its own (`auto`);
    any other backend runs every task. What a cache keyed on the sandbox (audit, depth) must name."""
    return backend.for_task(task) if isinstance(backend, TaskBackends) else backend
