"""Who owns a docker backend's containers, and the sweep of those whose owner died.

Every container a DockerBackend makes carries OWNER_LABEL = `<boot id>.<pid namespace>.<pid>.<start time>.<token>`:
the host's boot (/proc/sys/kernel/random/boot_id), the pid namespace (/proc/self/ns/pid) and the pid of
the harness process that made it, that process's start time (field 22 of /proc/PID/stat, in clock ticks
since boot: a pid reused by a later process has another), and a random token of the backend (a process
may hold several). A harness killed with its containers alive (SIGKILL, a test timeout) cannot remove
them; the first backend of a later process on the same engine does (`sweep_dead_owners`), removing every
container of its name (CONTAINER_PREFIX) whose owner is a dead process of its own boot and pid namespace. Containers of live owners,
of another host or boot, of another pid namespace (a harness in a container), and those whose label is
not of this form are never touched. State images are a cache and stay."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

OWNER_LABEL = "org.hrbench.backend"
# The name of every container a backend makes starts so. An image committed from a container keeps its labels
# (podman), the owner's too, and so does a container someone else starts from it: only ours are swept.
CONTAINER_PREFIX = "hrbench-"

_swept: set[str] = set()  # the engines this process has swept (once each)
_sweep_lock = threading.Lock()


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of `pid` from /proc/PID/stat, or None when it cannot be read (no such process,
    or a /proc that hides it). The command name, field 2, may hold spaces and parentheses: the fields
    after it are counted from its closing parenthesis."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def _host() -> tuple[str, str]:
    """(boot id, pid namespace) of this process: who can judge an owner's pid."""
    return (Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
            os.readlink("/proc/self/ns/pid").removeprefix("pid:[").rstrip("]"))


def owner_label(token: str) -> str:
    """OWNER_LABEL's value for a backend with `token`, in this process (read when asked: a forked child
    labels its containers as its own)."""
    boot, namespace = _host()
    pid = os.getpid()
    stat = _stat(pid)
    assert stat is not None  # a process can always read its own stat
    return f"{boot}.{namespace}.{pid}.{stat[1]}.{token}"


def dead_owner(label: str) -> bool:
    """Whether `label` names a process of this boot and pid namespace that is gone: no such pid, a zombie,
    or a pid now held by a process started at another time. False for anything this process cannot judge."""
    parts = label.split(".")
    if len(parts) != 5 or not parts[2].isdigit() or (parts[0], parts[1]) != _host():
        return False
    pid, started = int(parts[2]), parts[3]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        pass
    stat = _stat(pid)
    return stat is not None and (stat[0] == "Z" or stat[1] != started)


def sweep_dead_owners(client: docker.DockerClient, engine: str) -> int:
    """Remove the backends' containers on `engine` (its address, the once-per-process key) whose owner is dead
    (`dead_owner`); the first call per engine in a process does it, later ones return 0. Returns how
    many were removed."""
    import docker

    with _sweep_lock:
        if engine in _swept:
            return 0
        _swept.add(engine)
        # one call of the engine's list (the SDK's high-level list inspects every container it lists)
        dead = [c["Id"] for c in client.api.containers(all=True, filters={"label": OWNER_LABEL})
                if any(name.lstrip("/").startswith(CONTAINER_PREFIX) for name in c.get("Names") or [])
                and dead_owner((c.get("Labels") or {}).get(OWNER_LABEL, ""))]
        removed = 0
        for container in dead:
            try:
                client.api.remove_container(container, force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                pass  # another process's sweep took it
            except docker.errors.APIError as exc:
                log.warning("container %s of a dead hrbench process: could not remove it: %s", container[:12], exc)
        if removed:
            log.warning("removed %d container(s) left on %s by hrbench processes that died with them alive",
                        removed, engine)
        return removed
