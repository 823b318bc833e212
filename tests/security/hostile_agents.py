"""Three hostile agents run through the real harness (command agents, the local backend), as a
program so the suite can start it as root and as an unprivileged user:

    python -m tests.security.hostile_agents OUT_JSON [--backend local|docker] [--docker-host URL]

- the **symlink agent**: at every turn it replaces *every* file and directory of its writable space
  (workspace, persisted paths, /tmp = its home) by hard links and symlinks to `/`, `/etc/shadow`, the
  task registry, the output directory, `/proc/1/root` and another trial's workspace (plus the names
  the harness used or uses: `.hrbench-persist/output`, the next step's files), exits its shell to
  force a fresh one, and probes through every link for marker files planted in those host places.
  It solves part 1 for real, so the next part's files are copied into its booby-trapped workspace.
  Meanwhile a racer in another trial swaps its own writable space in a loop while the harness opens
  shells and runs execs there, each checking what /output and /app show.
- the **poisoner**: tries to rewrite every cached state it can find (through `/proc/1/root`, the
  output directory's path, any link); then a do-nothing agent runs every checkpoint and a natural
  rollout in the same output directory.
- the **starver**: fills the CPU (8 busy loops), memory, processes and the workspace, then declares
  completion (small limits: as root the workspace's pages fill the trial's memory).

Writes {case: {...}} to OUT_JSON: the trial rows' outcomes, whatever a probe found, and the
before/after listing of everything outside the trials' workspaces (host /tmp entries owned by the
sandbox's uid, the task registry, the output directory's cache, the other trial's workspace).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import threading
from pathlib import Path

from hrbench.agents.command import CommandAgent
from hrbench.agents.specs import CommandAgentSpec
from hrbench.envs import states
from hrbench.envs.confine import SANDBOX_UID, SandboxLimits, privileged
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
from hrbench.tasks.loader import load_task

TINY_TASK = Path(__file__).resolve().parents[1] / "fixtures" / "registry" / "tiny-chain"
LIMITS = SandboxLimits(memory_mb=256, max_pids=64, tmp_mb=32, shm_mb=8, workspace_mb=64)
# the starver's: as root the workspace (a 64 MB tmpfs) can hold the trial's whole memory; then a
# workspace that fills before the memory does, for a verifier that must write there
STARVER_LIMITS = SandboxLimits(memory_mb=64, max_pids=64, tmp_mb=16, shm_mb=8, workspace_mb=64)
FULL_DISK_LIMITS = SandboxLimits(memory_mb=128, max_pids=64, tmp_mb=16, shm_mb=8, workspace_mb=32)
BUDGET = Budget(max_turns=4, timeout_sec=90, command_timeout_sec=20)
ROOTS = ["/app", "/output", "/logs/artifacts", "/tmp"]

# Typed into the agent's shell: replace every entry of ROOTS by links to the targets (argv[1], JSON).
SWAP = r'''
import json, os, shutil, sys
targets = json.loads(sys.argv[1])
names = [".hrbench-persist", "persist", "work", "output", "logs", "notes", "setup.sh", "a.txt", "b.txt"]
def plant(path, i):
    key, target = targets[i % len(targets)]
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try: os.unlink(path)
        except OSError: pass
    try: os.link(target, path)  # a hard link: fails across mounts (EXDEV) and for others' files
    except OSError:
        try: os.symlink(target, path)
        except OSError: pass
n = 0
for root in ROOTS:
    if not os.path.isdir(root):
        continue
    everything = []
    for folder, dirs, files in os.walk(root, topdown=False):
        everything += [os.path.join(folder, x) for x in files + dirs]
    for path in everything:
        plant(path, n); n += 1
    for name in names:
        plant(os.path.join(root, name), n); n += 1
    for key, target in targets:
        plant(os.path.join(root, "link-" + key), targets.index([key, target]))
    try:  # the layout before the fix: "/" where /output and /logs/artifacts were bound from
        plant(os.path.join(root, ".hrbench-persist"), 0)
        os.unlink(os.path.join(root, ".hrbench-persist"))
        os.makedirs(os.path.join(root, ".hrbench-persist/logs"))
        for old in (".hrbench-persist/output", ".hrbench-persist/logs/artifacts"):
            plant(os.path.join(root, old), 0)
    except OSError: pass
    try:  # the roots themselves (mount points: expected to fail)
        os.rename(root, root + ".gone"); os.symlink("/", root)
    except OSError: pass
links = [os.path.join(f, x) for root in ROOTS for f, ds, fs in os.walk(root) for x in fs + ds
         if os.path.islink(os.path.join(f, x))]
for base in [""] + links:  # a file named after this run, through every link: found on the host = an escape
    for where in ("/", "/tmp/", "/" + os.path.basename(targets[-1][1]) + "-"):
        try:
            with open(base + where + TOKEN, "w") as fh: fh.write("escaped")
        except OSError: pass
print("SWAP" "PED", n)
'''.replace("ROOTS", repr(ROOTS))

# Typed into a fresh shell: look for the host's markers through every link and root.
PROBE = r'''
import json, os, sys
markers = json.loads(sys.argv[1])
prefixes = [""] + ROOTS
for root in ROOTS:
    for folder, dirs, files in os.walk(root):
        prefixes += [os.path.join(folder, x) for x in files + dirs if os.path.islink(os.path.join(folder, x))]
found = []
for prefix in prefixes:
    for marker in markers:
        for path in (prefix + marker, prefix + "/" + os.path.basename(marker)):
            if os.path.exists(path):
                found.append(path)
    try:
        with open(prefix + "/etc/shadow") as fh:
            if fh.read(64):
                found.append(prefix + "/etc/shadow")
    except OSError: pass
print("ESC" "APED " + json.dumps(sorted(set(found))) if found else "PROBE-" "HELD %d" % len(prefixes))
'''.replace("ROOTS", repr(ROOTS))


def _script(code: str, arg: object, token: str = "") -> str:
    return f"python3 - {json.dumps(json.dumps(arg))} <<'PYEOF'\nTOKEN = {token!r}\n{code}\nPYEOF\n"


# The command agents' programs: each reads observations and answers with a fixed plan per turn.
PROGRAM = r'''
import json, sys
plan = json.load(open(sys.argv[1]))
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] != "observation":
        continue
    turns = plan.get(str(msg["stage_index"]), plan["default"])
    i = min(msg["turn"] - 1, len(turns) - 1)
    keys = turns[i]
    print(json.dumps({"commands": [{"keystrokes": keys, "duration": 15}] if keys else [],
                      "task_complete": i == len(turns) - 1}), flush=True)
'''


def _agent(work: Path, name: str, plan: dict) -> CommandAgent:
    folder = work / "agents" / name
    folder.mkdir(parents=True, mode=0o755)
    (folder / "agent.py").write_text(PROGRAM)
    (folder / "plan.json").write_text(json.dumps(plan))
    for path in (folder, folder / "agent.py", folder / "plan.json"):
        os.chmod(path, 0o755)
    return CommandAgent(CommandAgentSpec(id=name, kind="command", argv=["/usr/bin/python3", str(folder / "agent.py"),
                                                                         str(folder / "plan.json")]))


def _spec(agent: str, kind: str, stage: str | None, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent=agent, condition="baseline",
                     protocol="natural-full-own" if kind == "natural" else "hostile", task="tiny-chain",
                     kind=kind, stage=stage, trial_index=index)


def _outcome(record, work: Path) -> dict:
    steps = read_trajectory(work / record.trajectory_path)["steps"] if record.trajectory_path else []
    text = json.dumps(steps)
    outcomes = json.loads(record.stage_outcomes_json)
    return {"stages_passed": record.stages_passed, "exit_reason": record.exit_reason, "error": record.error,
            "stage_exit_reasons": [o.get("exit_reason") for o in outcomes],
            "details": [o.get("detail") for o in outcomes],
            "escaped": "ESCAPED" in text, "probes_held": text.count("PROBE-HELD"), "swaps": text.count("SWAPPED")}



def _workdir_digest(env) -> str:
    """The content of a live trial's workdir and persisted paths (either backend)."""
    return hashlib.sha256(repr(sorted(env.workdir_files().items())).encode()).hexdigest()


