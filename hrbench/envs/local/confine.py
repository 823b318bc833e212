"""Confinement shared by every sandboxed process: who it runs as, what it may use, how it ends.

Every process hrbench runs on behalf of a task or an agent (agent commands, the persistent shell,
setup.sh, solution replay, verifiers, a `command` agent's program) starts through `confined_argv`:

    launch -c <trial cgroup tasks>... -l <rlimit>... [-u 47000:47000] --   (launch.c, one exec)
      bwrap ... --unshare-user --unshare-all ...                        (unprivileged: a user namespace)
        the command

The launcher joins the trial's cgroups, sets the rlimits and, only when hrbench is root, drops to
SANDBOX_UID with every capability set (bounding set included) empty; then no_new_privs, then
bwrap. Where no C compiler is installed, `/bin/sh` (cgroups, ulimit) and `setpriv` do the same in
two execs. (Forking the harness to do it in Python costs more than both: a fork copies the page
tables of a Python process of some hundred MB, where these execs start from vfork.)

So the sandbox never holds host-root power: as root, bwrap itself starts as the dedicated
unprivileged uid `SANDBOX_UID` with no capabilities, and the sandbox's capabilities live in a
user namespace that owns none of the host's mounts, sysctls or files. bwrap starts with an empty
environment (the sandbox's pid 1 is its command, started with the cleared environment and the task's
variables only, so /proc/1/environ inside holds no host secret).

Limits are per trial where the host allows (a cgroup per trial: memory, pids, cpu) and per process
otherwise (RLIMIT_AS, RLIMIT_NPROC); CPU time is also bounded per process (RLIMIT_CPU); every writable mount of
the sandbox is a sized tmpfs; files are bounded by RLIMIT_FSIZE. docs/security.md states what
holds where.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import functools
import hashlib
import itertools
import os
import queue
import resource
import secrets
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hrbench.envs.base import SANDBOX_PATH, SandboxError

SANDBOX_UID = SANDBOX_GID = 47000  # outside any distribution's system and login ranges
# What the launcher (sh, setpriv, bwrap) sees: nothing of the harness's environment.
from hrbench.envs.launch_env import LAUNCH_ENV  # noqa: E402 - re-exported for the backend
_HOST_SECRETS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/ssl/private"]
_ROOT_SYMLINKS = [("usr/bin", "/bin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"), ("usr/sbin", "/sbin")]
_ROOT_TMPFS_BYTES = 1 << 20  # the sandbox's / holds only mount points, and is read-only once built
_MB = 1024 * 1024
_counter = itertools.count()


class SandboxLimits(BaseModel):
    """What one trial may use. Per trial where a cgroup is available, else per process (see docs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int = Field(1024, ge=16, description="memory of the whole trial (cgroup); also each process's "
                                                    "address space (RLIMIT_AS)")
    max_pids: int = Field(256, ge=8, description="processes of the whole trial (pids cgroup)")
    cpu_sec: int = Field(3600, ge=1, description="CPU seconds per process (RLIMIT_CPU)")
    tmp_mb: int = Field(256, ge=1, description="size of the sandbox's /tmp (tmpfs)")
    shm_mb: int = Field(64, ge=1, description="size of /dev/shm (tmpfs)")
    workspace_mb: int = Field(1024, ge=1, description="size of the workspace (a tmpfs when hrbench is root; "
                                                      "otherwise the largest file, RLIMIT_FSIZE)")
    cpus: float = Field(1.0, gt=0, description="CPU cores the trial may use at once (cpu cgroup quota), and an "
                                               "equal scheduling weight per trial")


def privileged() -> bool:
    """hrbench runs as root: the sandbox must drop to SANDBOX_UID before bwrap starts."""
    return os.geteuid() == 0


@functools.cache
def _tool(name: str) -> str:
    path = shutil.which(name, path=SANDBOX_PATH)
    if path is None:
        package = {"bwrap": "bubblewrap", "setpriv": "util-linux"}.get(name, name)
        raise SandboxError(f"{name} is not installed; the local backend needs it: apt-get install -y {package}")
    return path


@functools.cache
def bwrap_available() -> bool:
    """bwrap is installed (looked up once per process: every trial's start asks)."""
    return shutil.which("bwrap", path=SANDBOX_PATH) is not None


# -- the sandbox's filesystem -------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _host_root(pid: int) -> tuple[str, ...]:
    """The part of the root that depends on the host's layout (which secrets exist, whether /bin is
    a symlink), looked at once per process: a secret created under /etc after hrbench started is
    not masked until the next run (one that disappears makes every sandbox fail to start).

    As root, /etc is the process's masked view (`etc_view`: one bind per sandbox); otherwise bwrap
    binds the host's /etc and masks each secret itself (six more mounts per sandbox, each of which
    makes bwrap read the whole mount table). Keyed by `pid`, so a forked child makes its own view
    rather than binding its parent's, which goes when the parent exits."""
    view = etc_view()
    args = [_tool("bwrap"), "--size", str(_ROOT_TMPFS_BYTES), "--tmpfs", "/",
            "--ro-bind", "/usr", "/usr", "--ro-bind", str(view or "/etc"), "/etc"]
    for secret in _HOST_SECRETS if view is None else []:
        if os.path.isdir(secret):
            args += ["--tmpfs", secret, "--remount-ro", secret]
        elif os.path.lexists(secret):
            args += ["--ro-bind", "/dev/null", secret]
    for target, link in _ROOT_SYMLINKS:
        if os.path.islink(link) or not os.path.exists(link):
            args += ["--symlink", target, link]
        else:
            args += ["--ro-bind", link, link]
    return tuple(args)


_OPAQUE = "trusted.overlay.opaque"  # an overlay directory that hides what the layers below hold
_etc_view_lock = threading.Lock()
_etc_views: dict[int, Path] = {}  # the view a process made (by pid: a forked child makes its own), unmounted at exit


def etc_view() -> Path | None:
    """The host's /etc with its secrets masked, for every sandbox of this process to bind read-only:
    a read-only overlay (root only) whose top layer hides each secret (a whiteout for a file, an
    empty opaque directory for a directory: what the sandbox sees there is nothing, not an empty
    file) over the host's /etc below. Mounted once per process in the sandbox area (a folder of the
    harness's, 0711, named after this process so that `sweep_stale` removes a dead harness's) and
    unmounted at exit. None where it cannot be made or would not show what a bind of /etc shows
    (`_etc_view_fits`; not root; a kernel or filesystem without overlayfs, whiteouts or trusted
    xattrs): bwrap then masks the secrets per sandbox.

    Why: the masks cost six mount operations per sandbox, and bwrap reads the whole mount table
    for each (docs/performance.md); the view is one mount-table entry for the whole process. What
    it costs: the overlay caches what it has looked up, so a file of /etc that is created or
    replaced (rename) while the process runs may show inside its sandboxes as it was when a sandbox
    of the same process first looked it up (docs/security.md)."""
    if not privileged():
        return None
    with _etc_view_lock:
        known = _etc_views.get(os.getpid())
        if known is not None:
            return known
        try:
            if not _etc_view_fits():
                return None
        except OSError:
            return None
        folder = area_tempdir("etc")
        mask, view = folder / "mask", folder / "view"
        try:
            mask.mkdir(mode=0o755)
            view.mkdir(mode=0o755)
            for secret in _HOST_SECRETS:
                parts = Path(secret).relative_to("/etc").parts
                if not os.path.isdir(secret):
                    if len(parts) == 1:  # a file name is hidden even if it is made later
                        os.mknod(mask / parts[0], stat.S_IFCHR | 0o600, os.makedev(0, 0))  # overlayfs's whiteout
                    continue
                for depth in range(1, len(parts)):  # e.g. ssl/ of ssl/private
                    real, layer = Path("/etc", *parts[:depth]), mask.joinpath(*parts[:depth])
                    if not layer.exists():
                        info = os.stat(real)
                        layer.mkdir()  # not opaque: /etc's entries show through, with the host's mode and owner
                        os.chown(layer, info.st_uid, info.st_gid)
                        os.chmod(layer, stat.S_IMODE(info.st_mode))
                hidden = mask.joinpath(*parts)
                hidden.mkdir(mode=0o755)
                os.setxattr(hidden, _OPAQUE, b"y")
            if not _overlay(view, f"lowerdir={mask}:/etc", (mask,), _MS_RDONLY):
                raise OSError("the overlay mount was refused")
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        _etc_views[os.getpid()] = view
        return view


def _etc_view_fits() -> bool:
    """The overlay would show what `--ro-bind /etc /etc` shows, secrets aside: no mount point below /etc
    (overlayfs does not cross mounts, so it would show what a mount there covers: a container's bound
    /etc/hosts or resolv.conf, a path a service manager hid with a mount) and no secret reached through a
    symlink (a whiteout would hide the link, not what it leads to, which bwrap's mask covers)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[4].startswith("/etc/"):
            return False
    for secret in _HOST_SECRETS:
        path = Path("/etc")
        for part in Path(secret).relative_to("/etc").parts:
            path = path / part
            if path.is_symlink():
                return False
    return True


@atexit.register
def _unmount_etc_view() -> None:
    with _etc_view_lock:
        view = _etc_views.pop(os.getpid(), None)
    if view is not None:
        unmount(view)
        shutil.rmtree(view.parent, ignore_errors=True)


def root_mounts(limits: SandboxLimits) -> list[str]:
    """bwrap arguments for the sandbox's root: a small tmpfs with read-only /usr and /etc.

    Binding / (or /opt, /var, /home) would expose the task registry, and with it every solve.sh
    and test, to the agent; /etc's secrets are masked."""
    # /dev is bwrap's own tmpfs: made read-only so it cannot be filled; /dev/shm and /tmp are sized.
    view = _etc_views.get(os.getpid())
    if view is not None and not os.path.ismount(view):  # its empty folder would be the sandbox's /etc
        raise SandboxError(f"the sandboxes' /etc view {view} is no longer mounted; run again")
    return [*_host_root(os.getpid()), "--dev", "/dev", "--size", str(limits.shm_mb * _MB), "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev", "--proc", "/proc", "--size", str(limits.tmp_mb * _MB), "--tmpfs", "/tmp"]


def namespace_args(*, network: bool = False, nested_userns: bool = False, env: dict[str, str] | None = None,
                   chdir: str = "/", joined_netns: bool = False) -> list[str]:
    """The tail of a bwrap command line: namespaces, a read-only root, a clean environment.

    `joined_netns`: the launcher has joined the trial's network namespace (`-n`), so bwrap makes every
    namespace but that one (`--unshare-all` less `--unshare-net`)."""
    unshare = ["--unshare-user-try", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"] \
        if joined_netns else ["--unshare-all"]
    # --as-pid-1: the command is the pid namespace's init, not a child of bwrap's own reaper. That reaper
    # outlives bwrap (bwrap exits on the command's status without waiting for it), so every sandbox left a
    # process for the host's init to reap, counted against the trial's process bound until then: forever
    # where that init is the harness itself (a container's PID 1 reaps nothing it did not start). One
    # process fewer per sandbox, too (docs/performance.md).
    args = ["--remount-ro", "/", *unshare, "--unshare-user", "--as-pid-1", "--die-with-parent", "--new-session"]
    if network:
        args.append("--share-net")
    if not nested_userns:  # a verifier may nest bwrap (to run agent code without /logs); agents need not
        args.append("--disable-userns")
    args += ["--clearenv", "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8"]
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    return args + ["--chdir", chdir]


# -- the trial's network namespace ------------------------------------------------------------------

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


_NETNS_SPARES = 2  # namespaces made ahead: a trial's start takes one instead of waiting for one to be made
_NETNS_STOPPED = -1  # what the maker hands out once it has stopped
_netns_ready: dict[int, queue.Queue] = {}  # per process (a forked child starts a maker of its own)
_netns_lock = threading.Lock()


def new_network_namespace() -> int | None:
    """A new, empty network namespace (its loopback up, nothing else) held by an fd, for the sandboxes
    of one trial; None where it cannot be made or joined (not root, or no compiled launcher; or the
    making failed this time): each sandbox then gets its own from bwrap (`--unshare-net`).

    Made ahead by a thread of this process's that does nothing else (`_make_network_namespaces`):
    unshare(CLONE_NEWNET) moves only the calling thread, so the harness's other threads never leave
    the host's namespace. Created by root, the namespace belongs to the host's user namespace, in
    which the sandbox holds no capability: it can neither add an interface nor change a sysctl of
    it. Each namespace is handed to one trial only, never shared between trials; the fd is closed
    when the trial ends (the kernel then frees it)."""
    if not privileged() or launcher() is None:
        return None
    with _netns_lock:
        ready = _netns_ready.get(os.getpid())
        if ready is None:
            ready = queue.Queue(maxsize=_NETNS_SPARES)
            try:
                threading.Thread(target=_make_network_namespaces, args=(ready,), name="hrbench-netns",
                                 daemon=True).start()
            except RuntimeError:  # no thread to be had now (a pids bound): this trial goes without
                return None
            _netns_ready[os.getpid()] = ready
    made = ready.get()
    if made == _NETNS_STOPPED:
        ready.put(_NETNS_STOPPED)  # every later trial is told so too
        return None
    return made


def _make_network_namespaces(ready: queue.Queue) -> None:
    """Keep `ready` stocked with new namespaces: each made in this thread (unshare), its loopback set up
    (what bwrap does), kept as an fd, and left (setns back to the host's), so this thread holds none of
    the namespaces it hands out. A namespace that could not be made is handed out as None (that trial
    falls back to bwrap's namespace per sandbox); the maker stops only when it cannot go back to the
    host's namespace, or on anything unexpected, and then says so to every trial after."""
    try:
        host = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        while True:
            made = None
            if _libc().unshare(_CLONE_NEWNET) == 0:
                try:
                    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS,
                                                                    struct.pack("16sH14x", b"lo", 0)))[1]
                        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
                    made = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    pass
                if _libc().setns(host, _CLONE_NEWNET) != 0:  # stuck inside: hand out nothing more
                    if made is not None:
                        os.close(made)
                    return
            ready.put(made)  # blocks while _NETNS_SPARES are waiting
    finally:
        ready.put(_NETNS_STOPPED)


