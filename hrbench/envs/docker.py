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
from pathlib import Path
from typing import TYPE_CHECKING

from hrbench.envs.base import ExecResult, SandboxError, VerifierResult, WorkdirFile, ready_for_first_stage, task_env
from hrbench.envs.confine import SANDBOX_PATH
from hrbench.envs.local import (
    CHECK_LIBRARY,
    PERSIST_DIR,
    LocalEnvironment,
    _read_rewards,
    _unit,
)
from hrbench.envs.shell import PersistentShell
from hrbench.harness.truncation import HeadTail
from hrbench.tasks.harbor import (
    ARTIFACTS_LIMIT_BYTES,
    ARTIFACTS_MANIFEST,
    RewardError,
    primary_reward,
    save_artifacts,
)
from hrbench.tasks.model import Stage, Task

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

DEFAULT_BASE_IMAGE = "hrbench/debian:bookworm"
AGENT_USER = "47000:47000"  # the local sandbox's uid (docs/security.md)
LABEL = "org.hrbench.env"
# Each backend marks its containers with a token of its own: the engine may be shared (other processes,
# other users), and what one backend left behind must be told apart from another's.
OWNER_LABEL = "org.hrbench.backend"
OUTPUT_LIMIT = 2 * 1024 * 1024  # bytes kept of one exec's output (first and last half)
# Bump when what goes into a state image changes (user, ownership, setup): old images are not reused.
STATE_RECIPE = f"3 {AGENT_USER}"
_ENV = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
# An explicit ulimit list replaces the engine's configured defaults, and podman then sets its built-in
# ones (2^20 open files and processes), which a host without CAP_SYS_RESOURCE refuses ("error setting
# rlimit": no container starts): the values scripts/podman.sh's containers.conf sets, here too.
_ULIMITS = {"nofile": 1024, "nproc": 1024}
_LONG_COMMAND = 100_000  # longer commands go in as a file (one argv string is capped at 128 KiB)

# Run as root inside the container. Modes:
#   all          SIGKILL every process but PID 1, the main process, this script and its parent
#                (_VERIFY runs it as a child), until none is left; then empty /tmp
#   tree SHELL   the descendants of a DockerShell's bash only (its interrupt); `end SHELL`: them and it
# SHELL is the shell's nonce, found on its bash's command line with PPid 0 (only an exec has that
# in the container, so the agent cannot fake one). Victims are stopped before they are killed, so
# nothing forks away meanwhile. Pure bash over /proc (no forks in the loop): any image with bash.
_REAPER = r"""
mode=$1 shell=hrbench-shell-${2:-}
declare -A keep=([1]=1 [$$]=1 [$PPID]=1) roots=() parent=()
scan() {  # parent[] of every live process; PID 1's oldest child (the container's main process) is kept
  parent=(); roots=()
  local d p line f argv oldest= first=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    { read -r line < "$d/stat"; } 2>/dev/null || continue
    read -r -a f <<< "${line##*) }"  # f[0] state, f[1] ppid, f[19] start time
    [ "${f[0]}" = Z ] || [ "${f[1]}" = $$ ] && continue
    parent[$p]=${f[1]}
    if [ "${f[1]}" = 0 ] && [ "$mode" != all ]; then
      { mapfile -d '' -t argv < "$d/cmdline"; } 2>/dev/null
      [ "${argv[-1]:-}" = "$shell" ] && roots[$p]=1
    fi
    if [ "${f[1]}" = 1 ] && { [ -z "$first" ] || [ "${f[19]}" -lt "$first" ]; }; then first=${f[19]}; oldest=$p; fi
  done
  [ -n "$oldest" ] && keep[$oldest]=1
}
for round in $(seq 100); do
  scan; victims=()
  for p in "${!parent[@]}"; do
    [ -n "${keep[$p]:-}" ] && continue
    [ "$mode" = end ] && [ -n "${roots[$p]:-}" ] && { victims+=("$p"); continue; }
    if [ "$mode" != all ]; then
      q=${parent[$p]}; hit=
      while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ]; do
        [ -n "${roots[$q]:-}" ] && { hit=1; break; }
        q=${parent[$q]:-}
      done
      [ -n "$hit" ] || continue
    fi
    victims+=("$p")
  done
  if [ ${#victims[@]} -eq 0 ]; then
    [ "$mode" = all ] && find /tmp -mindepth 1 -delete 2>/dev/null
    exit 0
  fi
  kill -STOP "${victims[@]}" 2>/dev/null; kill -KILL "${victims[@]}" 2>/dev/null
done
echo "hrbench: processes survived 100 kill rounds" >&2; exit 1
"""

