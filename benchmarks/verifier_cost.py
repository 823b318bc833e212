"""What the check library costs per verifier run: wall ms per verify and execve calls per run.

Every task's verifier sources checks.sh and ends with `finish`; the demo study runs thousands of
verifier runs, so the processes the library itself starts matter. This runs one stage's verifier
N times through the real LocalBackend sandbox (the oracle state after the stage, so it passes), for
each checks.sh given, alternating them one run at a time so that a shared machine's changing load
falls on all alike, and prints per library and stage:

* the median (and quartiles) of the wall time of `LocalEnvironment.verify` (copy the tests in,
  run the sandboxed verifier, read the reward) and of the verifier process alone (duration_s);
* the execve calls of one run: the benchmark runs one verify in a child process under
  `strace -f -e trace=execve` and counts the calls made from the exec of /tests/test.sh until that
  process exits (its pid-namespace children included; the harness only waits meanwhile).

    PYTHONPATH=/work/wt/s7checks nice .venv/bin/python benchmarks/verifier_cost.py \\
        --checks /work/main/hrbench/tasks/checks.sh --checks hrbench/tasks/checks.sh -n 40

Stages default to part2 of lt-arith-noids-d2-n12-s0-k4 (a pure bash+awk transduction verifier)
and `users` of log-chores (a workflow stage).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hrbench.envs.local as local
from hrbench.envs.local import LocalBackend
from hrbench.tasks.loader import load_task

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STAGES = ["task_registry/lt-arith-noids-d2-n12-s0-k4:part2", "task_registry/log-chores:users"]


def _stage(spec: str):
    path, _, name = spec.rpartition(":")
    task = load_task(REPO / path if not os.path.isabs(path) else path)
    return task, next(s for s in task.stages if s.name == name)


def _one_verify(checks: str, spec: str, cache: str) -> None:
    """Child mode (--one): one verify with `checks` as the library; for strace to count."""
    local.CHECK_LIBRARY = Path(checks)
    task, stage = _stage(spec)
    env = LocalBackend(Path(cache)).start(task, stage.index + 1)
    try:
        result = env.verify(stage)
    finally:
        env.close()
    print(f"reward {result.reward}", file=sys.stderr)


def count_execve(checks: str, spec: str, cache: Path) -> int:
    """execve calls from the verifier's `/bin/bash /tests/test.sh` until it exits (strace -f)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "strace.log"
        subprocess.run(["strace", "-f", "-q", "-e", "trace=execve", "-o", str(log), sys.executable,
                        __file__, "--one", checks, spec, str(cache)], check=True, capture_output=True)
        verifier_pid, calls = None, 0
        for line in log.read_text(errors="replace").splitlines():
            pid = line.split(" ", 1)[0]
            if verifier_pid is None:
                if re.search(r'execve\("/bin/bash", \["/bin/bash", "/tests/test.sh"', line):
                    verifier_pid = pid
                continue
            if pid == verifier_pid and "+++ exited" in line:
                return calls
            if "execve(" in line and "resumed" not in line:
                calls += 1
        raise RuntimeError(f"no verifier run found in the strace log of {spec} (is strace allowed to trace bwrap?)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", action="append", help="a checks.sh to measure (repeatable); default: this tree's")
    ap.add_argument("--stage", action="append", help="TASK_DIR:STAGE (repeatable); default: " + ", ".join(DEFAULT_STAGES))
    ap.add_argument("-n", type=int, default=30, help="verify runs per library and stage")
    ap.add_argument("--one", nargs=3, metavar=("CHECKS", "STAGE", "CACHE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one_verify(*args.one)
        return
    libraries = [str(Path(p).resolve()) for p in (args.checks or [REPO / "hrbench" / "tasks" / "checks.sh"])]
    with tempfile.TemporaryDirectory(prefix="hrb-vcost-") as tmp:
        cache = Path(tmp) / "cache"
        backend = LocalBackend(cache)
        print(f"load average at start: {os.getloadavg()[0]:.2f} (cpus: {os.cpu_count()})")
        for spec in args.stage or DEFAULT_STAGES:
            task, stage = _stage(spec)
            env = backend.start(task, stage.index + 1)  # the oracle state after the stage: it passes
            walls: dict[str, list[float]] = {lib: [] for lib in libraries}
            procs: dict[str, list[float]] = {lib: [] for lib in libraries}
            try:
                for i in range(args.n + 1):
                    for lib in libraries:
                        local.CHECK_LIBRARY = Path(lib)
                        t0 = time.perf_counter()
                        result = env.verify(stage)
                        wall = time.perf_counter() - t0
                        if result.reward != 1.0:
                            raise RuntimeError(f"{spec} with {lib}: reward {result.reward}: {result.output[-400:]}")
                        if i > 0:  # the first round warms the page cache
                            walls[lib].append(wall * 1000)
                            procs[lib].append(result.duration_s * 1000)
            finally:
                env.close()
            print(f"\n{spec} ({args.n} runs each)")
            for lib in libraries:
                execs = count_execve(lib, spec, cache) if shutil.which("strace") else "n/a (no strace)"
                w = statistics.quantiles(walls[lib], n=4)
                p = statistics.quantiles(procs[lib], n=4)
                print(f"  {lib}\n    verify wall ms  median {w[1]:7.1f}  (quartiles {w[0]:.1f}-{w[2]:.1f})"
                      f"\n    verifier proc ms median {p[1]:7.1f}  (quartiles {p[0]:.1f}-{p[2]:.1f})"
                      f"\n    execve per run  {execs}")
        print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