# -- cgroups ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _cgroup_bases() -> dict[str, Path]:
    """Where this process may create child cgroups, per controller (memory, pids, cpu).

    The base is the cgroup hrbench itself runs in (as /proc/self/cgroup names it), so a delegated
    subtree (systemd's Delegate=, a container's own cgroup) works as well as the root hierarchy."""
    try:
        bases = cgroup_bases(Path("/proc/self/cgroup").read_text(), Path("/proc/self/mountinfo").read_text())
    except OSError:
        return {}
    return {name: base for name, base in bases.items() if os.access(base, os.W_OK)}


def cgroup_bases(proc_cgroup: str, mountinfo: str) -> dict[str, Path]:
    """The directory of this process's own memory, pids and cpu cgroups, from /proc/self/cgroup and
    /proc/self/mountinfo. A hierarchy may be mounted from inside (a container sees its own cgroup
    as the mount's root, while /proc/self/cgroup still names the full path), so the path is taken
    relative to the mount's root before it is joined to the mount point."""
    own: dict[str, str] = {}
    try:
        for line in proc_cgroup.splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else ["<v2>"]:
                own[name] = path
    except ValueError:
        return {}
    mounts: dict[str, tuple[str, Path]] = {}  # controller -> (root inside the hierarchy, mount point)
    try:
        for line in mountinfo.splitlines():
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3].split(",")
            if fstype == "cgroup2":
                mounts.setdefault("<v2>", (fields[3], Path(fields[4])))
            elif fstype == "cgroup":
                for name in CONTROLLERS:
                    if name in options:
                        mounts.setdefault(name, (fields[3], Path(fields[4])))
    except (ValueError, IndexError):
        return {}

    def inside(key: str) -> Path | None:
        root, point = mounts[key]
        relative = os.path.relpath(own[key], root)
        return None if relative.startswith("..") else point / ("" if relative == "." else relative)

    bases: dict[str, Path] = {}
    for name in CONTROLLERS:
        if name in mounts and name in own:
            base = inside(name)
        elif "<v2>" in mounts and "<v2>" in own:
            base = inside("<v2>")
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split() if base is not None else []
            except OSError:
                enabled = []
            if name not in enabled:
                base = None
        else:
            base = None
        if base is not None:
            bases[name] = base
    return bases