# One verification in one exec, as root: kill every agent process, shells included (_REAPER), move
# the tests in from the root-only directory put_archive filled, run them as the agent user (as local
# does; /logs is theirs, so checks.sh keeps its private results in the log root that `untrusted`
# hides whole) under `timeout` in their own process group, kill whatever they left, remove /tests, keep
# /logs in the private directory, and print the reward files, each behind a nonce read from that
# directory: the verifier's output may quote agent files, but no agent could have learnt the
# nonce to forge a reward line. Exit 86: the agent could not be stopped.
_VERIFY = r"""
reaper=$1 priv=$2 limit=$3 user=$4; shift 4
for d in /.hrbench-verify-*; do [ "$d" = "$priv" ] || rm -rf "$d"; done
rm -rf /tests
bash -c "$reaper" hrbench all > "$priv/reaped" 2>&1 \
  || { echo "hrbench: could not stop the agent's processes: $(tail -c 400 "$priv/reaped")"; exit 86; }
# /logs starts as local's fresh one: nothing but the persisted /logs/artifacts (Harbor's), and verifier/
find /logs -mindepth 1 -maxdepth 1 ! -name artifacts -exec rm -rf {} + 2>/dev/null
mv "$priv/tests" /tests && mkdir -p /logs/verifier && chown -R "$user" /logs || exit 86
setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups \
  timeout -s KILL "$limit" bash /tests/test.sh < /dev/null & p=$!; { wait $p; } 2>/dev/null; rc=$?
bash -c "$reaper" hrbench all > "$priv/reaped" 2>&1
rm -rf /tests; mv /logs/verifier "$priv/verifier"
find /logs -mindepth 1 -maxdepth 1 ! -name artifacts -exec rm -rf {} + 2>/dev/null; chown 0:0 /logs
read -r nonce < "$priv/nonce"
for f in reward.txt reward.json; do
  [ -f "$priv/verifier/$f" ] && [ ! -L "$priv/verifier/$f" ] \
    && { printf '\n%s %s\n' "$nonce" "$f"; head -c 65536 "$priv/verifier/$f"; }
done
# the artifact paths present now (as local: none through a symlink on the way; an empty /logs/artifacts is none)
for a in "$@"; do
  q= bad=; IFS=/ read -r -a parts <<< "${a#/}"
  for c in "${parts[@]}"; do q="$q/$c"; [ "$q" != "$a" ] && [ -L "$q" ] && bad=1; done
  [ -n "$bad" ] || { [ ! -L "$a" ] && [ ! -e "$a" ]; } && continue
  [ "$a" = /logs/artifacts ] && [ -d "$a" ] && [ ! -L "$a" ] && [ -z "$(ls -A "$a")" ] && continue
  if [ -L "$a" ]; then kind=link; else kind=path; fi  # the engine's archive would follow a link: not read
  printf '\n%s artifact\n%s %s' "$nonce" "$kind" "$a"
done
exit $rc
"""

# Harbor's oracle, as local runs it: the step's solution/ folder at /solution (root's, read-only to the
# agent user), `bash /solution/solve.sh` run from WORKDIR as the agent user (so $0, BASH_SOURCE and
# sibling helpers work), bounded and its process group killed after, as an agent command; /solution is
# removed after. Exit 86: the folder could not be put in place.
_SOLVE = r"""
priv=$1 limit=$2 user=$3
rm -rf /solution && mv "$priv/solution" /solution && rm -rf "$priv" || exit 86
setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups \
  timeout -s KILL "$limit" bash /solution/solve.sh < /dev/null & p=$!; { wait $p; } 2>/dev/null; rc=$?
kill -KILL -- -$p 2>/dev/null; rm -rf /solution
exit $rc
"""

# A tar of the paths given that exist (the workdir and the persisted paths), on stdout, as root.
_TAR_PATHS = r"""
cd / || exit 2
have=()
for p in "$@"; do [ -e "${p#/}" ] && [ ! -L "${p#/}" ] && have+=("${p#/}"); done
[ ${#have[@]} -gt 0 ] || exit 0
exec tar -cf - --no-wildcards -- "${have[@]}"
"""

