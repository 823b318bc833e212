"""The attack sequence of tests/security: what a hostile agent types from inside a trial.

Run as a program so the suite can start it as root and as an unprivileged user, on either backend:

    python -m tests.security.attacks OUT_JSON [--backend local|docker] [--docker-host URL]

It opens a trial environment of the fixture task with small limits, types each attack into the
agent's persistent shell (as an `llm` or `command` agent would), prints the attack and whether the
sandbox held, and writes {attack: {"held": bool, "detail": str}} to OUT_JSON. The harness's own
environment carries a fake OPENAI_API_KEY (set by the caller) that must not be readable inside.

What the agent types is the same on both backends; what the harness looks at to judge it is the
backend's (`LocalSide`, `DockerSide`): on local the sandbox's bwrap and cgroups seen from the host
and the host's files, on docker the container's inspect and its processes seen from the host, and
the files of the container (where a write outside the workspace would land) as well as the host's.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import tempfile
import time
from pathlib import Path

from hrbench.envs.local.confine import (
    SANDBOX_GID,
    SANDBOX_UID,
    SandboxLimits,
    TrialCgroup,
    privileged,
)
from hrbench.envs.local import LocalBackend
from hrbench.harness.terminal import ShellTerminal
from hrbench.tasks.loader import load_task

TINY_TASK = Path(__file__).resolve().parents[1] / "fixtures" / "registry" / "tiny-chain"
LIMITS = SandboxLimits(memory_mb=256, max_pids=64, tmp_mb=32, shm_mb=8, workspace_mb=64)
FAKE_KEY = os.environ.get("OPENAI_API_KEY", "")


class Trial:
    """One environment and the agent's terminal; `sh` types a command and returns what the agent sees."""

    def __init__(self, backend):
        self.env = backend.start(load_task(TINY_TASK), 0)
        self.terminal = ShellTerminal(self.env)

    def sh(self, command: str, wait_s: float = 20.0) -> str:
        self.terminal.run(command, wait_s, wait_s)
        return self.terminal.read()