def _make_backend(kind: str, cache: Path, limits: SandboxLimits, docker_host: str | None):
    if kind == "local":
        return LocalBackend(cache, limits=limits)
    from hrbench.envs.docker import DockerBackend

    return DockerBackend(cache, memory_mb=limits.memory_mb, pids_limit=limits.max_pids, tmp_mb=limits.tmp_mb,
                         file_mb=limits.workspace_mb, cpus=limits.cpus, docker_host=docker_host)


def _state_digests(backend, task, out: Path) -> dict:
    """Each checkpoint state's content (local: its tree; docker: the image id its tag names) and
    which of them still match their seals (docker: none are sealed, see docs/security.md)."""
    if isinstance(backend, LocalBackend):
        found = states.cached_states(out / "cache")
        return {"states": {str(s.relative_to(out)): states.tree_sha256(s) for s in found},
                "states_ok": len([s for s in states.cached_states(out / "cache") if states.check(s) is None])}
    refs = [backend.state_image(task, i) for i in range(task.n_stages)]
    return {"states": {ref: backend.client.images.get(ref).id for ref in refs}, "states_ok": len(refs)}


def _outside(work: Path, out: Path, registry: Path, neighbour, token: str, backend, task) -> dict:
    """What must not change outside the trials' workspaces: host /tmp (entries directly in it owned by
    the sandbox's uid; anywhere under it, files named after this run's token, which the agents try to
    create through every link; other jobs on this machine write /tmp too), the task registry, the
    output directory's cache (listing and states), the other trial's workspace."""
    agent_uid = SANDBOX_UID if privileged() else os.geteuid()
    tmp_entries = []
    for folder, dirs, files in os.walk("/tmp"):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if token in name or (folder == "/tmp" and info.st_uid == agent_uid and privileged()):
                tmp_entries.append(f"{path} {info.st_uid} {info.st_size} {info.st_mtime_ns}")
    cache = out / "cache"
    return {"tmp": sorted(tmp_entries), "registry": states.tree_sha256(registry),
            "cache_listing": sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else [],
            "neighbour": _workdir_digest(neighbour), **_state_digests(backend, task, out)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    parser.add_argument("--docker-host", help="the Docker API (default: DOCKER_HOST)")
    args = parser.parse_args(argv)
    print(f"hrbench as uid {os.geteuid()} (root={privileged()}); {args.backend} backend")
    work = Path(tempfile.mkdtemp(prefix="hrbench-hostile-agents-"))
    os.chmod(work, 0o755)
    try:
        results = run(work, args.backend, args.docker_host)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(results, indent=1))


