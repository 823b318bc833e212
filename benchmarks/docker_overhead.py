"""Per-trial overhead of the docker backend against local, on the same trivial stage, side by side.

One "trial" here is what the harness does around an agent: start an environment at the
checkpoint e_1 of the fixture task tiny-chain, run one trivial command, verify the stage,
close. The oracle states are built before timing (both backends build them once per
study). Trials alternate between the backends so machine load hits both alike. Needs a
Docker API: `scripts/podman.sh setup && eval "$(scripts/podman.sh start)"`.

    .venv/bin/python benchmarks/docker_overhead.py [--trials 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from hrbench.envs.docker import DockerBackend
from hrbench.envs.local import LocalBackend
from hrbench.tasks.loader import load_task

TASK = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "registry" / "tiny-chain"
PHASES = ("start", "exec", "verify", "close")


def one_trial(backend, task) -> dict[str, float]:
    """Seconds spent in each phase of one trivial trial."""
    marks = [time.perf_counter()]
    env = backend.start(task, 1)
    marks.append(time.perf_counter())
    env.exec("cat a.txt > /dev/null", 30)
    marks.append(time.perf_counter())
    result = env.verify(task.stages[1])
    marks.append(time.perf_counter())
    env.close()
    marks.append(time.perf_counter())
    assert result.reward == 0.0  # nothing was done: the stage must fail
    return {p: marks[i + 1] - marks[i] for i, p in enumerate(PHASES)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per backend")
    args = parser.parse_args()
    task = load_task(TASK)
    with tempfile.TemporaryDirectory() as tmp:
        backends = [LocalBackend(Path(tmp) / "local"), DockerBackend(Path(tmp) / "docker")]
        for backend in backends:
            backend.checkpoint_state(task, 1)
            one_trial(backend, task)  # warm-up: first container, imports
        times: dict[str, list[dict[str, float]]] = {b.name: [] for b in backends}
        for _ in range(args.trials):
            for backend in backends:
                times[backend.name].append(one_trial(backend, task))
    print(f"{args.trials} trivial trials per backend (start, one exec, verify, close), medians in seconds:")
    print(f"{'backend':8} " + " ".join(f"{p:>7}" for p in PHASES) + f" {'total':>7} {'p90':>7}")
    totals = {}
    for name, rows in times.items():
        total = [sum(r.values()) for r in rows]
        totals[name] = statistics.median(total)
        cells = " ".join(f"{statistics.median(r[p] for r in rows):7.3f}" for p in PHASES)
        print(f"{name:8} {cells} {totals[name]:7.3f} {statistics.quantiles(total, n=10)[-1]:7.3f}")
    print(f"docker overhead per trial: +{totals['docker'] - totals['local']:.3f} s "
          f"({totals['docker'] / totals['local']:.1f}x local)")


if __name__ == "__main__":
    main()