def _alive_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _status_fields(text: str) -> dict[str, str]:
    """/proc/PID/status lines as {field: value with whitespace collapsed}."""
    return {k.strip(): " ".join(v.split()) for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


def _unprivileged(status: dict[str, str], bounding: str | None = "0" * 16,
                  ids: tuple[int, int] | None = None) -> bool:
    """`ids` (default: the sandbox uid, the harness's own when not root) in every id, no group, no
    capability, no_new_privs, and the bounding set `bounding` (None: not checked).

    A harness that is not root cannot empty its own bounding set (nor gain anything from it under
    no_new_privs); inside the sandbox bwrap empties it; a container keeps the few its root execs
    need (DockerSide), which no_new_privs keeps from the agent."""
    uid, gid = map(str, ids or ((SANDBOX_UID, SANDBOX_GID) if privileged() else (os.geteuid(), os.getegid())))
    return (status.get("Uid") == " ".join([uid] * 4) and status.get("Gid") == " ".join([gid] * 4)
            and status.get("Groups", "") in ("", gid)  # bwrap's user namespace shows its own gid at most
            and all(status.get(f"Cap{s}") == "0" * 16 for s in ("Inh", "Prm", "Eff", "Amb"))
            and (bounding is None or status.get("CapBnd") == bounding)
            and status.get("NoNewPrivs") == "1")


def _mount_of(group: Path) -> Path:
    """The cgroup filesystem mount a cgroup directory lives under (its /proc/PID/cgroup paths are relative to it)."""
    while not os.path.ismount(group):
        group = group.parent
    return group


def _cgroups_of(pid: int) -> dict[str, str]:
    """{controller: cgroup path} of a host process (cgroup v1 lines `N:ctl1,ctl2:/path`)."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        out.update({c: path for c in controllers.split(",") if c})
    return out


class LocalSide:
    """What the harness looks at on the local backend: bwrap and the trial's cgroups seen from the
    host; the sandbox's filesystem is the host's (binds and tmpfs), so a created file is looked for there."""

    name = "local"
    masked = "/etc/shadow"  # bound over by an empty file
    inside_dirs: tuple[str, ...] = ()  # no filesystem of its own beyond the host's

    def __init__(self, trial: Trial):
        self.env = trial.env
        self.tmp_mb, self.shm_mb = LIMITS.tmp_mb, LIMITS.shm_mb

    @property
    def agent_ids(self) -> tuple[int, int] | None:
        return None  # the sandbox uid when root, else the harness's own

    agent_bounding = "0" * 16  # bwrap empties it

    @property
    def workspace_sized(self) -> bool:
        return self.env.workspace_is_sized

    def confinement(self) -> tuple[str, bool, str]:
        shells = [s for s in self.env._shells if not s.closed]
        outside = {}
        for shell in shells:  # the sandbox's outermost process, bwrap, seen from the host
            outside = _status_fields(Path(f"/proc/{shell.proc.pid}/status").read_text())
            outside["cgroups"] = Path(f"/proc/{shell.proc.pid}/cgroup").read_text()
        trial_groups = {c: "/" + str(d.relative_to(_mount_of(d))) for c, d in self.env.cgroup.dirs.items()}
        joined = {c: next((line.split(":", 2)[2] for line in outside.get("cgroups", "").splitlines()
                           if c in line.split(":")[1].split(",")), None) for c in trial_groups}
        return ("start bwrap with host privileges or outside the trial's cgroups",
                len(shells) == 1 and outside.get("Name") == "bwrap"
                and _unprivileged(outside, bounding="0" * 16 if privileged() else None)
                and joined == trial_groups,
                (f"bwrap on the host: uid {outside.get('Uid')}, bounding set {outside.get('CapBnd')}, no_new_privs "
                 f"{outside.get('NoNewPrivs')}; cgroups {joined} (the trial's: {trial_groups})"))

    def found_inside(self, paths: list[str]) -> list[str]:
        """Which of `paths` exist where the sandbox's writes land (the host's filesystem)."""
        return [p for p in paths if os.path.lexists(p)]

    def secret_outside(self) -> tuple[bool, str]:
        return True, ""  # the sandbox starts with a cleared environment (--clearenv): nothing more to look at

    def memory_detail(self) -> str:
        return f"cgroups: {sorted(self.env.cgroup.enforced)}"

    def ended(self) -> tuple[bool, str]:
        return True, ""  # the workspace is deleted; the processes are what is checked


# The bounding set of a trial container: the six capabilities docker.py adds back for the harness's
# own root execs (CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, KILL 5, SETGID 6, SETUID 7), none more.
DOCKER_BOUNDING = f"{(1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7):016x}"
# Where an agent's file would land inside a container outside its workspace; the trial's own
# scratch (/tmp, /var/tmp, /dev/shm, the workdir, /output, /logs/artifacts) dies with the container.
CONTAINER_DIRS = ("/bin", "/lib", "/sbin", "/srv", "/mnt", "/media", "/logs", "/var/lib", "/var/log",
                  "/usr/local/bin", "/etc/cron.d")


class DockerSide:
    """What the harness looks at on the docker backend: the container's inspect, its init and the
    agent's shell seen from the host (rootful podman: no user namespace, so host ids are the
    container's), and the container's own filesystem (through a root exec) besides the host's."""

    name = "docker"
    masked = "/sys/firmware"  # one of the engine's masked paths (an empty tmpfs over it); the host's lists acpi/ ...
    inside_dirs = ("/", "/usr", "/etc", "/var", "/root", "/home", "/opt", "/run", "/dev", "/proc", "/sys",
                   *CONTAINER_DIRS)
    agent_bounding = DOCKER_BOUNDING
    workspace_sized = True  # the workdir is a tmpfs of the workspace size (docs/docker.md)

    def __init__(self, trial: Trial):
        self.env = trial.env
        self.api = self.env.backend.client.api
        self.info = self.api.inspect_container(self.env.container_id)
        uid, _, gid = self.env.user.partition(":")
        self.agent_ids = (int(uid), int(gid or uid))
        self.tmp_mb = self.env.backend.tmp_mb
        self.shm_mb = (self.info["HostConfig"].get("ShmSize") or 0) // (1 << 20)

    def confinement(self) -> tuple[str, bool, str]:
        host, cid = self.info["HostConfig"], self.env.container_id
        shells = [s for s in self.env.shells if s.alive]
        bash = [pid for s in shells for pid in _alive_with(f"hrbench-shell-{s.shell_id}")]
        shell = _status_fields(Path(f"/proc/{bash[0]}/status").read_text()) if len(bash) == 1 else {}
        init_pid = self.info["State"]["Pid"]
        init = _status_fields(Path(f"/proc/{init_pid}/status").read_text())
        groups = {"shell": _cgroups_of(bash[0]) if len(bash) == 1 else {}, "init": _cgroups_of(init_pid)}
        joined = {who: {c: g.get(c) for c in ("memory", "pids")} for who, g in groups.items()}
        memory = LIMITS.memory_mb << 20
        held = (len(shells) == 1 and shell.get("Name") == "bash"
                and _unprivileged(shell, bounding=DOCKER_BOUNDING, ids=self.agent_ids)
                and init.get("NoNewPrivs") == "1" and init.get("CapBnd") == DOCKER_BOUNDING
                and all(path and cid in path for g in joined.values() for path in g.values())
                and not host.get("Privileged") and host.get("NetworkMode") == "none"
                and host.get("Memory") == memory and host.get("MemorySwap") == memory
                and host.get("PidsLimit") == LIMITS.max_pids)
        return ("start the container privileged, networked, unbounded or the agent's shell outside its cgroups",
                held,
                (f"agent's bash on the host: uid {shell.get('Uid')}, CapEff {shell.get('CapEff')}, bounding set "
                 f"{shell.get('CapBnd')}, no_new_privs {shell.get('NoNewPrivs')}; container init: uid "
                 f"{init.get('Uid')}, bounding set {init.get('CapBnd')} (want {DOCKER_BOUNDING}), no_new_privs "
                 f"{init.get('NoNewPrivs')}; cgroups {joined} (container {cid[:12]}); inspect: Privileged "
                 f"{host.get('Privileged')}, NetworkMode {host.get('NetworkMode')}, Memory {host.get('Memory')}, "
                 f"MemorySwap {host.get('MemorySwap')}, PidsLimit {host.get('PidsLimit')}, CapAdd "
                 f"{host.get('CapAdd')}, SecurityOpt {host.get('SecurityOpt')}, ReadonlyRootfs "
                 f"{host.get('ReadonlyRootfs')} (not read-only: docs/docker.md)"))

    def found_inside(self, paths: list[str]) -> list[str]:
        """Which of `paths` exist in the container (removed as found: the container is the trial's)."""
        if not paths:
            return []
        out = self.env.root_exec('for p; do if [ -e "$p" ] || [ -L "$p" ]; then echo "FOUND $p"; rm -f "$p"; fi; done',
                                 paths, 30).output.splitlines()
        return [p for p in paths if f"FOUND {p}" in out]

    def secret_outside(self) -> tuple[bool, str]:
        env = self.info["Config"].get("Env") or []
        return (FAKE_KEY not in " ".join(env) and not any(e.startswith("OPENAI_API_KEY=") for e in env),
                f"; the container's Env (inspect): {sorted(e.split('=')[0] for e in env)}")

    def memory_detail(self) -> str:
        host = self.info["HostConfig"]
        return f"container Memory {host.get('Memory')}, MemorySwap {host.get('MemorySwap')}"

    def ended(self) -> tuple[bool, str]:
        import docker

        try:
            state = self.api.inspect_container(self.env.container_id)["State"].get("Status")
        except docker.errors.NotFound:
            return True, "; the container is gone"
        return False, f"; the container is still there ({state})"


