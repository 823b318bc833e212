"""The attack sequence of tests/security: what a hostile agent types from inside a trial.

Run as a program so the suite can start it as root and as an unprivileged user:

    python -m tests.security.attacks OUT_JSON

It opens a trial environment of the fixture task with small limits, types each attack into the
agent's persistent shell (as an `llm` or `command` agent would), prints the attack and whether the
sandbox held, and writes {attack: {"held": bool, "detail": str}} to OUT_JSON. The harness's own
environment carries a fake OPENAI_API_KEY (set by the caller) that must not be readable inside.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

from hrbench.envs.confine import (
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

    def __init__(self, backend: LocalBackend):
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


def _unprivileged(status: dict[str, str], bounding: bool = True) -> bool:
    """The sandbox uid (the harness's own when not root) in every id, no group, no capability, no_new_privs.

    `bounding=False` skips the bounding set: a harness that is not root cannot empty its own (nor
    gain anything from it under no_new_privs); inside the sandbox bwrap empties it."""
    uid = str(SANDBOX_UID if privileged() else os.geteuid())
    gid = str(SANDBOX_GID if privileged() else os.getegid())
    return (status.get("Uid") == " ".join([uid] * 4) and status.get("Gid") == " ".join([gid] * 4)
            and status.get("Groups", "") in ("", gid)  # bwrap's user namespace shows its own gid at most
            and all(status.get(f"Cap{s}") == "0" * 16 for s in ("Inh", "Prm", "Eff", "Amb") + ("Bnd",) * bounding)
            and status.get("NoNewPrivs") == "1")


def _mount_of(group: Path) -> Path:
    """The cgroup filesystem mount a cgroup directory lives under (its /proc/PID/cgroup paths are relative to it)."""
    while not os.path.ismount(group):
        group = group.parent
    return group


def attacks(trial: Trial, cache: Path) -> dict[str, tuple[bool, str]]:
    """Every attack, in order; each returns (held, what happened)."""
    nonce = secrets.token_hex(6)
    results: dict[str, tuple[bool, str]] = {}

    out = trial.sh("grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status")
    results["hold a privilege inside the sandbox (uid, groups, capabilities, no_new_privs)"] = (
        _unprivileged(_status_fields(out)), out.strip().replace("\n", " ").replace("\t", " "))
    shells = [s for s in trial.env._shells if not s.closed]
    outside = {}
    for shell in shells:  # the sandbox's outermost process, bwrap, seen from the host
        outside = _status_fields(Path(f"/proc/{shell.proc.pid}/status").read_text())
        outside["cgroups"] = Path(f"/proc/{shell.proc.pid}/cgroup").read_text()
    trial_groups = {c: "/" + str(d.relative_to(_mount_of(d))) for c, d in trial.env.cgroup.dirs.items()}
    joined = {c: next((line.split(":", 2)[2] for line in outside.get("cgroups", "").splitlines()
                       if c in line.split(":")[1].split(",")), None) for c in trial_groups}
    results["start bwrap with host privileges or outside the trial's cgroups"] = (
        len(shells) == 1 and outside.get("Name") == "bwrap" and _unprivileged(outside, bounding=privileged())
        and joined == trial_groups,
        (f"bwrap on the host: uid {outside.get('Uid')}, bounding set {outside.get('CapBnd')}, no_new_privs "
         f"{outside.get('NoNewPrivs')}; cgroups {joined} (the trial's: {trial_groups})"))

    out = trial.sh("umount /etc/shadow; echo rc=$?; grep -c '^root:' /etc/shadow; true")
    results["umount a masked path (/etc/shadow)"] = ("rc=0" not in out and "\n1\n" not in "\n" + out, out.strip())

    for target in ("/usr", "/etc"):
        probe = f"{target}/hrbench-escape-{nonce}"
        out = trial.sh(f"mount -o remount,rw,bind {target}; echo rc=$?; touch {probe}; echo touch=$?")
        results[f"remount {target} read-write"] = (not Path(probe).exists() and "rc=0" not in out, out.strip())

    host_dirs = ["/", "/usr", "/etc", "/var", "/root", "/home", "/opt", "/run", "/dev", "/dev/shm", "/proc",
                 "/sys", str(cache), str(TINY_TASK), str(Path(tempfile.gettempdir()))]
    script = "".join(f"touch {d.rstrip('/')}/escape-{nonce} 2>/dev/null && echo WROTE {d}\n" for d in host_dirs)
    out = trial.sh(script)
    leaked = [d for d in host_dirs if os.path.lexists(d.rstrip("/") + f"/escape-{nonce}")]
    for d in leaked:
        Path(d.rstrip("/") + f"/escape-{nonce}").unlink()
    results["write a file outside the workspace"] = (
        not leaked, f"host files created: {leaked or 'none'}; inside: {out.strip() or 'every write refused'}")

    swappiness = Path("/proc/sys/vm/swappiness").read_text().strip()  # writing it back is harmless if it works
    out = trial.sh(f"echo {swappiness} > /proc/sys/vm/swappiness; echo rc=$?; "
                   "echo hrbench > /proc/sys/kernel/hostname; echo rc=$?")
    results["write /proc/sys/*"] = ("rc=0" not in out, out.strip())

    out = trial.sh("tr '\\0' '\\n' < /proc/1/environ; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env")
    results["read /proc/1/environ secrets"] = (bool(FAKE_KEY) and FAKE_KEY not in out and "OPENAI_API_KEY" not in out,
                                               "environment inside: " + " ".join(sorted(set(out.split())))[:300])

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
        kept <= 1, f"{kept} of 3 processes kept their {each} MB; cgroups: {sorted(trial.env.cgroup.enforced)}")

    out = trial.sh(f"head -c {(LIMITS.workspace_mb + 16)}M /dev/zero > /app/big.bin; echo rc=$?; "
                   "du -sm /app | cut -f1; rm -f /app/big.bin")
    results[f"exceed the disk limit with one file ({LIMITS.workspace_mb} MB workspace)"] = (
        "rc=0" not in out, out.strip().replace("\n", " "))
    chunks = LIMITS.workspace_mb // 8 + 4
    out = trial.sh(f"for i in $(seq 1 {chunks}); do head -c 8M /dev/zero > /app/chunk$i || break; done; "
                   "echo used=$(du -sm /app | cut -f1); rm -f /app/chunk*", wait_s=40)
    used = int(out.split("used=")[1].split()[0]) if "used=" in out else -1
    if trial.env.workspace_is_sized:
        results[f"exceed the disk limit with many files ({LIMITS.workspace_mb} MB workspace)"] = (
            0 <= used <= LIMITS.workspace_mb, f"workspace holds {used} MB after {chunks} x 8 MB")
    else:
        print(f"  (no root: the workspace total is not bounded, only each file; wrote {used} MB in {chunks} files)")
    out = trial.sh(f"head -c {LIMITS.tmp_mb + 16}M /dev/zero > /tmp/big; echo rc=$?; "
                   f"head -c {LIMITS.shm_mb + 16}M /dev/zero > /dev/shm/big; echo rc=$?; "
                   "head -c 4M /dev/zero > /dev/big; echo rc=$?; rm -f /tmp/big /dev/shm/big")
    results["fill /tmp, /dev/shm and /dev past their size"] = ("rc=0" not in out, out.strip().replace("\n", " "))

    trial.sh(f"(setsid nohup sleep 1000 {nonce}-a >/dev/null 2>&1 &); "
             f"nohup bash -c 'trap \"\" HUP TERM; while true; do sleep 1 {nonce}-b; done' >/dev/null 2>&1 & disown; "
             f"python3 -c \"import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\" {nonce}-c &")
    time.sleep(0.5)
    before = _alive_with(nonce)
    trial.env.close()
    time.sleep(0.2)
    after = _alive_with(nonce)
    results["leave a process alive after the trial"] = (
        bool(before) and not after, f"{len(before)} planted processes alive in the trial, {len(after)} after it")
    return results


def main(out: Path) -> None:
    probe = TrialCgroup("probe", LIMITS)
    enforced = sorted(probe.enforced)
    probe.remove()
    print(f"hrbench as uid {os.geteuid()} (root={privileged()}); cgroups for a trial: "
          f"{enforced or 'none (rlimit fallbacks)'}")
    with tempfile.TemporaryDirectory(prefix="hrbench-attacks-") as tmp:
        cache = Path(tmp) / "cache"
        backend = LocalBackend(cache, limits=LIMITS)
        trial = Trial(backend)
        try:
            results = attacks(trial, cache)
        finally:
            trial.env.close()
    for name, (held, detail) in results.items():
        print(f"{'HELD  ' if held else 'BROKEN'} {name}: {detail}")
    out.write_text(json.dumps({k: {"held": h, "detail": d} for k, (h, d) in results.items()}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