# The agent's command, bounded by `timeout` (which signals its whole process group), and
# whatever it left running in that group killed after it: as with local, where a command's
# sandbox dies with it, a background job does not outlive its command.
_WRAP = ('timeout -s KILL "$1" bash -c "$2" & p=$!; { wait $p; } 2>/dev/null; rc=$?; '
         'kill -KILL -- -$p 2>/dev/null; exit $rc')
# The container's main process. The engine's init (`init=True`: tini on Docker, catatonit on
# podman) is PID 1 and reaps the orphans an agent leaves, which would otherwise stay zombies and
# count against the pids limit; the reaper spares the main process as PID 1's oldest child.
_MAIN = ["sleep", "infinity"]

# The persistent shell's host side: a process piping its stdin and stdout to a started exec's
# hijacked connection (Docker's raw stream: 8-byte frame headers on the way out). Plain sockets
# and the standard library only, run with `python -I -S`: it starts in a few hundredths of a
# second, where importing the Docker SDK (and hrbench) took about a second of CPU per shell.
# argv: unix|tcp, socket path or host:port, the request path.
_RELAY = r"""
import os, socket, sys, threading
kind, where, path = sys.argv[1:4]
if kind == "unix":
    s = socket.socket(socket.AF_UNIX)
    s.connect(where)
else:
    host, _, port = where.rpartition(":")
    s = socket.create_connection((host, int(port)))
body = b'{"Detach": false, "Tty": false}'
s.sendall(("POST %s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nConnection: Upgrade\r\n"
           "Upgrade: tcp\r\nContent-Length: %d\r\n\r\n" % (path, len(body))).encode() + body)
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("hrbench: the Docker API closed the shell's connection: %r" % buf[:300])
    buf += chunk
head, _, buf = buf.partition(b"\r\n\r\n")
if head.split(b" ", 2)[1] not in (b"101", b"200"):
    sys.exit("hrbench: the Docker API refused the shell's exec: %r" % head[:300])

def feed():
    try:
        while data := os.read(0, 65536):
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass

threading.Thread(target=feed, daemon=True).start()
while True:
    while len(buf) >= 8 and len(buf) >= 8 + int.from_bytes(buf[4:8], "big"):
        end = 8 + int.from_bytes(buf[4:8], "big")
        view = memoryview(buf)[8:end]
        while view:
            view = view[os.write(1, view):]
        buf = buf[end:]
    try:
        chunk = s.recv(65536)
    except OSError:
        chunk = b""
    if not chunk:
        break
    buf += chunk
"""


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


def _split_verifier_output(text: str, nonce: str) -> tuple[str, dict[str, bytes], list[tuple[str, bool]]]:
    """The verifier's own output, the reward files printed after it behind `nonce` lines, and the
    artifact paths found after it (each with whether it is a symlink)."""
    parts = text.split(f"\n{nonce} ")
    files: dict[str, bytes] = {}
    artifacts: list[tuple[str, bool]] = []
    for part in parts[1:]:
        name, _, body = part.partition("\n")
        if name in ("reward.txt", "reward.json"):
            files[name] = body.encode("utf-8", errors="replace")
        elif name == "artifact":
            kind, _, path = body.partition(" ")
            artifacts.append((path, kind == "link"))
    return parts[0], files, artifacts


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