def attacks(trial: Trial, side: LocalSide | DockerSide, cache: Path) -> dict[str, tuple[bool, str]]:
    """Every attack, in order; each returns (held, what happened)."""
    nonce = secrets.token_hex(6)
    results: dict[str, tuple[bool, str]] = {}

    out = trial.sh("grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status")
    results["hold a privilege inside the sandbox (uid, groups, capabilities, no_new_privs)"] = (
        _unprivileged(_status_fields(out), bounding=side.agent_bounding, ids=side.agent_ids),
        out.strip().replace("\n", " ").replace("\t", " "))
    name, held, detail = side.confinement()
    results[name] = (held, detail)

    if side.masked == "/etc/shadow":
        out = trial.sh("umount /etc/shadow; echo rc=$?; grep -c '^root:' /etc/shadow; true")
        held = "rc=0" not in out and "\n1\n" not in "\n" + out
    else:  # a masked directory is empty; unmasked, the host's entries would show
        out = trial.sh(f"umount {side.masked}; echo rc=$?; echo entries=$(ls -A {side.masked} | wc -l); true")
        held = "rc=0" not in out and "entries=0" in out
    results[f"umount a masked path ({side.masked})"] = (held, out.strip())

    for target in ("/usr", "/etc"):
        probe = f"{target}/hrbench-escape-{nonce}"
        out = trial.sh(f"mount -o remount,rw,bind {target}; echo rc=$?; touch {probe}; echo touch=$?")
        results[f"remount {target} read-write"] = (not side.found_inside([probe]) and "rc=0" not in out, out.strip())

    host_dirs = ["/", "/usr", "/etc", "/var", "/root", "/home", "/opt", "/run", "/dev", "/dev/shm", "/proc",
                 "/sys", str(cache), str(TINY_TASK), str(Path(tempfile.gettempdir()))]
    tried = list(dict.fromkeys([*host_dirs, *side.inside_dirs]))
    script = "".join(f"touch {d.rstrip('/')}/escape-{nonce} 2>/dev/null && echo WROTE {d}\n" for d in tried)
    out = trial.sh(script)
    leaked = [d for d in host_dirs if os.path.lexists(d.rstrip("/") + f"/escape-{nonce}")]
    for d in leaked:
        Path(d.rstrip("/") + f"/escape-{nonce}").unlink()
    planted = side.found_inside([d.rstrip("/") + f"/escape-{nonce}" for d in side.inside_dirs])
    results["write a file outside the workspace"] = (
        not leaked and not planted,
        f"host files created: {leaked or 'none'}; inside: {out.strip() or 'every write refused'}"
        + (f"; files created in the container: {planted or 'none'}" if side.inside_dirs else ""))

    swappiness = Path("/proc/sys/vm/swappiness").read_text().strip()  # writing it back is harmless if it works
    out = trial.sh(f"echo {swappiness} > /proc/sys/vm/swappiness; echo rc=$?; "
                   "echo hrbench > /proc/sys/kernel/hostname; echo rc=$?")
    results["write /proc/sys/*"] = ("rc=0" not in out, out.strip())

    out = trial.sh("tr '\\0' '\\n' < /proc/1/environ; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env")
    clean, where = side.secret_outside()
    results["read /proc/1/environ secrets"] = (
        bool(FAKE_KEY) and FAKE_KEY not in out and "OPENAI_API_KEY" not in out and clean,
        "environment inside: " + " ".join(sorted(set(out.split())))[:300] + where)

    fork = (f"python3 -c \"import os, time\nkids = []\nfor i in range({LIMITS.max_pids * 2}):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    kids.append(pid)\n"
            "print('started=%d' % len(kids))\nfor pid in kids:\n    os.kill(pid, 9)\"")
    out = trial.sh(fork, wait_s=40)
    started = int(out.split("started=")[1].split()[0]) if "started=" in out else -1
    results[f"exceed the process limit ({LIMITS.max_pids} per trial)"] = (
        0 <= started < LIMITS.max_pids, f"{started} of {LIMITS.max_pids * 2} processes started")

    each = int(LIMITS.memory_mb * 0.6)  # under the per-process bound, three of them over the trial's
    hog = f"python3 -c \"import time; x = bytearray({each} * 1024 * 1024); x[::4096] = b'1' * len(x[::4096]); time.sleep(4); print('ke' + 'pt')\""
    out = trial.sh(f"for i in 1 2 3; do {hog} & done; wait; echo done", wait_s=40)
    kept = out.count("kept")  # the literal is not in the command, which bash echoes for a killed job
    results[f"exceed the memory limit ({LIMITS.memory_mb} MB per trial, 3 x {each} MB)"] = (
        kept <= 1, f"{kept} of 3 processes kept their {each} MB; {side.memory_detail()}")

    out = trial.sh(f"head -c {(LIMITS.workspace_mb + 16)}M /dev/zero > /app/big.bin; echo rc=$?; "
                   "du -sm /app | cut -f1; rm -f /app/big.bin")
    results[f"exceed the disk limit with one file ({LIMITS.workspace_mb} MB workspace)"] = (
        "rc=0" not in out, out.strip().replace("\n", " "))
    chunks = LIMITS.workspace_mb // 8 + 4
    out = trial.sh(f"for i in $(seq 1 {chunks}); do head -c 8M /dev/zero > /app/chunk$i || break; done; "
                   "echo used=$(du -sm /app | cut -f1); rm -f /app/chunk*", wait_s=40)
    used = int(out.split("used=")[1].split()[0]) if "used=" in out else -1
    # local without root bounds each file only, a documented fallback of who runs hrbench (printed)
    if side.workspace_sized:
        results[f"exceed the disk limit with many files ({LIMITS.workspace_mb} MB workspace)"] = (
            0 <= used <= LIMITS.workspace_mb, f"workspace holds {used} MB after {chunks} x 8 MB")
    else:
        print(f"  (no root: the workspace total is not bounded, only each file; wrote {used} MB in {chunks} files)")
    out = trial.sh(f"head -c {side.tmp_mb + 16}M /dev/zero > /tmp/big; echo rc=$?; "
                   f"head -c {side.shm_mb + 16}M /dev/zero > /dev/shm/big; echo rc=$?; "
                   "head -c 4M /dev/zero > /dev/big; echo rc=$?; rm -f /tmp/big /dev/shm/big")
    results["fill /tmp, /dev/shm and /dev past their size"] = (
        "rc=0" not in out and side.shm_mb > 0,
        out.strip().replace("\n", " ") + f" (/tmp {side.tmp_mb} MB, /dev/shm {side.shm_mb} MB)")

    trial.sh(f"(setsid nohup sleep 1000 {nonce}-a >/dev/null 2>&1 &); "
             f"nohup bash -c 'trap \"\" HUP TERM; while true; do sleep 1 {nonce}-b; done' >/dev/null 2>&1 & disown; "
             f"python3 -c \"import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\" {nonce}-c &")
    time.sleep(0.5)
    before = _alive_with(nonce)
    trial.env.close()
    time.sleep(0.2)
    after = _alive_with(nonce)
    gone, how = side.ended()
    results["leave a process alive after the trial"] = (
        bool(before) and not after and gone,
        f"{len(before)} planted processes alive in the trial, {len(after)} after it{how}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.security.attacks", description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="where the results go (JSON)")
    parser.add_argument("--backend", choices=["local", "docker"], default="local")
    parser.add_argument("--docker-host", help="the Docker API (default: DOCKER_HOST)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hrbench-attacks-") as tmp:
        cache = Path(tmp) / "cache"
        if args.backend == "local":
            probe = TrialCgroup("probe", LIMITS)
            enforced = sorted(probe.enforced)
            probe.remove()
            print(f"hrbench as uid {os.geteuid()} (root={privileged()}); cgroups for a trial: "
                  f"{enforced or 'none (rlimit fallbacks)'}")
            backend = LocalBackend(cache, limits=LIMITS)
        else:
            from hrbench.envs.docker import DockerBackend

            backend = DockerBackend(cache, memory_mb=LIMITS.memory_mb, pids_limit=LIMITS.max_pids,
                                    tmp_mb=LIMITS.tmp_mb, file_mb=LIMITS.workspace_mb,
                                    workspace_mb=LIMITS.workspace_mb, docker_host=args.docker_host)
            print(f"hrbench as uid {os.geteuid()} (root={privileged()}); docker backend at {backend.docker_host}: "
                  f"memory {backend.memory_mb} MB, pids {backend.pids_limit}, /tmp {backend.tmp_mb} MB, "
                  f"workspace {backend.workspace_mb} MB, largest file {backend.file_mb} MB")
        trial = Trial(backend)
        try:
            side = LocalSide(trial) if args.backend == "local" else DockerSide(trial)
            results = attacks(trial, side, cache)
        finally:
            trial.env.close()
    for name, (held, detail) in results.items():
        print(f"{'HELD  ' if held else 'BROKEN'} {name}: {detail}")
    args.out.write_text(json.dumps({k: {"held": h, "detail": d} for k, (h, d) in results.items()}))


if __name__ == "__main__":
    main()