@functools.cache
def _join_file(base: Path) -> str:
    """The file of a child group of `base` that a process joins by: `tasks` in a v1 hierarchy,
    `cgroup.procs` in v2 (the same for every group of a hierarchy: looked at once)."""
    return "cgroup.procs" if (base / "cgroup.controllers").exists() else "tasks"


CONTROLLERS = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000
_POOL_SIZE = 32  # emptied cgroups kept for reuse: creating and removing a memory cgroup is slow
_pool: list[tuple[dict[str, Path], SandboxLimits]] = []  # emptied groups and the limits they hold
_pool_lock = threading.Lock()


class TrialCgroup:
    """The cgroups (memory, pids, cpu) every sandboxed process of one trial joins; killed at its end.

    cpu: a quota of `limits.cpus` cores (v1 cpu.cfs_quota_us, v2 cpu.max) and the default weight,
    so a trial's busy loops and fork bombs share at most that much CPU between them, and every
    trial (agent or verifier side) weighs the same to the scheduler however many processes it runs.

    Where a controller is unavailable the trial falls back to per-process rlimits (`enforced`
    says which controllers hold). `release` empties the cgroups and keeps them for the next trial
    of this process; `remove` deletes them."""

    def __init__(self, name: str, limits: SandboxLimits, existing: dict[str, Path] | None = None):
        self.limits = limits
        self.dirs: dict[str, Path] = dict(existing or {})
        if existing is not None:  # adopting groups already there (a dead harness's, to remove them)
            return
        with _pool_lock:
            reused, held = _pool.pop() if _pool else (None, None)
        if reused is not None:
            try:
                if held != limits:  # a pooled group keeps its limits: only different ones are written
                    for controller, group in reused.items():
                        self._limit(controller, group)
                self.dirs = reused
                return
            except OSError:
                TrialCgroup(name, limits, existing=reused).remove()
        leaf = f"hrbench-{os.getpid()}-{name}-{next(_counter)}-{secrets.token_hex(3)}"
        for controller, base in _cgroup_bases().items():
            group = base / leaf
            try:
                group.mkdir(exist_ok=True)
                self._limit(controller, group)
            except OSError:
                self._rmdir(group)
                continue
            self.dirs[controller] = group

    def _limit(self, controller: str, group: Path) -> None:
        if controller == "memory":
            self._set_memory(group, self.limits.memory_mb * _MB)
        elif controller == "cpu":
            quota = max(1000, round(self.limits.cpus * _CPU_PERIOD_US))
            if (group / "cpu.cfs_quota_us").exists():  # cgroup v1
                (group / "cpu.cfs_period_us").write_text(str(_CPU_PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
            else:
                (group / "cpu.max").write_text(f"{quota} {_CPU_PERIOD_US}")
        elif controller == "pids":
            (group / "pids.max").write_text(str(self.limits.max_pids))

    @staticmethod
    def _set_memory(group: Path, limit: int) -> None:
        if (group / "memory.limit_in_bytes").exists():  # cgroup v1
            files = [group / "memory.limit_in_bytes", group / "memory.memsw.limit_in_bytes"]
            files = [f for f in files if f.exists()]
            try:  # memsw must stay >= the memory limit: lowering sets memory first, raising memsw first
                for f in files:
                    f.write_text(str(limit))
            except OSError:
                for f in reversed(files):
                    f.write_text(str(limit))
        else:
            (group / "memory.max").write_text(str(limit))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")

    @property
    def enforced(self) -> set[str]:
        return set(self.dirs)

    def join_files(self) -> list[str]:
        """The files a single-threaded process writes "0" into to join the trial: a v1 group's
        `tasks` (a thread moving itself skips the global lock, whose RCU grace period made every
        `cgroup.procs` write wait 5-9 ms, docs/security.md), a v2 group's `cgroup.procs`."""
        return sorted({str(group / _join_file(group.parent)) for group in self.dirs.values()})

    def limit_events(self) -> dict[str, int]:
        """How often the trial's processes have met its bounds so far: OOM kills (memory) and refused
        forks (pids). Cumulative over a pooled group's life: compare two readings."""
        events: dict[str, int] = {}
        for controller, file, key in (("memory", "memory.events", "oom_kill"), ("memory", "memory.oom_control", "oom_kill"),
                                      ("pids", "pids.events", "max")):
            group = self.dirs.get(controller)
            if group is None or key in events and controller == "memory":
                continue
            try:
                text = (group / file).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    events["oom_kill" if controller == "memory" else "fork_refused"] = int(value)
        return events

    def pids(self) -> set[int]:
        found: set[int] = set()
        for group in self.dirs.values():
            try:
                found.update(int(p) for p in (group / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return found

    def empty(self) -> bool:
        """No process is left in the trial, read from one of its cgroups: every process of the trial
        is in all of them, since the launcher joins them all before anything runs and nothing
        inside can move (listing a v1 cgroup's members is the costly part of emptying a trial)."""
        for group in self.dirs.values():
            try:
                fd = os.open(group / "cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                return not os.read(fd, 64).strip()
            except OSError:
                continue
            finally:
                os.close(fd)
        return True

    def kill(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every process of the trial and wait until none is left; True when empty."""
        if not self.dirs or self.empty():  # an empty trial has no process that could fork into it
            return True
        pids_max = self.dirs.get("pids")
        if pids_max is not None:
            _write(pids_max / "pids.max", "0")  # nothing can fork while the group is emptied
        deadline = time.monotonic() + timeout_s
        pause = 0.0001  # killed processes are usually gone within a millisecond: poll fast, then back off
        try:
            while True:
                alive = set() if self.empty() else self.pids()
                if not alive:
                    return True
                if time.monotonic() > deadline:
                    return False
                for pid in alive:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(pause)
                pause = min(pause * 2, 0.005)
        finally:
            if pids_max is not None:
                _write(pids_max / "pids.max", str(self.limits.max_pids))

    def release(self) -> None:
        """Kill what is left; keep the emptied cgroups for this process's next trial."""
        if self.kill() and self.dirs:
            with _pool_lock:
                if len(_pool) < _POOL_SIZE:
                    _pool.append((self.dirs, self.limits))
                    self.dirs = {}
                    return
        self.remove()

    def remove(self) -> None:
        """Kill what is left, then delete the cgroups."""
        self.kill()
        for group in self.dirs.values():
            self._rmdir(group)
        self.dirs = {}

    @staticmethod
    def _rmdir(group: Path) -> None:
        for _ in range(50):
            try:
                group.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # the last killed process is still leaving


@atexit.register
def _drain_pool() -> None:
    with _pool_lock:
        groups, _pool[:] = list(_pool), []
    for dirs, _ in groups:
        TrialCgroup("pooled", SandboxLimits(), existing=dirs).remove()


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass


# -- the launcher ---------------------------------------------------------------------------------

_LAUNCH_SOURCE = Path(__file__).with_name("launch.c")
# Linked statically where the C library's archive is installed: every sandbox execs the launcher, and a static
# one skips the dynamic loader's work at each exec (docs/performance.md); otherwise linked dynamically
_LAUNCH_BUILDS = (("-O2", "-Wall", "-static"), ("-O2", "-Wall"))


@functools.lru_cache(maxsize=1)
def launcher() -> str | None:
    """The compiled launcher (launch.c), built once per version of its source into the sandbox
    area; None where no C compiler is installed or it cannot build the launcher (the launcher is
    then `sh` + `setpriv`: the same steps in two more execs, about 2 ms more CPU per sandboxed
    process, docs/security.md)."""
    recipe = _LAUNCH_SOURCE.read_bytes() + repr(_LAUNCH_BUILDS).encode()  # a new way to build it: a new binary
    folder = sandbox_area() / "launcher"
    binary = folder / f"launch-{hashlib.sha256(recipe).hexdigest()[:16]}"
    if not binary.exists():
        compiler = shutil.which("cc", path=SANDBOX_PATH) or shutil.which("gcc", path=SANDBOX_PATH)
        if compiler is None:
            return None
        folder.mkdir(mode=0o755, exist_ok=True)
        building = folder / f".{binary.name}-{os.getpid()}-{threading.get_ident()}"
        for flags in _LAUNCH_BUILDS:
            built = subprocess.run([compiler, *flags, "-o", str(building), str(_LAUNCH_SOURCE)], env=LAUNCH_ENV,
                                   capture_output=True, text=True, check=False)
            if built.returncode == 0:
                break
        if built.returncode != 0:  # e.g. a compiler without the C library's headers: same steps, two execs
            building.unlink(missing_ok=True)
            return None
        os.chmod(building, 0o755)
        os.replace(building, binary)  # atomic: concurrent harnesses may build it side by side
    info = binary.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxError(f"{binary} is not a regular file owned by uid {os.geteuid()} and writable only by it; "
                           "remove it (someone else may have planted it) and run again")
    return str(binary)


def confined_argv(bwrap_args: list[str], command: list[str], limits: SandboxLimits,
                  cgroup: TrialCgroup | None, netns: int | None = None) -> list[str]:
    """The full command line: join the trial's cgroups, set rlimits, drop to SANDBOX_UID, bwrap.

    Run it with `env=LAUNCH_ENV` (so no process of the launch holds a host secret) and
    `start_new_session=True` (so killing its process group ends bwrap, and with it the sandbox's
    pid namespace). `netns` (from `new_network_namespace`, so only with the compiled launcher) is
    joined by the launcher: pass it to the process (`pass_fds`) and build `bwrap_args` with
    `joined_netns=True`."""
    enforced = cgroup.enforced if cgroup is not None else set()
    procs = cgroup.join_files() if cgroup is not None else []
    # RLIMIT_NPROC counts per uid, and every trial's sandbox runs as the same uid: only a fallback
    rlimits = [(resource.RLIMIT_AS, limits.memory_mb * _MB), (resource.RLIMIT_FSIZE, limits.workspace_mb * _MB),
               (resource.RLIMIT_CPU, limits.cpu_sec)]
    if "pids" not in enforced:
        rlimits.append((resource.RLIMIT_NPROC, limits.max_pids))
    tail = bwrap_args + ["--"] + command
    helper = launcher()
    if helper is not None:
        argv = [helper]
        for path in procs:
            argv += ["-c", path]
        for which, value in rlimits:
            argv += ["-l", f"{which}={value}"]
        if netns is not None:
            argv += ["-n", str(netns)]
        if privileged():
            argv += ["-u", f"{SANDBOX_UID}:{SANDBOX_GID}"]
        return argv + ["--"] + tail
    if netns is not None:
        raise SandboxError("a shared network namespace needs the compiled launcher")
    # no compiler: the same steps by sh and setpriv (dash's ulimit: -v KiB, -f 512-byte blocks)
    flags = {resource.RLIMIT_AS: ("-v", 1024), resource.RLIMIT_FSIZE: ("-f", 512), resource.RLIMIT_CPU: ("-t", 1),
             resource.RLIMIT_NPROC: ("-p", 1)}
    script = "".join(f"echo 0 > {shlex.quote(path)} || exit 125\n" for path in procs) \
        + "".join(f"ulimit {flags[which][0]} {value // flags[which][1]} || exit 125\n" for which, value in rlimits) \
        + 'exec "$@"\n'
    drop: list[str] = []
    if privileged():
        drop = [_tool("setpriv"), f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return ["/bin/sh", "-c", script, "hrbench-sandbox"] + drop + tail


# -- ownership and sized workspaces ---------------------------------------------------------------

def sandbox_owner(path: Path) -> None:
    """Hand a tree to the sandbox uid (when root), so the sandbox can write it; symlinks untouched."""
    if not privileged():
        return
    os.lchown(path, SANDBOX_UID, SANDBOX_GID)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_GID)


# areas found to be ours: in /tmp (sticky) no other uid can replace a directory of the harness's
_checked_areas: set[Path] = set()


def sandbox_area() -> Path:
    """A directory the sandbox uid can traverse, for workspaces and staging (bwrap resolves its
    bind sources as that uid, so they cannot live under an unreadable /root)."""
    import tempfile

    area = Path(tempfile.gettempdir()) / f"hrbench-sandbox-{os.geteuid()}"
    if area in _checked_areas and os.path.isdir(area):  # checked once per process (every trial asks)
        return area
    try:
        area.mkdir(mode=0o711, exist_ok=True)
        info = area.lstat()
    except OSError as exc:
        raise SandboxError(f"cannot create the sandbox area {area}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxError(f"{area} is not a directory owned by uid {os.geteuid()} and writable only by it; "
                           "remove it (someone else may have planted it) and run again")
    if privileged() and stat.S_IMODE(info.st_mode) != 0o711:
        os.chmod(area, 0o711)
    _checked_areas.add(area)
    return area


def area_tempdir(prefix: str, parent: Path | None = None) -> Path:
    """A new directory for the sandbox (mode 0711, so the sandbox uid may traverse it), named after
    this process so that `sweep_stale` can tell a dead harness's leftovers."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=parent or sandbox_area()))
    os.chmod(folder, 0o711)
    return folder


def _owner_alive(name: str, position: int) -> bool:
    try:
        pid = int(name.split("-")[position])
    except (IndexError, ValueError):
        return True  # not ours: leave it alone
    return Path(f"/proc/{pid}").exists()


@functools.cache
def sweep_stale(area: Path) -> None:
    """Once per process: remove what a harness that died (SIGKILL, OOM) left behind in the sandbox
    area (workspace tmpfs mounts, staging dirs) and its trial cgroups."""
    for entry in area.iterdir() if area.is_dir() else []:
        if entry.name.startswith(("ws-", "build-", "verify-", "staged-", "etc-")) and not _owner_alive(entry.name, 1):
            for mounted in (entry / "logs", entry / "view", entry):
                if os.path.ismount(mounted):
                    unmount(mounted)
            shutil.rmtree(entry, ignore_errors=True)
    for controller, base in _cgroup_bases().items():
        for group in base.glob("hrbench-*"):
            if group.is_dir() and not _owner_alive(group.name, 1):
                TrialCgroup(group.name, SandboxLimits(), existing={controller: group}).remove()


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MNT_DETACH = 1, 2, 4, 2
_PAGE = 4096


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_sized_tmpfs(path: Path, size_mb: int, harness_owned: bool = False, reserved: int = 0) -> bool:
    """Mount a tmpfs of `size_mb` less `reserved` bytes on `path` (root only; False if not possible, or
    if nothing is left), its root owned by the sandbox uid, or with `harness_owned` by the harness and
    traversable only (0711)."""
    size = size_mb * _MB - reserved
    if not privileged() or size < _PAGE:
        return False
    owner = "mode=0711,uid=0,gid=0" if harness_owned else f"mode=0755,uid={SANDBOX_UID},gid={SANDBOX_GID}"
    data = f"size={size},{owner}".encode()
    ok = _libc().mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, data) == 0
    return ok


def mount_overlay(lower: Path, upper: Path, work: Path, target: Path) -> bool:
    """Mount `lower` read-only under a writable `upper` at `target` (root only; False if not possible).

    A write to a file of `lower` copies it up into `upper` first (the kernel's copy-up, as root), so
    nothing done through `target` reaches `lower`: not a write, a truncation, a chmod, nor a write
    through a hard link the agent made (links are made in `upper`, to the copied-up file).
    `redirect_dir=on` lets a directory of `lower` be renamed as on a plain filesystem (without it
    rename(2) of such a directory fails with EXDEV, which `mv` hides and a program's rename does not)."""
    return privileged() and _overlay(target, f"lowerdir={lower},upperdir={upper},workdir={work},redirect_dir=on",
                                     (lower, upper, work))


def _overlay(target: Path, options: str, paths: tuple[Path, ...], flags: int = 0) -> bool:
    """Mount an overlay (nosuid, nodev, plus `flags`) at `target` whose `options` name `paths`; False when
    the kernel refuses it or a path holds a character the option string cannot carry unescaped."""
    if any(c in str(path) for path in paths for c in ",:\\"):
        return False
    return _libc().mount(b"overlay", str(target).encode(), b"overlay", flags | _MS_NOSUID | _MS_NODEV,
                         options.encode()) == 0


def unmount(path: Path) -> None:
    """Detach the mount at `path` and every mount below it (MNT_DETACH is recursive)."""
    _libc().umount2(str(path).encode(), _MNT_DETACH)