def run(work: Path, kind: str = "local", docker_host: str | None = None) -> dict:
    registry = work / "registry" / "tiny-chain"
    shutil.copytree(TINY_TASK, registry)
    step_files = registry / "steps" / "double" / "workdir"  # copied into the (booby-trapped) workspace
    (step_files / "notes").mkdir(parents=True)
    (step_files / "notes" / "readme.txt").write_text("step notes\n")
    (step_files / "setup.sh").write_text("echo set-up > /app/setup.log\n")
    out = work / "out"
    marker, token = f"HRBENCH-MARKER-{secrets.token_hex(4)}", f"HRBENCH-ESCAPE-{secrets.token_hex(4)}"
    markers = [registry / marker, out / marker, out / "cache" / marker, work / marker]
    for path in markers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("host secret\n")
    backend = _make_backend(kind, out / "cache", LIMITS, docker_host)
    task = load_task(registry)
    for done in range(task.n_stages):
        backend.checkpoint_state(task, done)
    neighbour = backend.start(task, 0)  # another trial, alive throughout
    try:
        return _attacks(work, kind, docker_host, backend, task, registry, out, neighbour, marker, markers, token)
    finally:
        neighbour.close()


def _attacks(work: Path, kind: str, docker_host: str | None, backend, task, registry: Path, out: Path, neighbour,
             marker: str, markers: list[Path], token: str) -> dict:
    neighbour.exec(f"echo host secret > {marker}", 10)
    # where the other trial's workdir is on the host (docker: its container's merged filesystem)
    elsewhere = neighbour.workspace if kind == "local" else Path(
        backend.client.api.inspect_container(neighbour.container_id)["GraphDriver"]["Data"].get("MergedDir", "/")
        + task.workdir)
    before = _outside(work, out, registry, neighbour, token, backend, task)
    targets = [["root", "/"], ["shadow", "/etc/shadow"], ["registry", str(registry)], ["out", str(out)],
               ["proc1", "/proc/1/root"], ["neighbour", str(elsewhere)], ["marker", str(markers[0])]]
    markers.append(elsewhere / marker)
    swap, probe = _script(SWAP, targets, token), _script(PROBE, [str(m) for m in markers])
    results: dict = {}

    # the symlink agent: solves part 1 only, booby-traps everything at every turn
    turns = [swap + "exit\n", probe + swap + "exit\n", probe + swap]
    plan = {"0": [*turns, probe + "rm -rf /app/a.txt; echo 4 > /app/a.txt\n"], "default": turns}
    symlink = _agent(work, "symlink", plan)
    racer_env = backend.start(task, 0)  # a third trial, racing its own set-up
    own = _script(PROBE, [str(m) for m in markers[:-1]])  # its own workspace holds no marker
    racer = threading.Thread(target=_race, args=(racer_env, swap, own, results), daemon=True)
    racer.start()
    try:
        _symlink_agent(work, backend, task, symlink, results)
    finally:
        racer.join()
        racer_env.close()
    _poisoner_and_starver(work, kind, docker_host, backend, task, registry, out, swap, results)
    results["outside"] = {"before": before, "after": _outside(work, out, registry, neighbour, token, backend, task)}
    return results