class DockerEnvironment:
    """One trial's container; every exec runs in it as the agent user."""

    def __init__(self, backend: DockerBackend, task: Task, container_id: str, user: str):
        self.backend = backend
        self.task = task
        self.container_id = container_id
        self.user = user
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
            except (OSError, requests.RequestException, urllib3.exceptions.HTTPError):
                return  # the connection dies when the container is removed under it: the output so far stands

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

    def begin_stage(self, stage: Stage) -> None:
        """Before the agent's turn at `stage` (once per stage), as local: the step's workdir/ files
        copied into WORKDIR (the agent user's), its setup.sh run there (then removed), its healthcheck
        run. Raises SandboxError when setup.sh or a healthcheck fails."""
        if stage.index not in self._begun and stage.workdir_files is not None:
            files: dict[str, tuple[bytes | str | None, int]] = {}
            _add_folder(files, stage.workdir_files, ".")
            self.backend.client.api.put_archive(self.container_id, self.task.workdir, _tar(files))
            done = self.root_exec('chown -R "$1" "$2"', [self.user, self.task.workdir], 60)
            if done.exit_code != 0:
                raise SandboxError(f"task {self.task.name!r}: step {stage.name!r}: giving its workdir/ files to the "
                                   f"agent user failed:\n{done.output[-400:]}")
        # the rest is local's, over this environment's `exec`: setup.sh, the healthcheck, once per stage
        # (its workdir/ copy writes a workspace directory, done above through the engine instead)
        LocalEnvironment.begin_stage(self, stage.model_copy(update={"workdir_files": None}))

    # Docker HEALTHCHECK semantics over this environment's exec: local's loop, which needs only `exec`
    healthcheck = LocalEnvironment.healthcheck

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
        api = self.backend.client.api
        exec_id = api.exec_create(self.container_id, ["bash", "-c", _TAR_PATHS, "hrbench", self.task.workdir,
                                                      *self.task.persist], stdout=True, stderr=True, user="0")["Id"]
        out, err = io.BytesIO(), HeadTail(2000)
        for stdout, stderr in api.exec_start(exec_id, stream=True, demux=True):
            out.write(stdout or b"")
            err.add(stderr or b"")
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code not in (0, 1):  # 1: a file changed while tar read it (a live agent process), which is fine
            raise SandboxError(f"container {self.container_id[:12]}: reading {self.task.workdir} with the image's "
                               f"tar failed (exit {code}; the docker backend needs bash and tar in the image): "
                               f"{err.render()}")
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

    def open_shell(self, max_pids: int = 256) -> DockerShell:
        """A persistent bash in the container (llm and command agents type into it); the container's
        pids limit bounds it, so `max_pids` is accepted for the interface and not used."""
        shell = DockerShell(self, max_pids)
        self.shells.add(shell)
        return shell

    # -- verify ----------------------------------------------------------------------------

    def verify(self, stage: Stage) -> VerifierResult:
        """Kill every agent process (its shells too, as local does), then run the stage's tests.

        Tests go in only now and are removed after; the reward is read after the verifier and
        everything it started are dead; /tmp is emptied first, as every local exec has a fresh
        one. One exec does it all (_VERIFY), with the tests and the reward in transit through a
        root-only directory. The terminal opens a new shell for the next part (files persist,
        shell state does not)."""
        top, nonce = f".hrbench-verify-{secrets.token_hex(8)}", f"HRBENCH-{secrets.token_hex(16)}"
        self.backend.client.api.put_archive(self.container_id, "/", _tests_tar(self.task, stage, top, nonce))
        limit = self.task.verifier_timeout_sec
        paths = list(dict.fromkeys(("/logs/artifacts", *self.task.artifacts, *stage.artifacts)))
        env = task_env(self.task, self.task.verifier_env, stage.verifier_env, where="[verifier.env]")
        run = self._run(["bash", "-c", _VERIFY, "hrbench", _REAPER, f"/{top}", f"{limit:.3f}",
                         _numeric(self.user), *paths], "0", limit + 60, env)
        for shell in list(self.shells):  # their bash died with every other agent process
            shell._release()
        if run.exit_code == 86:
            raise SandboxError(f"container {self.container_id[:12]}: {run.output[-400:]}")
        output, files, artifacts = _split_verifier_output(run.output, nonce)
        with tempfile.TemporaryDirectory(prefix="hrbench-reward-") as tmp:
            for name, data in files.items():
                (Path(tmp) / name).write_bytes(data)
            # The same reward semantics as local (Harbor's: reward.txt, else reward.json's `reward`;
            # no reward file is a verifier error, never a silent 0).
            try:
                rewards = _read_rewards(Path(tmp))
                reward, error = _unit(primary_reward(rewards)), None
            except RewardError as exc:
                rewards, reward, error = {}, 0.0, str(exc)
        if self.artifacts_dir is not None:
            self._save_artifacts(artifacts, self.artifacts_dir / stage.name)
        return VerifierResult(reward=reward, passed=error is None and reward >= 1.0 - 1e-9, output=output[-4000:],
                              duration_s=run.duration_s, rewards=rewards, error=error,
                              artifacts=[path for path, _ in artifacts])

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
            entries = save_artifacts(found, dest)
        if any(e.path in unread and e.saved for e in entries):
            for entry in entries:
                if entry.path in unread and entry.saved:
                    (dest / entry.saved).unlink()
                    entry.saved, entry.status = None, "over_limit"
            (dest / ARTIFACTS_MANIFEST).write_text(json.dumps([e.model_dump() for e in entries], indent=1))

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the container (every process in it dies with it), then the shells' relay processes."""
        self.backend.remove_container(self.container_id)
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
                 file_mb: int = 1024):
        """`cache_dir` holds only the build locks (the images live in the engine); trajectories go
        beside it, as with local. `file_mb` bounds each file a trial writes (RLIMIT_FSIZE, as local
        without root bounds its workspace): the container's writable layer has no quota."""
        self.cache_dir = Path(cache_dir)
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.pids_limit = pids_limit
        self.tmp_mb = tmp_mb
        self.file_mb = file_mb
        self.base_image = base_image
        self.docker_host = docker_host or os.environ.get("DOCKER_HOST")
        self._client: docker.DockerClient | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._known: set[str] = set()  # state images seen in the engine by this process
        self._users: dict[str, str] = {}  # image -> its agent user
        self.owner = secrets.token_hex(8)  # OWNER_LABEL of this backend's containers

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = _client(self.docker_host)
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
        """The tag of e_{stages_done}: a changed task or a changed recipe here is a new image."""
        key = hashlib.sha256(f"{task.content_hash()} {STATE_RECIPE}".encode()).hexdigest()[:12]
        return f"{self._repo(task)}:{key}-after-{stages_done}"

    def _has_image(self, ref: str) -> bool:
        import docker

        try:
            self.client.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _dockerfile(self, task: Task) -> str:
        """The task's Dockerfile with every FROM the engine lacks mapped to the base image."""
        path = task.path / "environment" / "Dockerfile"
        text = path.read_text() if path.is_file() else f"FROM {self.base_image}\nWORKDIR {task.workdir}\n"
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

    def _build_task_image(self, task: Task) -> str:
        """The task's environment/ built with the network off; returns the image id."""
        import docker

        with tempfile.TemporaryDirectory(prefix="hrbench-build-") as tmp:
            context = Path(tmp) / "context"
            env_dir = task.path / "environment"
            if env_dir.is_dir():
                shutil.copytree(env_dir, context)
            else:
                context.mkdir()
            (context / "Dockerfile.hrbench").write_text(self._dockerfile(task))
            try:
                image, _ = self.client.images.build(
                    path=str(context), dockerfile="Dockerfile.hrbench", rm=True, forcerm=True, pull=False,
                    network_mode="none", labels={LABEL: task.name})
            except docker.errors.BuildError as exc:
                lines = "".join(str(c.get("stream", c.get("error", ""))) for c in exc.build_log)
                raise SandboxError(f"task {task.name!r}: building {env_dir / 'Dockerfile'} failed: {exc}\n"
                                   f"{lines[-1500:]}") from exc
            except docker.errors.APIError as exc:
                raise SandboxError(f"task {task.name!r}: building {env_dir / 'Dockerfile'} failed: {exc}") from exc
        return image.id

    def _agent_user(self, image: str) -> str:
        """The image's own USER when it names a non-root one, else the sandbox uid 47000."""
        user = (self.client.images.get(image).attrs.get("Config") or {}).get("User") or ""
        return user if user not in ("", "root", "0", "0:0") else AGENT_USER

    def checkpoint_state(self, task: Task, stages_done: int) -> str:
        """The image of the oracle state after the first `stages_done` stages, built once and reused."""
        self.check_supported(task)
        ref = self.state_image(task, stages_done)
        if ref in self._known:
            return ref
        lock_path = self.cache_dir / "locks" / f"{ref.replace('/', '_').replace(':', '_')}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        # A thread lock here and a file lock for other processes on this host (Dagster's multiprocess
        # executor runs partitions of one task side by side); the engine's tag is the cache.
        with self._lock(ref), open(lock_path, "w") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            if self._has_image(ref):
                self._known.add(ref)
                return ref
            if stages_done == 0:
                built = self._build_task_image(task)
                env = self._container(task, built, user="0")
                try:
                    env.user = self._agent_user(built)
                    # the workdir and the persisted paths outside it (/output, /logs/artifacts, declared ones),
                    # the agent user's as local's are; their parents (/logs) stay root's
                    prep = env.root_exec('user=$1; shift; for d in "$@"; do mkdir -p "$d" && chown -R "$user" "$d" '
                                         '|| exit 1; done', [env.user, task.workdir, *task.persist], 120)
                    if prep.exit_code != 0:
                        raise SandboxError(f"task {task.name!r}: preparing {task.workdir} and {', '.join(task.persist)} "
                                           f"failed:\n{prep.output[-800:]}")
                    if task.setup_script is not None:
                        result = env.exec(task.setup_script.read_text(), task.agent_timeout_sec)
                        if result.exit_code != 0:
                            raise SandboxError(f"task {task.name!r}: environment/setup.sh failed:\n"
                                               f"{result.output[-800:]}")
                    env._reap_all()
                    self._commit(env, ref, env.user)
                finally:
                    env.close()
            else:
                env = self._container(task, self.checkpoint_state(task, stages_done - 1))
                try:
                    stage = task.stages[stages_done - 1]
                    result = env.run_solution(stage)
                    check = env.verify(stage)
                    if not check.passed:
                        raise SandboxError(
                            f"task {task.name!r}: replaying the reference solution of stage {stage.name!r} "
                            f"did not pass its verifier (reward {check.reward}) on the docker backend; run "
                            f"`hrbench tasks audit`.\n{result.output[-800:]}\n{check.output[-800:]}")
                    self._commit(env, ref, env.user)
                finally:
                    env.close()
            self._known.add(ref)
            return ref

    def _commit(self, env: DockerEnvironment, ref: str, user: str) -> None:
        repo, tag = ref.rsplit(":", 1)
        # the agent user travels as a label: the image's USER stays root, so root execs need no override
        # no pause: every agent process is dead by now (nothing writes), and runc's freezer can fail
        # under load ("pausing container ... to commit"), which would fail the whole state build
        self.client.api.commit(env.container_id, repository=repo, tag=tag, pause=False,
                               conf={"Labels": {LABEL: env.task.name, f"{LABEL}.user": user}})

    # -- containers ------------------------------------------------------------------------

    def _allow_internet(self, task: Task) -> bool:
        config = tomllib.loads((task.path / "task.toml").read_text())
        return bool(config.get("environment", {}).get("allow_internet", False))

    def _container(self, task: Task, image: str, user: str | None = None) -> DockerEnvironment:
        """A running container of `image` with the trial limits; `user` defaults to the image's agent user."""
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
            tmpfs={"/tmp": f"rw,exec,nosuid,size={self.tmp_mb}m,mode=1777"},
            # the agent user gets no capability; root's few serve the harness's own execs (chown the
            # workdir, kill the agent's processes, run the verifier as the agent user)
            cap_drop=["ALL"], cap_add=["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"],
            security_opt=["no-new-privileges"], log_config={"Type": "none", "Config": {}},
        )
        try:
            container_id = api.create_container(
                image, entrypoint=_MAIN[:1], command=_MAIN[1:], user="0", environment=_ENV,
                working_dir=task.workdir, hostname="hrbench", labels={LABEL: task.name, OWNER_LABEL: self.owner},
                host_config=host_config,
            )["Id"]
            try:
                api.start(container_id)
            except docker.errors.APIError:
                self.remove_container(container_id)
                raise
        except docker.errors.APIError as exc:
            raise SandboxError(f"task {task.name!r}: starting a container of {image} failed: {exc}") from exc
        return DockerEnvironment(self, task, container_id, user)

    def remove_container(self, container_id: str) -> None:
        import docker

        try:
            self.client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def start(self, task: Task, stages_done: int = 0, state: str | None = None) -> DockerEnvironment:
        """A fresh container of the checkpoint image, for one trial."""
        if state is not None:
            raise SandboxError(AGENT_STATES_UNSUPPORTED)
        env = self._container(task, self.checkpoint_state(task, stages_done))
        ready_for_first_stage(env, task, stages_done)
        return env

    def save_state(self, env: DockerEnvironment, state: str) -> None:
        raise SandboxError(AGENT_STATES_UNSUPPORTED)

    def restore(self, env: DockerEnvironment, stages_done: int) -> None:
        """State repair: the trial continues in a new container of the oracle state e_{stages_done}."""
        image = self.checkpoint_state(env.task, stages_done)
        for shell in list(env.shells):
            shell.close()
        fresh = self._container(env.task, image)
        self.remove_container(env.container_id)
        env.container_id, env.user = fresh.container_id, fresh.user
        env._begun = {i for i in env._begun if i < stages_done}  # the next stage's setup runs again
