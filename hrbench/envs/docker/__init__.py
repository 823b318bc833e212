"""The `docker` backend: every trial a container of the task's own image, over the Docker Engine API.

Works against any Docker-compatible API (Docker, or podman's `podman system service`; the
project tests it on podman, set up by scripts/podman.sh). The image is the task's
environment/Dockerfile (FROM honoured; a FROM image the engine does not have is replaced by
the locally built base image, with a warning, because no registry is reachable here). The
oracle states e_i are images made by `docker commit`, built once per (task, stage) by
replaying sigma_1..sigma_i from e_0, as the local backend does with directories.

A trial container runs `sleep infinity` under the engine's init, with no network (unless the
task's task.toml sets `[environment] allow_internet = true`), CPU, memory (no swap) and pids
limits, a sized tmpfs /tmp, every capability dropped but the few the harness's root execs need,
no-new-privileges, and no host environment. The agent, every reference solution and the
verifier run as the unprivileged sandbox uid 47000 (or the image's own non-root USER), which
owns only the workdir. Before each verification every agent process is killed (the persistent
shells too, as with local); the stage's tests are copied in just for it and removed after; the
reward is read after the verifier and all it started are dead. Solutions are never in the image:
the build context is environment/ only, and a step's solution/ folder reaches a container only
while its replay runs (at /solution, as local mounts it). Verifications collect Harbor artifacts
as local does. docs/docker.md has the whole story and where this differs from local.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import posixpath
import re
import secrets
import shlex
import shutil
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hrbench.envs.base import (
    CHECK_LIBRARY,
    PERSIST_DIR,
    SANDBOX_PATH,
    ExecResult,
    SandboxError,
    StagedEnvironment,
    VerifierResult,
    WorkdirFile,
    backend_script,
    ready_for_first_stage,
    score_rewards,
    task_env,
)
from hrbench.envs.docker.owners import CONTAINER_PREFIX, OWNER_LABEL, owner_label, sweep_dead_owners
from hrbench.envs.shell import PersistentShell
from hrbench.harness.truncation import HeadTail
from hrbench.tasks.harbor import (
    ARTIFACTS_LIMIT_BYTES,
    ARTIFACTS_MANIFEST,
    save_artifacts,
)
from hrbench.tasks.model import Stage, Task, folder_sha256

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

DEFAULT_BASE_IMAGE = "hrbench/debian:bookworm"
AGENT_USER = "47000:47000"  # the local sandbox's uid (docs/security.md)
LABEL = "org.hrbench.env"
OUTPUT_LIMIT = 2 * 1024 * 1024  # bytes kept of one exec's output (first and last half)
# Bump when what goes into a state image changes (user, ownership, setup): old images are not reused.
STATE_RECIPE = f"3 {AGENT_USER}"
# Under the backend's cache directory: <repo>/<tag>.image holds "<tag> <image id>" of each state image,
# written when it is committed, checked at its first reuse in a process and by `hrbench verify`.
IMAGE_SEALS = "docker-states"
_ENV = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
# An explicit ulimit list replaces the engine's configured defaults, and podman then sets its built-in
# ones (2^20 open files and processes), which a host without CAP_SYS_RESOURCE refuses ("error setting
# rlimit": no container starts): the values scripts/podman.sh's containers.conf sets, here too.
_ULIMITS = {"nofile": 1024, "nproc": 1024}
_FULL_BYTES = 1 << 20  # a sized workspace with less free space than this is full (as local)
_LONG_COMMAND = 100_000  # longer commands go in as a file (one argv string is capped at 128 KiB)

# The scripts the harness runs in the container (as root unless said), files beside this module:
# what each does and its arguments are in its header.
_REAPER = backend_script(__name__, "reaper.sh")  # kill the agent's processes (all, or one shell's)
_VERIFY = backend_script(__name__, "verify.sh")  # one verification in one exec
_VERIFY_STARTED = "hrbench: verification started\n"  # verify.sh's first line: the exec did start
_SOLVE = backend_script(__name__, "solve.sh")  # Harbor's oracle, as local runs it
_TAR_PATHS = backend_script(__name__, "tar_paths.sh")  # a tar of the workdir and persisted paths
# a separate verifier's inputs: the local backend's script (its `out` mode), read as a file, not imported
_HANDOVER = backend_script("hrbench.envs.local", "handover.sh")
_WORKSPACE_GONE = ("the agent used up the container's memory until its init was killed: the container stopped, and "
                   "the workspace it left (a tmpfs) with it; the stage is not verified")
_WRAP = backend_script(__name__, "wrap.sh")  # the agent's command, bounded, its group killed after
_RELAY = backend_script(__name__, "relay.py")  # the persistent shell's host side (python -I -S)

# The container's main process. The engine's init (`init=True`: tini on Docker, catatonit on
# podman) is PID 1 and reaps the orphans an agent leaves, which would otherwise stay zombies and
# count against the pids limit; the reaper spares the main process as PID 1's oldest child.
_MAIN = ["sleep", "infinity"]


def check_image_seal(client: docker.DockerClient, record: Path, ref: str) -> tuple[str | None, str | None]:
    """(image id, None) when the engine's `ref` is the image whose id `record` holds, else (None, why).

    An image id is the sha256 of the image's configuration, which holds the sha256 of each layer's
    content (its diff_id, computed when the layer was committed): a retagged or replaced image has
    another id. (A layer edited in place inside the engine's storage is not seen: only the engine's
    root can do that.)"""
    import docker

    try:
        recorded_ref, recorded = record.read_text().split()
    except FileNotFoundError:
        return None, f"no image id recorded ({record.name} is missing)"
    except ValueError:
        return None, f"its record {record} is unreadable"
    try:
        actual = client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None, "the image is gone from the engine"
    if recorded_ref != ref or actual != recorded:
        return None, f"image {actual[7:19]} differs from the {recorded[7:19]} recorded when it was built"
    return actual, None


def sealed_state_problems(cache_dir: Path) -> Iterator[tuple[Path, str | None]]:
    """Each state image recorded under a cache directory, with what is wrong with it (None: it holds).
    For `hrbench verify`: the engine is DOCKER_HOST's (or the SDK's default)."""
    records = sorted((cache_dir / IMAGE_SEALS).glob("*/*.image"))
    if not records:
        return
    try:
        client = _client()
    except SandboxError as exc:
        for record in records:
            yield record, f"not checked: {exc}"
        return
    for record in records:
        words = record.read_text().split()
        yield record, check_image_seal(client, record, words[0] if words else "")[1]


def _sized_paths(task: Task) -> list[str]:
    """The paths a trial's container mounts as sized tmpfs: the workdir and the persisted paths outside it."""
    workdir = task.workdir.rstrip("/")
    return [workdir, *(p for p in task.persist if not (p.rstrip("/") + "/").startswith(workdir + "/"))]