def _symlink_agent(work: Path, backend, task, symlink: CommandAgent, results: dict) -> None:
    row = run_natural_trial(_spec("symlink", "natural", None), task, symlink, backend, CONDITIONS["baseline"], BUDGET, 0,
                            trajectory_dir=work / "trajectories")
    results["symlink natural"] = _outcome(row, work)
    for stage in ("double", "report"):
        row = run_checkpoint_trial(_spec("symlink", "checkpoint", stage), task, symlink, backend,
                                   CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=work / "trajectories")
        results[f"symlink checkpoint {stage}"] = _outcome(row, work)


def _poisoner_and_starver(work: Path, kind: str, docker_host: str | None, backend, task, registry: Path, out: Path,
                          swap: str, results: dict) -> None:
    """The poisoner, then a do-nothing agent in the same output directory; then the starver."""
    poison = ("for root in / /proc/1/root /app/link-root /output/link-root; do "
              f"find $root{out} $root/tmp $root/var -xdev -path '*after-*' 2>/dev/null; done | sort -u | "
              "while read f; do [ -d \"$f\" ] && cp -a \"${f%after-*}after-3/.\" \"$f/\" 2>/dev/null; "
              "[ -f \"$f\" ] && echo poisoned > \"$f\"; done; "
              f"ls -d {out}/cache /proc/1/root{out}/cache 2>&1; echo POISONED\n")
    poisoner = _agent(work, "poisoner", {"default": [swap + poison, poison]})
    for stage in ("make", "double"):
        row = run_checkpoint_trial(_spec("poisoner", "checkpoint", stage), task, poisoner, backend,
                                   CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=work / "trajectories")
        results[f"poisoner checkpoint {stage}"] = _outcome(row, work)
    idle = _agent(work, "idle", {"default": ["ls\n"]})
    for stage in ("make", "double", "report"):
        row = run_checkpoint_trial(_spec("idle", "checkpoint", stage), task, idle, backend,
                                   CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=work / "trajectories")
        results[f"do-nothing checkpoint {stage}"] = _outcome(row, work)
    row = run_natural_trial(_spec("idle", "natural", None), task, idle, backend, CONDITIONS["baseline"], BUDGET, 0,
                            trajectory_dir=work / "trajectories")
    results["do-nothing natural"] = _outcome(row, work)

    # the starver, with small limits; its verifier needs to write into the workspace first
    scratch = registry.parent / "tiny-chain-scratch"
    shutil.copytree(registry, scratch)
    test = scratch / "steps" / "make" / "tests" / "test.sh"
    test.write_text(test.read_text().replace("mkdir -p /logs/verifier\n",
                                             "mkdir -p /logs/verifier\necho scratch > /app/.verifier-scratch || exit 3\n"))
    starve = ("for i in $(seq 100); do head -c 1048576 /dev/zero > /app/fill-$i 2>/dev/null || break; done; "
              "df -h /app | tail -1; "
              "for i in 1 2 3; do python3 -c 'import itertools; b = [bytearray(1 << 20) for _ in itertools.count()]' & "
              "done; for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; "
              "for i in $(seq 200); do sleep 600 & done 2>/dev/null; echo STARVED\n")
    starver = _agent(work, "starver", {"default": [starve]})
    for name, path, limits in (("starver", registry, STARVER_LIMITS),
                               ("starver, verifier writes the workspace", scratch, FULL_DISK_LIMITS)):
        row = run_checkpoint_trial(_spec("starver", "checkpoint", "make"), load_task(path), starver,
                                   _make_backend(kind, work / f"out-{limits.memory_mb}" / "cache", limits,
                                                 docker_host),
                                   CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=work / "trajectories")
        results[name] = _outcome(row, work)


def _race(env, swap: str, probe: str, results: dict) -> None:
    """Another trial swaps its own writable space in a loop while sandboxes are set up around it."""
    racer = threading.Thread(target=env.exec, args=("for i in $(seq 40); do " + swap + "done >/dev/null 2>&1\n", 60))
    racer.start()
    seen = []
    while racer.is_alive() and len(seen) < 20:
        seen.append(env.exec(probe + "ls /output /app | head -3\n", 30).output)
    racer.join()
    results["racer"] = {"probes": len(seen), "escaped": any("ESCAPED" in s for s in seen),
                        "held": sum("PROBE-HELD" in s for s in seen)}


if __name__ == "__main__":
    main()
