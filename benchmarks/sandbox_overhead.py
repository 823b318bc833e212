"""What the sandbox's hardening costs: stage-trials per second on a trivial one-stage task.

The task copies one file into the workspace, the oracle's solution writes one line, the verifier
compares it; so nearly all of a trial's time is the sandbox: workspace copy, one sandboxed exec,
one sandboxed verifier, teardown. Run it once on the code before the hardening and once after, on
the same machine, and compare (the script uses only interfaces both share):

    PYTHONPATH=/work/main        nice .venv/bin/python benchmarks/sandbox_overhead.py   # before
    PYTHONPATH=/work/wt/sandbox  nice .venv/bin/python benchmarks/sandbox_overhead.py   # after

or let it alternate the two checkouts, one measurement each in turn, so that a shared machine's
changing load falls on both alike:

    nice .venv/bin/python benchmarks/sandbox_overhead.py --compare /work/main /work/wt/sandbox

The code before the hardening is the parent of commit 7e1e129 ("sandbox: drop to uid 47000 before
bwrap, ..."): `mkdir /tmp/before && git archive 7e1e129^ | tar -x -C /tmp/before`.

Prints stage-trials/s with 1 and 2 workers, the wall time per stage-trial, and the CPU time per
stage-trial (harness and sandboxes together): on a shared, loaded machine the CPU figure is the
steadier measure of what the hardening costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hrbench.agents.oracle import OracleAgent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.protocol import Budget, CheckpointProtocol
from hrbench.tasks.loader import load_task

FILES = {
    "task.toml": 'version = "1.0"\n[task]\nname = "trivial"\ndescription = "one stage, one line"\n'
                 '[metadata.hrbench]\nfamily = "bench"\nstructure = "shallow"\n[environment]\nworkdir = "/app"\n'
                 '[[steps]]\nname = "only"\n',
    "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n",
    "environment/files/seed.txt": "41\n",
    "steps/only/instruction.md": "Write seed + 1 into answer.txt.\n",
    "steps/only/solution/solve.sh": "#!/bin/bash\n# hrbench:key-begin\necho $(( $(cat seed.txt) + 1 )) > answer.txt\n"
                                    "# hrbench:key-end\n",
    # the harness makes /logs/verifier (Harbor's contract): the check is the same work as the other
    # runners' in benchmarks/vs_inspect.py, one `cat`, its answer written as the reward
    "steps/only/tests/test.sh": '#!/bin/bash\n[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt '
                                "|| echo 0 > /logs/verifier/reward.txt\n",
}


def _task(root: Path):
    for rel, text in FILES.items():
        path = root / "trivial" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_task(root / "trivial")


def _cpu_s() -> float:
    """CPU time of this process and of every child it has reaped (the sandboxes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(trials: int, workers: int, root: Path) -> tuple[float, float, int]:
    task = _task(root)
    backend = LocalBackend(root / f"cache-{workers}")
    backend.checkpoint_state(task, 0)  # built once per study: keep it out of the rate
    protocol = CheckpointProtocol(budget=Budget(max_turns=2, timeout_sec=60, command_timeout_sec=30))

    def one(i: int):
        spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition="baseline", protocol="bench",
                         task=task.name, kind="checkpoint", stage="only", trial_index=i)
        return run_checkpoint_trial(spec, task, OracleAgent(), backend, protocol, 0,
                                    trajectory_dir=root / "trajectories")

    for i in range(2):  # warm caches
        one(-1 - i)
    start, cpu = time.perf_counter(), _cpu_s()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        records = list(pool.map(one, range(trials)))
    wall, cpu = time.perf_counter() - start, _cpu_s() - cpu
    return wall, cpu, sum(r.passed for r in records)


def compare(before: str, after: str, trials: int, repeats: int) -> None:
    """Alternate single measurements of two checkouts; print the median of each side by side."""
    import statistics
    import subprocess
    import sys

    walls: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):
        for workers in (1, 2):
            for root in (before, after):
                out = subprocess.run([sys.executable, __file__, "--trials", str(trials), "--repeats", "1",
                                      "--workers", str(workers)], env={**os.environ, "PYTHONPATH": root},
                                     capture_output=True, text=True, check=True).stdout
                ms = float(out.split(" ms per stage-trial")[0].rsplit(" ", 1)[1])
                walls.setdefault((root, workers), []).append(ms)
                cpus.setdefault((root, workers), []).append(float(out.split(" ms CPU")[0].rsplit(" ", 1)[1]))
    for workers in (1, 2):
        b, a = (statistics.median(walls[(root, workers)]) for root in (before, after))
        cb, ca = (statistics.median(cpus[(root, workers)]) for root in (before, after))
        print(f"workers={workers}: before {1000 / b:.1f} stage-trials/s ({b:.1f} ms each, {cb:.1f} ms CPU), "
              f"after {1000 / a:.1f} stage-trials/s ({a:.1f} ms each, {ca:.1f} ms CPU): {a - b:+.1f} ms wall and "
              f"{ca - cb:+.1f} ms CPU per stage-trial (medians of {repeats}; wall before "
              f"{walls[(before, workers)]}, after {walls[(after, workers)]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100, help="stage-trials per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per pool size (best is kept)")
    parser.add_argument("--workers", type=int, choices=(1, 2), help="measure only this pool size")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two checkouts to alternate")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare, args.trials, args.repeats)
        return
    import hrbench

    print(f"hrbench from {Path(hrbench.__file__).parent}, uid {os.geteuid()}, {args.trials} trials, "
          f"best of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        for workers in [args.workers] if args.workers else [1, 2]:
            walls, cpus = [], []
            for r in range(args.repeats):
                wall, cpu, passed = measure(args.trials, workers, Path(tmp) / f"w{workers}-{r}")
                assert passed == args.trials, f"only {passed} of {args.trials} trials passed"
                walls.append(wall)
                cpus.append(cpu)
            best = min(walls)
            print(f"workers={workers}: {args.trials / best:.1f} stage-trials/s, {best / args.trials * 1000:.1f} ms "
                  f"per stage-trial, {min(cpus) / args.trials * 1000:.1f} ms CPU per stage-trial "
                  f"(runs: {', '.join(f'{w:.2f}s' for w in walls)})")


if __name__ == "__main__":
    main()