def _client(docker_host: str | None = None) -> docker.DockerClient:
    import docker

    host = docker_host or os.environ.get("DOCKER_HOST")
    try:
        client = docker.DockerClient(base_url=host) if host else docker.from_env()
        client.ping()
    except Exception as exc:  # docker raises several unrelated types for "no engine"
        raise SandboxError(
            f"the docker backend cannot reach a Docker API at {host or 'the default socket'} ({exc}); "
            "start podman's with `eval \"$(scripts/podman.sh start)\"` (after `scripts/podman.sh setup`) "
            "or set DOCKER_HOST"
        ) from exc
    return client


def _tar(files: dict[str, tuple[bytes | str | None, int]]) -> bytes:
    """A tar of {path: (content, a symlink's target, or None for a directory; mode)}, owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = mode, int(time.time())
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _numeric(user: str) -> str:
    """USER as uid:gid (a name is looked up by setpriv in the container; a bare uid gets gid = uid)."""
    return user if ":" in user else f"{user}:{user}"


def _add_folder(files: dict[str, tuple[bytes | str | None, int]], root: Path, prefix: str) -> None:
    """`root`'s tree into `files` under `prefix`, as local uploads a solution/ folder: symlinks kept as
    links, directories and executables 0755, other files 0644."""
    files[prefix] = (None, 0o755)
    for path in sorted(root.rglob("*")):
        rel = f"{prefix}/{path.relative_to(root).as_posix()}"
        if path.is_symlink():
            files[rel] = (str(path.readlink()), 0o777)
        elif path.is_dir():
            files[rel] = (None, 0o755)
        else:
            files[rel] = (path.read_bytes(), 0o755 if os.access(path, os.X_OK) else 0o644)


# A read of the container's files is read-only, so it is read again when docker-py garbles its stream.
_TAR_READS = 3


def _tests_tar(task: Task, stage: Stage, top: str, nonce: str) -> bytes:
    """checks.sh, the task's shared tests, then the stage's tests (later files win), under top/tests/,
    and the nonce; top/ is root-only (0700), so the agent reads neither before the tests move to /tests."""
    files: dict[str, tuple[bytes | str | None, int]] = {top: (None, 0o700), f"{top}/tests": (None, 0o755),
                                                  f"{top}/nonce": (nonce.encode() + b"\n", 0o600)}
    files[f"{top}/tests/checks.sh"] = (CHECK_LIBRARY.read_bytes(), 0o644)
    for root in [task.shared_tests, stage.tests]:
        if root is None:
            continue
        for path in sorted(root.rglob("*")):
            rel = f"{top}/tests/" + path.relative_to(root).as_posix()
            files[rel] = (None, 0o755) if path.is_dir() else (path.read_bytes(), path.stat().st_mode & 0o777)
    return _tar(files)


def _split_verifier_output(text: str, nonce: str) -> tuple[str, dict[str, bytes], list[tuple[str, bool]], list[int]]:
    """The verifier's own output, the reward files printed after it behind `nonce` lines, the
    artifact paths found after it (each with whether it is a symlink), and what it met (verify.sh's
    `fault` line: OOM kills, refused forks, the workdir's free bytes and free inodes)."""
    parts = text.split(f"\n{nonce} ")
    files: dict[str, bytes] = {}
    artifacts: list[tuple[str, bool]] = []
    met: list[int] = []
    for part in parts[1:]:
        name, _, body = part.partition("\n")
        if name in ("reward.txt", "reward.json"):
            files[name] = body.encode("utf-8", errors="replace")
        elif name == "artifact":
            kind, _, path = body.partition(" ")
            artifacts.append((path, kind == "link"))
        elif name == "fault":  # four numbers, unless a fork in verify.sh was refused
            words = body.split()[:4]
            met = [int(word) for word in words] if all(w.lstrip("-").isdigit() for w in words) else []
    return parts[0], files, artifacts, met


class _Chunks(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the engine's archive), for tarfile's `r|`."""

    def __init__(self, chunks):
        self._chunks, self._left = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._left:
            self._left = next(self._chunks, b"")
            if not self._left:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n], self._left = self._left[:n], self._left[n:]
        return n


def _extract_bounded(chunks, dest: Path) -> set[Path]:
    """Unpack an engine archive into `dest` for save_artifacts: regular files, directories and symlinks
    (as links, never followed), fifos for anything else; a file over ARTIFACTS_LIMIT_BYTES, or past
    4x that in all, is a sparse placeholder of its size (save_artifacts never copies one over the
    limit; the returned placeholders past the total are marked over the limit after). Names that leave
    `dest` are skipped."""
    placeholders: set[Path] = set()
    used = 0
    root = dest.resolve()
    with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks), 1 << 16), mode="r|") as tar:
        for member in tar:
            target = dest / member.name
            if member.name.startswith("/") or ".." in Path(member.name).parts or \
                    not target.parent.resolve().is_relative_to(root) or target.is_symlink():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if member.isdir():
                target.mkdir(exist_ok=True)
            elif member.issym():
                target.symlink_to(member.linkname)
            elif member.isfile():
                source = tar.extractfile(member)
                with open(target, "wb") as out:
                    if member.size <= ARTIFACTS_LIMIT_BYTES and used + member.size <= 4 * ARTIFACTS_LIMIT_BYTES:
                        shutil.copyfileobj(source, out)
                        used += member.size
                    else:
                        out.truncate(member.size)
                        if member.size <= ARTIFACTS_LIMIT_BYTES:
                            placeholders.add(target)
            elif not target.exists():
                os.mkfifo(target)
    return placeholders


class DockerShell(PersistentShell):
    """PersistentShell over a `docker exec` with stdin attached (through `_RELAY`, above).

    The bash runs in the container, not below the relay process, so interrupt and close
    signal it from a root exec that finds it by the nonce on its command line."""

    def __init__(self, env: DockerEnvironment, max_pids: int):
        self._env = env
        self.shell_id = secrets.token_hex(8)
        api = env.backend.client.api
        exec_id = api.exec_create(
            # the nonce is a positional parameter so it shows in /proc/PID/cmdline, which root in the
            # container can read for any uid (environ needs CAP_SYS_PTRACE, which containers lack)
            env.container_id, ["bash", "--noprofile", "--norc", "-s", f"hrbench-shell-{self.shell_id}"],
            stdin=True, stdout=True, stderr=True, user=env.user, workdir=env.task.workdir,
            environment={**_ENV, **task_env(env.task)},
        )["Id"]
        argv = [sys.executable, "-I", "-S", "-c", _RELAY, *env.backend.api_address(),
                f"/v{api.api_version}/exec/{exec_id}/start"]
        super().__init__(argv)
        # Ready before the agent types: starting the relay and the exec takes a few tenths of a second
        # (local's shell starts at once), which must not eat the first command's wait.
        if not self.send("", 60):
            raise SandboxError(f"container {env.container_id[:12]}: the persistent shell did not start within 60 s")
        self.read()

    def interrupt(self) -> None:
        if self._env.alive:
            self._env.root_exec(_REAPER, ["tree", self.shell_id], timeout_s=30)

    def close(self) -> None:
        if self._env.alive and self.alive:
            self._env.root_exec(_REAPER, ["end", self.shell_id], timeout_s=30)
        self._release()

    def _release(self) -> None:
        """The host side only (the relay process): for a shell whose bash is already dead."""
        self._env.shells.discard(self)
        super().close()


class DockerEnvironment(StagedEnvironment):
    """One trial's container; every exec runs in it as the agent user."""

    def __init__(self, backend: DockerBackend, task: Task, container_id: str, user: str, sized: bool = True):
        self.backend = backend
        self.task = task
        self.container_id = container_id
        self.user = user
        self.sized = sized  # the workdir and persisted paths are sized tmpfs mounts (a trial's container)
        self.shells: set[DockerShell] = set()
        self.alive = True
        self.artifacts_dir: Path | None = None  # where verify() saves artifacts (per stage), when set
        self._begun: set[int] = set()  # stages whose workdir files, setup.sh and healthcheck ran

    # -- exec ------------------------------------------------------------------------------

    def _run(self, argv: list[str], user: str, timeout_s: float, env: dict[str, str] | None = None) -> ExecResult:
        """One exec with a host-side deadline (a backstop: the command's own `timeout` comes first)."""
        api = self.backend.client.api
        start = time.monotonic()
        exec_id = api.exec_create(self.container_id, argv, stdout=True, stderr=True, user=user,
                                  workdir=self.task.workdir, environment={**_ENV, **(env or {})})["Id"]
        out = HeadTail(OUTPUT_LIMIT // 2)
        stream = api.exec_start(exec_id, stream=True)

        def pump() -> None:
            import requests
            import urllib3

            try:
                for chunk in stream:
                    out.add(chunk)
            except (OSError, ValueError, requests.RequestException, urllib3.exceptions.HTTPError):
                # the connection dies when the container is removed under it, or docker-py loses the stream's
                # framing under load (docker/docker-py#3160, a ValueError): the output so far stands
                return

        reader = threading.Thread(target=pump, daemon=True, name="hrbench-docker-exec")
        reader.start()
        reader.join(timeout_s + 5)
        backstop = reader.is_alive()
        if backstop:  # something left the command's process group and holds its output open
            self._reap_all()
            reader.join(10)
        code = api.exec_inspect(exec_id).get("ExitCode")
        duration = time.monotonic() - start
        timed_out = backstop or (code in (124, 137) and duration >= timeout_s - 0.5)
        return ExecResult(exit_code=124 if timed_out else (code if code is not None else -1),
                          output=out.render(), timed_out=timed_out, duration_s=duration)

    def _script_argv(self, script: str) -> tuple[list[str], str | None]:
        """argv running `script` with bash; a long one goes in as a root-owned file first."""
        if len(script.encode()) <= _LONG_COMMAND:
            return [], script
        path = f"/run/hrbench-cmd-{secrets.token_hex(6)}.sh"
        self.backend.client.api.put_archive(self.container_id, "/run",
                                            _tar({path.removeprefix("/run/"): (script.encode(), 0o644)}))
        return [path], None

    def run_solution(self, stage: Stage, script: str | None = None) -> ExecResult:
        """Harbor's oracle, as local runs it: the step's solution/ folder at /solution and `bash
        /solution/solve.sh` run from WORKDIR (_SOLVE), so $0, BASH_SOURCE and sibling helpers work.
        `script` replaces solve.sh's text (the audit's key-step-removed variant)."""
        top = f".hrbench-solve-{secrets.token_hex(8)}"
        files: dict[str, tuple[bytes | str | None, int]] = {top: (None, 0o700)}
        _add_folder(files, stage.solution.parent, f"{top}/solution")
        if script is not None:
            files[f"{top}/solution/solve.sh"] = (script.encode(), 0o755)
        self.backend.client.api.put_archive(self.container_id, "/", _tar(files))
        timeout = stage.agent_timeout_sec or self.task.agent_timeout_sec
        result = self._run(["bash", "-c", _SOLVE, "hrbench", f"/{top}", f"{max(timeout, 0.001):.3f}",
                            _numeric(self.user)], "0", timeout,
                           task_env(self.task, self.task.solution_env, where="[solution.env]"))
        if result.exit_code == 86:
            raise SandboxError(f"container {self.container_id[:12]}: could not put the solution in place: "
                               f"{result.output[-400:]}")
        return result

    def _copy_step_files(self, stage: Stage) -> None:
        """The step's workdir/ files into WORKDIR through the engine (put_archive resolves paths in the
        container's root), then given to the agent user."""
        files: dict[str, tuple[bytes | str | None, int]] = {}
        _add_folder(files, stage.workdir_files, ".")
        self.backend.client.api.put_archive(self.container_id, self.task.workdir, _tar(files))
        done = self.root_exec('chown -R "$1" "$2"', [self.user, self.task.workdir], 60)
        if done.exit_code != 0:
            raise SandboxError(f"task {self.task.name!r}: step {stage.name!r}: giving its workdir/ files to the "
                               f"agent user failed:\n{done.output[-400:]}")

    def exec(self, command: str, timeout_s: float) -> ExecResult:
        """Run `command` with bash as the agent user, bounded by `timeout_s`, with [environment.env]."""
        return self._wrapped(command, self.user, timeout_s, task_env(self.task))

    def _wrapped(self, script: str, user: str, timeout_s: float, env: dict[str, str] | None = None) -> ExecResult:
        file, inline = self._script_argv(script)
        body = inline if inline is not None else f"bash {shlex.quote(file[0])}"
        try:
            return self._run(["bash", "-c", _WRAP, "hrbench", f"{max(timeout_s, 0.001):.3f}", body], user,
                             timeout_s, env)
        finally:
            if file:
                self.root_exec('rm -f "$1"', file, timeout_s=10)

    def root_exec(self, script: str, args: list[str], timeout_s: float) -> ExecResult:
        """A harness-side bash script as root (not the agent's), with positional arguments."""
        return self._run(["bash", "-c", script, "hrbench", *args], "0", timeout_s)

    def _reap_all(self) -> None:
        """Kill every process but the container's own (the persistent shells too)."""
        result = self.root_exec(_REAPER, ["all"], timeout_s=60)
        if result.exit_code != 0:
            raise SandboxError(f"container {self.container_id[:12]}: could not stop the agent's processes: "
                               f"{result.output[-400:]}")

    def workdir_files(self) -> dict[str, WorkdirFile]:
        """Every file and symlink of the workdir (and of the task's persisted paths, under
        PERSIST_DIR/, as local keeps them), keyed by path relative to the workdir: what the audit's
        tamper check compares on a backend without workspace directories.

        One root exec of the image's `tar` over all the paths (_TAR_PATHS): the engine's own archive
        endpoint costs several times the engine CPU of an exec per path (it mounts the container's
        root each time; measured 0.15 s against 0.025 s for an exec of all three), and the audit reads
        the files four times per stage."""
        out = self._tar_out(_TAR_PATHS, [self.task.workdir, *self.task.persist], f"reading {self.task.workdir}")
        roots = sorted([(self.task.workdir.strip("/"), ""),
                        *((p.strip("/"), f"{PERSIST_DIR}/{p.strip('/')}/") for p in self.task.persist)],
                       key=lambda root: -len(root[0]))  # the longest path that holds a member names it
        files: dict[str, WorkdirFile] = {}
        if not out.tell():
            return files
        out.seek(0)
        with tarfile.open(fileobj=out) as tar:
            for member in tar:
                name = member.name.removeprefix("./").rstrip("/")
                root, prefix = next(((r, x) for r, x in roots if name.startswith(r + "/")), (None, ""))
                if root is None:
                    continue  # a root itself
                rel = prefix + name[len(root) + 1:]
                if member.issym():
                    files[rel] = WorkdirFile(link=member.linkname, mode=member.mode)
                elif member.isfile():
                    data = tar.extractfile(member)
                    files[rel] = WorkdirFile(data=data.read() if data else b"", mode=member.mode)
        return files

    def _tar_out(self, script: str, args: list[str], what: str) -> io.BytesIO:
        """The tar a root exec of `script` prints on stdout (the image's own tar: symlinks kept as links)."""
        api = self.backend.client.api
        for attempt in range(1, _TAR_READS + 1):
            exec_id = api.exec_create(self.container_id, ["bash", "-c", script, "hrbench", *args], stdout=True,
                                      stderr=True, user="0")["Id"]
            out, err = io.BytesIO(), HeadTail(2000)
            try:
                for stdout, stderr in api.exec_start(exec_id, stream=True, demux=True):
                    out.write(stdout or b"")
                    err.add(stderr or b"")
                break
            except ValueError as exc:  # docker-py lost the stream's framing (docker/docker-py#3160): read again
                if attempt == _TAR_READS:
                    raise SandboxError(f"container {self.container_id[:12]}: {what}: the engine's output stream "
                                       f"was garbled {_TAR_READS} times ({exc})") from exc
                log.warning("container %s: %s: the engine's output stream was garbled (%s); reading again",
                            self.container_id[:12], what, exc)
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code not in (0, 1):  # 1: a file changed while tar read it (a live agent process), which is fine
            raise SandboxError(f"container {self.container_id[:12]}: {what} with the image's tar failed (exit "
                               f"{code}; the docker backend needs bash and tar in the image): {err.render()}")
        return out

    def open_shell(self, max_pids: int = 256) -> DockerShell:
        """A persistent bash in the container (llm and command agents type into it); the container's
        pids limit bounds it, so `max_pids` is accepted for the interface and not used."""
        shell = DockerShell(self, max_pids)
        self.shells.add(shell)
        return shell

    # -- verify ----------------------------------------------------------------------------

    def verify(self, stage: Stage) -> VerifierResult:
        """Run the stage's [[verifier.collect]] hooks, then its tests: in this container, or (a separate
        verifier, Harbor's environment_mode = "separate") in a new container of the verifier's image
        (`DockerBackend.verifier_image`) that receives only the collected paths, read out by the image's tar
        and put in by the engine."""
        if stage.collect or stage.separate_verifier:
            if not self._stop_agent():
                return VerifierResult(reward=0.0, passed=False, output="", duration_s=0.0,
                                      agent_fault=_WORKSPACE_GONE)
            for shell in list(self.shells):  # their bash died with every other agent process
                shell._release()
        hooks = self._run_collect_hooks(stage)
        if not stage.separate_verifier:
            result = self._verify_here(stage)
        else:
            verifier = self._separate_verifier(stage)
            try:
                result = verifier._verify_here(stage)
            finally:
                verifier.close()
        return result.model_copy(update={"output": hooks + result.output})

    def _stop_agent(self) -> bool:
        """Every agent process ended before a hook or a handover: by the reaper, or, when no process can start
        in the container (the agent used up its processes or memory), by a restart (`_restart`). False: the
        workspace went with the container."""
        try:
            self._reap_all()
        except SandboxError:
            return self._restart()
        return True

    def _run_collect_hooks(self, stage: Stage) -> str:
        """Harbor's [[verifier.collect]], as local runs them (every agent process ended already): each hook's
        command as the agent user, and whatever it started ended after it."""
        notes = []
        for hook in stage.collect:
            run = self._wrapped(hook.command, self.user, hook.timeout_sec, task_env(self.task))
            self._reap_all()
            status = "timed out" if run.timed_out else f"exit {run.exit_code}"
            notes.append(f"hrbench: [[verifier.collect]] {hook.command!r}: {status}\n{run.output[-2000:]}")
        return "".join(f"{n.rstrip()}\n" for n in notes)

    def _separate_verifier(self, stage: Stage) -> DockerEnvironment:
        """A new container of the verifier's image holding the collected paths of this one (/logs/artifacts, the
        task's and this stage's artifacts) at their own paths (every agent process is ended already): what
        Harbor copies into its separate verifier's environment."""
        paths = list(dict.fromkeys(("/logs/artifacts", *self.task.artifacts, *stage.artifacts)))
        archive = self._tar_out(_HANDOVER, ["out", "-", *paths], "collecting the separate verifier's inputs")
        verifier = self.backend._container(self.task, self.backend.verifier_image(self.task, stage))
        try:
            verifier.artifacts_dir = self.artifacts_dir
            if archive.tell():
                self.backend.client.api.put_archive(verifier.container_id, "/", archive.getvalue())
        except BaseException:
            verifier.close()
            raise
        return verifier

    def _verify_here(self, stage: Stage) -> VerifierResult:
        """Kill every agent process (its shells too, as local does), then run the stage's tests.

        Tests go in only now and are removed after; the reward is read after the verifier and
        everything it started are dead; /tmp is emptied first, as every local exec has a fresh
        one. One exec does it all (_VERIFY), with the tests and the reward in transit through a
        root-only directory. The terminal opens a new shell for the next part (files persist,
        shell state does not)."""
        import docker

        limit = self.task.verifier_timeout_sec
        paths = list(dict.fromkeys(("/logs/artifacts", *self.task.artifacts, *stage.artifacts)))
        env = task_env(self.task, self.task.verifier_env, stage.verifier_env, where="[verifier.env]")

        def attempt() -> tuple[ExecResult, str, str]:
            """The tests put in (under a new name and nonce: a first attempt cut short may have moved
            them already) and verify.sh run once: (its run, the folder, the nonce)."""
            top, nonce = f".hrbench-verify-{secrets.token_hex(8)}", f"HRBENCH-{secrets.token_hex(16)}"
            argv = ["bash", "-c", _VERIFY, "hrbench", _REAPER, f"/{top}", f"{limit:.3f}", _numeric(self.user), *paths]
            try:
                # the engine fails the archive call too when the agent's memory use just killed the init: podman
                # joins the namespaces of a process that is gone ("open /proc/PID/ns/mnt"), a 500
                self.backend.client.api.put_archive(self.container_id, "/", _tests_tar(self.task, stage, top, nonce))
                return self._run(argv, "0", limit + 60, env), top, nonce
            except docker.errors.APIError as exc:  # the engine could not put the tests in, or create or start the exec
                return (ExecResult(exit_code=-1, output=f"hrbench: the verification could not start: {exc}",
                                   duration_s=0.0), top, nonce)

        run, top, nonce = attempt()
        # verify.sh did not start (runc joins the container's cgroups, whose processes or memory the agent
        # used up), the reaper could not stop the agent, or the script could not finish its own bookkeeping
        # (forks refused while the killed processes were still counted): end every process from outside
        # and verify in the restarted container, with the container's whole budget.
        restarted = (not run.output.startswith(_VERIFY_STARTED) or run.exit_code == 86
                     or len(_split_verifier_output(run.output, nonce)[3]) != 4)
        if restarted and not self._restart():
            for shell in list(self.shells):
                shell._release()
            # never verify the image's copy in its place: the stage is the agent's failure, unverified
            return VerifierResult(reward=0.0, passed=False, output="", duration_s=run.duration_s,
                                  agent_fault=_WORKSPACE_GONE)
        if restarted:
            self.root_exec('rm -rf "$1"', [f"/{top}"], timeout_s=30)  # what is left of the first attempt
            run, top, nonce = attempt()
        for shell in list(self.shells):  # their bash died with every other agent process
            shell._release()
        if run.exit_code == 86 or not run.output.startswith(_VERIFY_STARTED):
            raise SandboxError(f"container {self.container_id[:12]}: {run.output[-400:]}")
        output, files, artifacts, met = _split_verifier_output(run.output.removeprefix(_VERIFY_STARTED), nonce)
        with tempfile.TemporaryDirectory(prefix="hrbench-reward-") as tmp:
            for name, data in files.items():
                (Path(tmp) / name).write_bytes(data)
            # The same reward semantics as local (Harbor's: reward.txt, else reward.json's `reward`;
            # no reward file is a verifier error, never a silent 0).
            rewards, reward, error = score_rewards(Path(tmp))
        if self.artifacts_dir is not None:
            self._save_artifacts(artifacts, self.artifacts_dir / stage.name)
        passed = error is None and reward >= 1.0 - 1e-9
        # What the agent did is its failure (`failed` with this as the detail, never a `verifier_error`
        # it could use to veto it): a restart it forced, or a verifier that gave no reward because of
        # the workspace it left (full) or the agent's code it ran (it met the container's bounds).
        faults = [] if passed else self._faults(met if error is not None else [], restarted)
        agent_fault = "; ".join(faults + ([f"the verifier gave no reward ({error})"] if error and faults else []))
        agent_fault = agent_fault or None
        return VerifierResult(reward=reward, passed=passed, output=output[-4000:], duration_s=run.duration_s,
                              rewards=rewards, error=None if agent_fault else error, agent_fault=agent_fault,
                              artifacts=[path for path, _ in artifacts])

    def _faults(self, met: list[int], restarted: bool) -> list[str]:
        """What the agent did that explains its verification's outcome (see `verify`)."""
        faults = []
        if restarted:
            faults.append("the agent used up the container's processes or memory (no process could start in it, "
                          "or its processes outlived the reaper): they were killed from outside and the verifier "
                          "ran in the restarted container")
        if len(met) == 4:
            oom, forks, free_bytes, free_inodes = met
            if self.sized and (free_bytes < _FULL_BYTES or free_inodes == 0):
                faults.append(f"the agent left its workspace full ({self.backend.workspace_mb} MB)")
            for count, what in ((oom, f"memory bound ({self.backend.memory_mb} MB)"),
                                (forks, f"process bound ({self.backend.pids_limit})")):
                if count > 0:
                    faults.append(f"the verifier, running on the agent's workspace, met the container's {what}")
        return faults

    def own_sized_paths(self, recursive: bool = False) -> None:
        """Give the sized mounts' roots (a tmpfs mount root is root's) to the agent user, as the image had
        them; `recursive`: everything in them too (as a step's workdir/ files are given)."""
        done = self.root_exec('user=$1 flag=$2; shift 2; chown $flag "$user" "$@"',
                              [self.user, "-R" if recursive else "--", *_sized_paths(self.task)], 60)
        if done.exit_code != 0:
            raise SandboxError(f"container {self.container_id[:12]}: giving the workdir to the agent user failed: "
                               f"{done.output[-400:]}")

    def _restart(self) -> bool:
        """Every process of the container ended from outside (the engine's kill of its init needs no
        exec in it: the pid namespace dies with PID 1), then the container started again with the
        workspace the agent left: the sized mounts' content is read out first through the engine's
        archive endpoint (which starts no process in the container) and put back after. False when
        that workspace is gone: the container had stopped already (its init killed by the kernel when
        the agent used up the memory), taking its tmpfs mounts with it."""
        import docker

        api = self.backend.client.api
        log.warning("container %s: no process could start in it (the agent used up its processes or memory); "
                    "restarting it to verify", self.container_id[:12])
        kept, saved = not self.sized, []
        if self.sized:
            try:
                saved = [(path, b"".join(api.get_archive(self.container_id, path)[0]))
                         for path in _sized_paths(self.task)]
                kept = True
            except docker.errors.APIError as exc:  # the container stopped: its mounts are gone
                log.warning("container %s: its workspace could not be read before the restart: %s",
                            self.container_id[:12], exc)
        try:
            api.kill(self.container_id)
        except docker.errors.APIError:  # it stopped already (its init was OOM-killed, say)
            pass
        api.wait(self.container_id, timeout=60)
        api.start(self.container_id)
        if saved:  # the engine copied the image's content into the fresh mounts: the agent's replaces it
            cleared = self.root_exec('for d in "$@"; do find "$d" -mindepth 1 -delete || exit 1; done',
                                     [path for path, _ in saved], 60)
            if cleared.exit_code != 0:
                raise SandboxError(f"container {self.container_id[:12]}: clearing the restarted workspace failed: "
                                   f"{cleared.output[-400:]}")
            for path, archive in saved:
                api.put_archive(self.container_id, posixpath.dirname(path.rstrip("/")) or "/", archive)
        if self.sized:
            self.own_sized_paths(recursive=True)  # the engine extracts archives as the container's root
        return kept

    def _save_artifacts(self, paths: list[tuple[str, bool]], dest: Path) -> None:
        """The artifacts found after a verification, read out of the container (`get_archive`, the
        engine's own view: root's, symlinks not followed) and saved as local saves them
        (tasks.harbor.save_artifacts: bounded, links recorded, never followed)."""
        import docker

        with tempfile.TemporaryDirectory(prefix="hrbench-artifacts-") as tmp:
            found: list[tuple[str, Path]] = []
            unread: set[str] = set()  # sandbox paths of the placeholders past the total
            for i, (path, is_link) in enumerate(paths):
                into = Path(tmp) / str(i)
                if is_link:  # recorded as a link, as save_artifacts records one; its target is not read
                    into.mkdir()
                    (into / posixpath.basename(path)).symlink_to("/dev/null")
                    found.append((path, into / posixpath.basename(path)))
                    continue
                try:
                    chunks, _ = self.backend.client.api.get_archive(self.container_id, path)
                except docker.errors.NotFound:
                    continue  # gone since the verifier's exec looked
                unread |= {posixpath.join(posixpath.dirname(path), p.relative_to(into).as_posix())
                           for p in _extract_bounded(chunks, into)}
                found.append((path, into / posixpath.basename(path)))
            entries = save_artifacts(found, dest, exclude=self.task.artifact_exclude)
        if any(e.path in unread and e.saved for e in entries):
            for entry in entries:
                if entry.path in unread and entry.saved:
                    (dest / entry.saved).unlink()
                    entry.saved, entry.status = None, "over_limit"
            (dest / ARTIFACTS_MANIFEST).write_text(json.dumps([e.model_dump() for e in entries], indent=1))

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the container (every process in it dies with it), then the shells' relay processes."""
        try:
            self.backend.remove_container(self.container_id)
        finally:
            self.alive = False
            for shell in list(self.shells):
                shell._release()


AGENT_STATES_UNSUPPORTED = (
    "checkpoint.state 'solution_conditioned' starts checkpoints from the agent's own saved workspaces; the "
    "docker backend does not save them yet: run the study on the 'local' backend, or use "
    "checkpoint.state 'oracle_replay'")


class DockerBackend:
    """Builds task images and oracle-state images, and starts one container per trial."""

    name = "docker"
    saves_agent_states = False  # no `docker commit` snapshots yet: solution_conditioned needs `local`

    def __init__(self, cache_dir: Path, memory_mb: int = 1024, cpus: float = 1.0, pids_limit: int = 256,
                 tmp_mb: int = 256, base_image: str = DEFAULT_BASE_IMAGE, docker_host: str | None = None,
                 file_mb: int = 1024, workspace_mb: int = 1024):
        """`cache_dir` holds the build locks and the state images' seals (the images live in the engine);
        trajectories go beside it, as with local. A trial's workdir and each persisted path are tmpfs
        mounts of `workspace_mb` (charged to the container's memory, as local's workspace is as root);
        `file_mb` bounds each file a trial writes (RLIMIT_FSIZE) elsewhere too."""
        self.cache_dir = Path(cache_dir)
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.pids_limit = pids_limit
        self.tmp_mb = tmp_mb
        self.file_mb = file_mb
        self.workspace_mb = workspace_mb
        self.base_image = base_image
        self.docker_host = docker_host or os.environ.get("DOCKER_HOST")
        self._client: docker.DockerClient | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._known: dict[str, str] = {}  # state image tag -> the sealed id it was checked to name (this process)
        self._users: dict[str, str] = {}  # image -> its agent user
        self._token = secrets.token_hex(8)

    @property
    def owner(self) -> str:
        """OWNER_LABEL of this backend's containers (owners.py): this process and this backend. The engine may be
        shared (other processes, other users), and what one backend left behind must be told apart from another's."""
        return owner_label(self._token)

    @property
    def client(self) -> docker.DockerClient:
        """The engine's client; the first in a process removes what dead harness processes left on it."""
        if self._client is None:
            client = _client(self.docker_host)
            sweep_dead_owners(client, self.docker_host or "default")
            self._client = client
        return self._client

    def api_address(self) -> tuple[str, str]:
        """("unix", socket path) or ("tcp", host:port) of the engine's API, for the shell's relay."""
        host = self.docker_host or "unix:///var/run/docker.sock"  # the SDK's default, as _client uses it
        scheme, _, where = host.partition("://")
        if scheme in ("unix", "http+unix"):
            return "unix", "/" + where.lstrip("/")
        if scheme in ("tcp", "http"):  # plain, as _client connects to an explicit host
            return "tcp", where.rstrip("/")
        raise SandboxError(f"the docker backend's persistent shell needs a unix:// or tcp:// Docker API, "
                           f"not {host!r}; point DOCKER_HOST at the engine's socket")

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def check_supported(self, task: Task) -> None:
        """Every task package runs here (docker_only tasks included); the engine must be reachable."""
        self.client  # noqa: B018 - raises SandboxError with what to start when it is not

    # -- images ----------------------------------------------------------------------------

    def _repo(self, task: Task) -> str:
        return "hrbench-env/" + (re.sub(r"[^a-z0-9._-]+", "-", task.name.lower()).strip("-._") or "task")

    def state_image(self, task: Task, stages_done: int) -> str:
        """The tag of e_{stages_done}: a changed task or a changed recipe here is a new image, and so is
        another cache directory (another study's states are not this one's, as on local)."""
        key = hashlib.sha256(f"{task.content_hash()} {STATE_RECIPE} {self.cache_dir.resolve()}".encode()).hexdigest()
        return f"{self._repo(task)}:{key[:12]}-after-{stages_done}"

    def _seal_path(self, ref: str) -> Path:
        repo, tag = ref.rsplit(":", 1)
        return self.cache_dir / IMAGE_SEALS / repo.replace("/", "_") / f"{tag}.image"

    def _seal(self, ref: str, image_id: str) -> None:
        """Record the id of the image just committed as `ref` (the harness's file, atomically)."""
        record = self._seal_path(ref)
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_name(f".{record.name}.{os.getpid()}")
        partial.write_text(f"{ref} {image_id}\n")
        os.replace(partial, record)

    def sealed_image(self, ref: str) -> tuple[str | None, str | None]:
        """(the id `ref` names, None) when it is the image recorded when `ref` was built; else (None, why)."""
        return check_image_seal(self.client, self._seal_path(ref), ref)

    def _has_image(self, ref: str) -> bool:
        import docker

        try:
            self.client.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _dockerfile(self, text: str, path: Path) -> str:
        """A Dockerfile's `text` (read from `path`) with every FROM the engine lacks mapped to the base image."""
        stages: set[str] = set()
        lines = []
        for line in text.splitlines():
            words = line.split()
            if words and words[0].upper() == "FROM":
                image = next((w for w in words[1:] if not w.startswith("--")), "")
                if len(words) >= 4 and words[-2].upper() == "AS":
                    stages.add(words[-1].lower())
                if image.lower() not in stages and image != "scratch" and not self._has_image(image):
                    if not self._has_image(self.base_image):
                        raise SandboxError(
                            f"{path}: FROM {image} is not on the Docker host and neither is the base image "
                            f"{self.base_image}; build it with `scripts/podman.sh setup` (no registry is reachable)")
                    log.warning("%s: FROM %s is not on the Docker host (no registry is reachable); building "
                                "FROM %s instead", path, image, self.base_image)
                    line = line.replace(image, self.base_image, 1)
            lines.append(line)
        return "\n".join(lines) + "\n"

    def _build_image(self, task: Task, dockerfile: Path, text: str, context: Path | None) -> str:
        """`text` (the Dockerfile at `dockerfile`, FROMs mapped) built over a copy of the folder `context` (none:
        an empty one) with the network off; returns the image id."""
        import docker

        with tempfile.TemporaryDirectory(prefix="hrbench-build-") as tmp:
            copy = Path(tmp) / "context"
            if context is not None and context.is_dir():
                shutil.copytree(context, copy)
            else:
                copy.mkdir()
            (copy / "Dockerfile.hrbench").write_text(self._dockerfile(text, dockerfile))
            try:
                image, _ = self.client.images.build(
                    path=str(copy), dockerfile="Dockerfile.hrbench", rm=True, forcerm=True, pull=False,
                    network_mode="none", labels={LABEL: task.name})
            except docker.errors.BuildError as exc:
                lines = "".join(str(c.get("stream", c.get("error", ""))) for c in exc.build_log)
                raise SandboxError(f"task {task.name!r}: building {dockerfile} failed: {exc}\n"
                                   f"{lines[-1500:]}") from exc
            except docker.errors.APIError as exc:
                raise SandboxError(f"task {task.name!r}: building {dockerfile} failed: {exc}") from exc
        return image.id

    def _build_task_image(self, task: Task) -> str:
        """The task's environment/ built; returns the image id."""
        path = task.path / "environment" / "Dockerfile"
        text = path.read_text() if path.is_file() else f"FROM {self.base_image}\nWORKDIR {task.workdir}\n"
        return self._build_image(task, path, text, task.path / "environment")

    def _agent_user(self, image: str) -> str:
        """The image's own USER when it names a non-root one, else the sandbox uid 47000."""
        user = (self.client.images.get(image).attrs.get("Config") or {}).get("User") or ""
        return user if user not in ("", "root", "0", "0:0") else AGENT_USER

    def checkpoint_state(self, task: Task, stages_done: int) -> str:
        """The image of the oracle state after the first `stages_done` stages, built once and reused."""
        self.check_supported(task)
        return self._cached(self.state_image(task, stages_done), lambda ref: self._build_state(task, stages_done, ref))

    def _cached(self, ref: str, build: Callable[[str], None]) -> str:
        """`ref`, committed by `build(ref)` unless the engine has it with its seal (checked once per process)."""
        if ref in self._known:
            return ref
        lock_path = self.cache_dir / "locks" / f"{ref.replace('/', '_').replace(':', '_')}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        # A thread lock here and a file lock for other processes on this host (Dagster's multiprocess
        # executor runs partitions of one task side by side); the engine's tag is the cache.
        with self._lock(ref), open(lock_path, "w") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            if self._has_image(ref):
                image_id, problem = self.sealed_image(ref)
                if image_id is not None:
                    self._known[ref] = image_id
                    return ref
                log.warning("image %s: %s; rebuilding it", ref, problem)
            build(ref)
        return ref

    def _build_state(self, task: Task, stages_done: int, ref: str) -> None:
        """e_0: the task's image with its workdir and persisted paths and environment/setup.sh run; e_i: e_{i-1}
        with sigma_i replayed and passing its verifier. Committed as `ref`."""
        if stages_done == 0:
            built = self._build_task_image(task)
            env = self._prepared(task, built)
            try:
                if task.setup_script is not None:
                    result = env.exec(task.setup_script.read_text(), task.agent_timeout_sec)
                    if result.exit_code != 0:
                        raise SandboxError(f"task {task.name!r}: environment/setup.sh failed:\n{result.output[-800:]}")
                env._reap_all()
                self._commit(env, ref, env.user)
            finally:
                env.close()
            return
        env = self._container(task, self._state_id(task, stages_done - 1), sized=False)
        try:
            stage = task.stages[stages_done - 1]
            result = env.run_solution(stage)
            check = env.verify(stage)
            if not check.passed:
                raise SandboxError(
                    f"task {task.name!r}: replaying the reference solution of stage {stage.name!r} "
                    f"did not pass its verifier (reward {check.reward}"
                    f"{'; exit reason verifier_error; ' + check.error if check.error else ''}) on the "
                    "docker backend; run "
                    f"`hrbench tasks audit`.\n{result.output[-800:]}\n{check.output[-800:]}")
            self._commit(env, ref, env.user)
        finally:
            env.close()

    def _prepared(self, task: Task, image: str) -> DockerEnvironment:
        """An unsized container of a freshly built `image` whose agent user owns the workdir and the persisted
        paths outside it (/output, /logs/artifacts, declared ones), as local's are; their parents (/logs) stay
        root's. The caller commits it."""
        env = self._container(task, image, user="0", sized=False)
        try:
            env.user = self._agent_user(image)
            prep = env.root_exec('user=$1; shift; for d in "$@"; do mkdir -p "$d" && chown -R "$user" "$d" '
                                 '|| exit 1; done', [env.user, task.workdir, *task.persist], 120)
            if prep.exit_code != 0:
                raise SandboxError(f"task {task.name!r}: preparing {task.workdir} and {', '.join(task.persist)} "
                                   f"failed:\n{prep.output[-800:]}")
        except BaseException:
            env.close()
            raise
        return env

    def verifier_image(self, task: Task, stage: Stage) -> str:
        """The sealed image id a separate verifier of `stage` starts from: its own (`Stage.verifier_image`: a
        [verifier.environment] docker_image, or a tests/Dockerfile), built once with the workdir and persisted
        paths as e_0 has them, and reused; else the task's own image e_0."""
        source = stage.verifier_image
        if source is None:
            return self._state_id(task, 0)
        self.check_supported(task)
        if source.docker_image is not None:
            dockerfile, text, context = task.path / "task.toml", f"FROM {source.docker_image}\n", None
            # the image the name points at now is part of the key: a name retagged is another verifier image
            origin = f"{source.docker_image} {self.client.images.get(source.docker_image).id}" \
                if self._has_image(source.docker_image) else source.docker_image
        else:
            assert source.dockerfile is not None  # a VerifierImage names one or the other
            dockerfile, text, context = source.dockerfile, source.dockerfile.read_text(), source.dockerfile.parent
            origin = folder_sha256(context)  # a changed build context is another image
        key = hashlib.sha256(f"{self.state_image(task, 0)} verifier {origin}".encode()).hexdigest()
        ref = f"{self._repo(task)}:verifier-{key[:16]}"

        def build(ref: str) -> None:
            env = self._prepared(task, self._build_image(task, dockerfile, text, context))
            try:
                self._commit(env, ref, env.user)
            finally:
                env.close()

        return self._known[self._cached(ref, build)]

    def _state_id(self, task: Task, stages_done: int) -> str:
        """The sealed image id of e_{stages_done}: containers start from the id that was checked, never
        from a tag that could be moved after the check."""
        return self._known[self.checkpoint_state(task, stages_done)]

    def _commit(self, env: DockerEnvironment, ref: str, user: str) -> None:
        repo, tag = ref.rsplit(":", 1)
        # the agent user travels as a label: the image's USER stays root, so root execs need no override
        # no pause: every agent process is dead by now (nothing writes), and runc's freezer can fail
        # under load ("pausing container ... to commit"), which would fail the whole state build
        image_id = self.client.api.commit(env.container_id, repository=repo, tag=tag, pause=False,
                                          conf={"Labels": {LABEL: env.task.name, f"{LABEL}.user": user}})["Id"]
        image_id = image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"
        self._seal(ref, image_id)
        self._known[ref] = image_id

    # -- containers ------------------------------------------------------------------------

    def _allow_internet(self, task: Task) -> bool:
        """`allow_internet = true` (before schema 1.3), or a phase's `network_mode = 'public'` (1.3+): the
        container's one network serves the whole trial (the engine cannot switch it per phase)."""
        config = tomllib.loads((task.path / "task.toml").read_text())
        return bool(config.get("environment", {}).get("allow_internet", False)) or task.network == "public"

    def _container(self, task: Task, image: str, user: str | None = None, sized: bool = True) -> DockerEnvironment:
        """A running container of `image` with the trial limits; `user` defaults to the image's agent user.

        `sized`: the workdir and the persisted paths are tmpfs mounts of `workspace_mb` (the engine
        copies the image's content there at start: podman's default `tmpcopyup`), so what the agent
        writes there is bounded in all; /var/tmp, the image's other world-writable directory, is one of
        `tmp_mb`. Containers that build oracle states are not sized: `docker commit` keeps the writable
        layer only, not what is in a tmpfs."""
        import docker
        from docker.types import Ulimit

        if user is None:
            if image not in self._users:
                labels = (self.client.images.get(image).attrs.get("Config") or {}).get("Labels") or {}
                self._users[image] = labels.get(f"{LABEL}.user", AGENT_USER)
            user = self._users[image]
        api = self.client.api
        host_config = api.create_host_config(
            init=True, network_mode="bridge" if self._allow_internet(task) else "none",
            mem_limit=f"{self.memory_mb}m", memswap_limit=f"{self.memory_mb}m",
            nano_cpus=int(self.cpus * 1e9), pids_limit=self.pids_limit,
            # no quota on the writable layer (the storage driver here sets none): each file is bounded
            ulimits=[Ulimit(name="fsize", soft=self.file_mb << 20, hard=self.file_mb << 20),
                     *(Ulimit(name=name, soft=n, hard=n) for name, n in _ULIMITS.items())],
            tmpfs={"/tmp": f"rw,exec,nosuid,size={self.tmp_mb}m,mode=1777",
                   **({path: f"rw,exec,nosuid,size={self.workspace_mb}m,mode=0755" for path in _sized_paths(task)}
                      | {"/var/tmp": f"rw,nosuid,size={self.tmp_mb}m,mode=1777"} if sized else {})},
            # the agent user gets no capability; root's few serve the harness's own execs (chown the
            # workdir, kill the agent's processes, run the verifier as the agent user)
            cap_drop=["ALL"], cap_add=["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"],
            security_opt=["no-new-privileges"], log_config={"Type": "none", "Config": {}},
        )
        # named, so that it can be removed even when the engine made it but its answer never came (a timeout)
        name = f"{CONTAINER_PREFIX}{secrets.token_hex(12)}"
        try:
            container_id = api.create_container(
                image, entrypoint=_MAIN[:1], command=_MAIN[1:], user="0", environment=_ENV, name=name,
                working_dir=task.workdir, hostname="hrbench", labels={LABEL: task.name, OWNER_LABEL: self.owner},
                host_config=host_config,
            )["Id"]
            api.start(container_id)
            env = DockerEnvironment(self, task, container_id, user, sized)
            if sized:
                env.own_sized_paths()
        except BaseException as exc:  # whatever failed after the engine made it, the container goes
            self._discard(name)
            if isinstance(exc, docker.errors.APIError):
                raise SandboxError(f"task {task.name!r}: starting a container of {image} failed: {exc}") from exc
            raise
        return env

    def remove_container(self, container: str) -> None:
        """Remove a container (by id or name) and its processes; a container already gone is fine."""
        import docker

        try:
            self.client.api.remove_container(container, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def _discard(self, container: str) -> None:
        """remove_container for a cleanup under another error, which is the one raised: a failure is logged."""
        try:
            self.remove_container(container)
        except Exception as exc:  # docker and requests raise several unrelated types
            log.warning("container %s: could not remove it after a failed start: %s", container, exc)

    def start(self, task: Task, stages_done: int = 0, state: str | None = None) -> DockerEnvironment:
        """A fresh container of the checkpoint image, for one trial."""
        if state is not None:
            raise SandboxError(AGENT_STATES_UNSUPPORTED)
        env = self._container(task, self._state_id(task, stages_done))
        ready_for_first_stage(env, task, stages_done)
        return env

    def save_state(self, env: DockerEnvironment, state: str) -> None:
        raise SandboxError(AGENT_STATES_UNSUPPORTED)

    def restore(self, env: DockerEnvironment, stages_done: int) -> None:
        """State repair: the trial continues in a new container of the oracle state e_{stages_done}."""
        image = self._state_id(env.task, stages_done)
        for shell in list(env.shells):
            shell.close()
        fresh = self._container(env.task, image)
        # the environment holds the fresh container before the old one goes: whatever happens, its close removes it
        old, env.container_id, env.user = env.container_id, fresh.container_id, fresh.user
        env._begun = {i for i in env._begun if i < stages_done}  # the next stage's setup runs again
        self.remove_container(old)
