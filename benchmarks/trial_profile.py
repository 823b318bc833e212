"""Where a stage-trial's machine time goes, kernel included (docs/performance.md).

Runs N trials of the oracle agent at 2 workers and measures them two ways. The trials are checkpoint
trials of benchmarks/sandbox_overhead.py's trivial one-stage task, or with `--task NAME` of a built-in
task's stage `--stage I` (0-based, default the first), or with `--natural CONDITION` natural rollouts of
the whole task (every stage in one workspace, under that condition: `state_repair` restores the oracle
state at every boundary); figures are per stage-trial (a rollout of k stages counts k).

  * totals: the script moves itself into a fresh cgroup-v1 `cpuacct` group before any thread starts.
    Every process it starts inherits that group (the sandbox launcher joins per-trial `pids`,
    `memory` and `cpu` groups, never `cpuacct`, which these machines mount apart from `cpu`), so
    the group's user and system time is the machine time of the trials' whole process tree, kernel
    included, and none of the other users' load. What runs in
    kernel threads on the trials' behalf (network-namespace teardown in `cleanup_net` workers) is
    outside every process tree: it is counted from perf samples of kworkers, system-wide.
  * breakdown: `perf record -a -g` (system-wide, call graphs) during the trials; each sample of the
    trials' process tree (rebuilt from perf's fork events) is put in the first category whose kernel
    or user frames match (CATEGORIES, innermost frame first), and its program (comm) is counted.

    .venv/bin/python benchmarks/trial_profile.py [--trials 300] [--task NAME [--stage I | --natural COND] | --confined]
                                                 [--frequency 999]
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
WORKERS = 2
# (category, frame patterns): the first category with a frame matching is the sample's
CATEGORIES = [
    ("network namespace: create", r"copy_net_ns|setup_net\b"),
    ("network namespace: teardown", r"cleanup_net|put_net|free_netdev|ops_exit_list|unregister_netdevice"),
    ("other namespaces: create", r"create_new_namespaces|copy_mnt_ns|copy_ipcs|copy_pid_ns|copy_utsname|"
                                 r"create_user_ns|unshare_nsproxy"),
    ("namespaces: teardown", r"exit_task_namespaces|free_nsproxy|put_mnt_ns|put_ipc_ns|free_ipc|umount_tree|"
                             r"cleanup_mnt|mntput_no_expire|free_pid_ns|zap_pid_ns"),
    ("mounts", r"path_mount|do_mount\b|do_new_mount|do_move_mount|__x64_sys_pivot_root|do_mount_setattr|"
               r"__x64_sys_mount|shmem_fill_super|vfs_get_tree|do_remount|attach_recursive_mnt"),
    ("cgroups", r"cgroup_mkdir|cgroup_rmdir|cgroup_attach|__cgroup_procs_write|cgroup_.*write|css_|mem_cgroup_css|"
                r"cgroup_migrate|cgroup_destroy"),
    ("files: copies and writes", r"copy_file_range|do_splice|splice_|generic_perform_write|shmem_write|"
                                 r"do_sendfile|__x64_sys_write|ksys_write|vfs_write|do_unlinkat|vfs_rmdir|"
                                 r"do_renameat|shmem_|do_sys_openat|path_openat|__x64_sys_newfstatat|do_statx|"
                                 r"vfs_fstatat|getdents"),
    ("processes: fork, exec, exit, faults", r"copy_process|kernel_clone|do_execveat|load_elf_binary|begin_new_exec|"
                                            r"do_exit|exit_mmap|mmput|handle_mm_fault|do_user_addr_fault|"
                                            r"asm_exc_page_fault|do_wait|wait4|unmap_|tlb_|do_mmap|__x64_sys_mprotect"),
    ("kernel: scheduling, IO and the rest", r"^\S*(entry_SYSCALL|asm_|do_syscall|__schedule|schedule\b|irq|softirq)"),
]


def own_cpuacct_group() -> Path | None:
    """A fresh cpuacct group holding this process (before it starts a thread), or None without one."""
    if not CPUACCT.is_dir() or os.geteuid() != 0:
        return None
    if (CPUACCT.parent / "cpu").resolve() == CPUACCT.resolve():
        # cpu and cpuacct mounted together: each trial's cpu group would take its processes out of ours
        print("cpuacct is mounted with cpu (trials leave the group): no totals, perf only", file=sys.stderr)
        return None
    group = CPUACCT / f"hrbench-profile-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def group_cpu(group: Path) -> tuple[float, float]:
    """(user, system) seconds of everything that ran in the group."""
    stat = dict(line.split() for line in (group / "cpuacct.stat").read_text().splitlines())
    hz = os.sysconf("SC_CLK_TCK")
    return int(stat["user"]) / hz, int(stat["system"]) / hz


def release_cpuacct_group(group: Path) -> None:
    """Move this process back to the root group and remove its own (empty once its children are gone)."""
    (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
    group.rmdir()


def trial_runner(task_name: str | None, root: Path, stage: int = 0, natural: str | None = None,
                 confined: bool = False):
    """(task name, stage-trials per trial, one trial as a function of its index; True when it passed), the
    snapshots it starts from built: the oracle's checkpoint trial of `stage`, or its natural rollout of
    every stage under the condition `natural`."""
    from hrbench.agents.oracle import OracleAgent
    from hrbench.envs.local import LocalBackend
    from hrbench.harness.records import TrialSpec
    from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
    from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
    from hrbench.tasks.loader import load_task

    if confined:  # vs_inspect.py's confined side: its two sandboxes, no harness around them
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from vs_inspect import confined_trial

        from hrbench.envs.local.confine import area_tempdir

        folder = area_tempdir("profile")  # where the sandbox uid can reach it, as the harness's are
        atexit.register(shutil.rmtree, folder, True)
        return "the confined floor (vs_inspect.py)", 1, confined_trial(folder)
    if task_name is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sandbox_overhead import _task

        task = _task(root)
    else:
        import hrbench  # the registry of the checkout imported (PYTHONPATH), so --compare sees each side's tasks

        task = load_task(Path(hrbench.__file__).resolve().parent.parent / "task_registry" / task_name)
    backend = LocalBackend(root / "cache")
    budget = Budget(max_turns=4, timeout_sec=120, command_timeout_sec=60)
    if natural is not None:
        for done in range(task.n_stages):  # every state a repair may restore
            backend.checkpoint_state(task, done)
        condition = CONDITIONS[natural]

        def rollout(i: int) -> bool:
            spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition=natural, protocol="natural",
                             task=task.name, kind="natural", stage=None, trial_index=i)
            return run_natural_trial(spec, task, OracleAgent(), backend, condition, budget, 0,
                                     trajectory_dir=root / "trajectories").passed

        return f"{task.name} (natural, {natural})", task.n_stages, rollout
    backend.checkpoint_state(task, stage)
    protocol = CheckpointProtocol(budget=budget)

    def one(i: int) -> bool:
        spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition="baseline", protocol="profile",
                         task=task.name, kind="checkpoint", stage=task.stages[stage].name, trial_index=i)
        return run_checkpoint_trial(spec, task, OracleAgent(), backend, protocol, 0,
                                    trajectory_dir=root / "trajectories").passed

    return f"{task.name} (checkpoint, {task.stages[stage].name})", 1, one


def samples(data: Path, root_pid: int):
    """(comm, pid, frames innermost first, in_tree) per sample of `perf script`, trees from fork events."""
    parent: dict[int, int] = {}
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,pid,tid,ip,sym", "--show-task-events"],
                         capture_output=True, text=True).stdout
    fork = re.compile(r"PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)")
    in_tree: dict[int, bool] = {}

    def inside(pid: int) -> bool:
        if pid not in in_tree:
            seen, p = [], pid
            while p not in in_tree and p != root_pid and p in parent and p != parent[p]:
                seen.append(p)
                p = parent[p]
            verdict = in_tree.get(p, p == root_pid)
            for q in seen + [p]:
                in_tree[q] = verdict
        return in_tree[pid]

    header, frames = None, []

    def flush():
        if header is not None:
            comm, pid = header
            return comm, pid, frames, inside(pid)
        return None

    for line in out.splitlines():
        if not line.strip():
            continue
        if line.startswith("\t"):  # a frame of the current sample: "\t<address> <symbol>" (headers are space-padded)
            parts = line.split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else "")
            continue
        done = flush()
        if done:
            yield done
        header, frames = None, []
        match = fork.search(line)
        if match:
            child, par = int(match.group(1)), int(match.group(2))
            if child != par:  # a new process (a new thread keeps its process's pid)
                parent[child] = par
                in_tree.pop(child, None)
            continue
        if "PERF_RECORD" in line:
            continue
        comm, ids = line.strip().rsplit(None, 1)
        header = (comm.strip(), int(ids.split("/")[0]))
    done = flush()
    if done:
        yield done


def classify(frames: list[str], comm: str, harness_pid: int, pid: int) -> str:
    for name, pattern in CATEGORIES:
        if any(re.search(pattern, f) for f in frames):
            return name
    return "user space: harness (Python)" if pid == harness_pid else "user space: sandboxed programs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--task", help="a built-in task; default the trivial one-stage task")
    parser.add_argument("--stage", type=int, default=0, help="the checkpoint trials' stage (0-based index)")
    parser.add_argument("--natural", metavar="CONDITION", help="natural rollouts of the whole task under this "
                                                               "condition instead (baseline, state_repair, ...)")
    parser.add_argument("--confined", action="store_true", help="vs_inspect.py's confined side instead: the floor's two "
                        "sandboxes per trial through hrbench's confinement, nothing else of the harness")
    parser.add_argument("--frequency", type=int, default=999, help="perf samples per second per core")
    parser.add_argument("--no-perf", action="store_true", help="totals only (no perf record)")
    parser.add_argument("--compare", nargs="+", metavar="CHECKOUT",
                        help="checkouts (e.g. `git archive` of main, and this tree) measured in turn, each in a fresh "
                             "process whose PYTHONPATH is the checkout, totals only; prints each round and the medians")
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: rounds (the order rotates)")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    group = own_cpuacct_group()  # before any thread
    try:
        profile(args, group)
    finally:
        if group:
            release_cpuacct_group(group)


def compare(args: argparse.Namespace) -> None:
    """Interleaved rounds over checkouts: machine time (cpuacct) and wall per stage-trial, medians."""
    import statistics

    base = [sys.executable, str(Path(__file__).resolve()), "--no-perf", "--trials", str(args.trials),
            "--stage", str(args.stage)] + (["--task", args.task] if args.task else []) \
        + (["--natural", args.natural] if args.natural else [])
    cpu: dict[str, list[float]] = {c: [] for c in args.compare}
    wall: dict[str, list[float]] = {c: [] for c in args.compare}
    for r in range(args.rounds):
        order = args.compare[r % len(args.compare):] + args.compare[:r % len(args.compare)]
        for checkout in order:
            out = subprocess.run(base, capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}).stdout
            wall[checkout].append(float(re.search(r"= ([\d.]+) ms each", out).group(1)))
            cpu[checkout].append(float(re.search(r"\(cpuacct\): ([\d.]+) ms", out).group(1)))
        print(f"round {r + 1} (load {Path('/proc/loadavg').read_text().split()[0]}): "
              + ", ".join(f"{c}: {cpu[c][-1]:.1f} ms CPU, {wall[c][-1]:.1f} ms wall" for c in args.compare), flush=True)
    print("medians per stage-trial: " + ", ".join(
        f"{c}: {statistics.median(cpu[c]):.1f} ms CPU, {statistics.median(wall[c]):.1f} ms wall" for c in args.compare))


def profile(args: argparse.Namespace, group: Path | None) -> None:
    """Run the trials, print the totals and the breakdown."""
    with tempfile.TemporaryDirectory() as tmp:
        name, per_trial, one = trial_runner(args.task, Path(tmp), args.stage, args.natural, args.confined)
        for i in range(4):
            assert one(-1 - i), "warm-up trial failed"
        load0 = Path("/proc/loadavg").read_text().split()[0]
        data = Path(os.environ.get("HRBENCH_PROFILE_DATA") or Path(tmp) / "perf.data")
        perf = None
        if shutil.which("perf") and not args.no_perf:
            # perf starts its workload only once it records: the workload's "ready" line starts the trials,
            # and closing its stdin ends the recording
            perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(args.frequency), "-o", str(data), "--",
                                     "sh", "-c", "echo ready; read _"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            assert perf.stdout.readline().strip() == "ready", "perf record did not start"
        cpu0 = group_cpu(group) if group else (0.0, 0.0)
        self0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        with ThreadPoolExecutor(WORKERS) as pool:
            passed = sum(pool.map(one, range(args.trials)))
        wall = time.perf_counter() - start
        cpu1 = group_cpu(group) if group else (0.0, 0.0)
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        if perf:
            perf.stdin.close()
            perf.wait()
        load1 = Path("/proc/loadavg").read_text().split()[0]
        n = args.trials * per_trial  # stage-trials
        print(f"{n} stage-trials of {name} ({passed} of {args.trials} trials passed), {WORKERS} workers, {wall:.1f} s wall = "
              f"{1000 * wall / n:.1f} ms each; load {load0} -> {load1}")
        harness = (self1.ru_utime - self0.ru_utime, self1.ru_stime - self0.ru_stime)
        if group:
            user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
            print(f"machine time of the trials' process tree (cpuacct): {1000 * (user + system) / n:.1f} ms per "
                  f"stage-trial ({1000 * user / n:.1f} user, {1000 * system / n:.1f} system); of it the harness "
                  f"process: {1000 * sum(harness) / n:.1f} ms ({1000 * harness[0] / n:.1f} user, "
                  f"{1000 * harness[1] / n:.1f} system)")
        if not perf:
            return
        per_sample_ms = 1000 / args.frequency
        tree, comms, kworkers = Counter(), Counter(), Counter()
        for comm, pid, frames, inside in samples(data, os.getpid()):
            if inside:
                tree[classify(frames, comm, os.getpid(), pid)] += 1
                comms[comm] += 1
            elif comm.startswith("kworker") and any(re.search(CATEGORIES[1][1], f) for f in frames):
                kworkers["network namespace teardown (kworker cleanup_net, whole machine)"] += 1
        total = sum(tree.values())
        print(f"\nperf samples of the trials' process tree: {total} ({per_sample_ms * total / n:.1f} ms per "
              "stage-trial)\n\n| where | ms per stage-trial | share |\n|---|---:|---:|")
        for category, count in tree.most_common():
            print(f"| {category} | {per_sample_ms * count / n:.1f} | {count / total:.0%} |")
        for category, count in kworkers.items():
            print(f"| {category} | {per_sample_ms * count / n:.1f} | (outside the tree; other users' too) |")
        print("\n| program | ms per stage-trial |\n|---|---:|")
        for comm, count in comms.most_common(8):
            print(f"| {comm} | {per_sample_ms * count / n:.1f} |")


if __name__ == "__main__":
    main()
