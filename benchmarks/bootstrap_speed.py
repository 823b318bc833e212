"""Bootstrap speed: 10,000 resamples over 1,000 tasks × 6 stages × 50 trials.

Each task has 50 checkpoint trials per stage and 50 natural rollouts (the two
trial kinds of one condition). Times, for the same data:

* ``residual_table`` (default): the full table — 1,000 task rows with Γ and stage-term
  intervals (MOVER–Jeffreys), family rows and ``all``, both estimands. Since the
  tasks-fixed aggregate interval became closed-form (MOVER of effective-count Jeffreys
  limits, docs/statistics.md §7.3) the default draws no replicate at all;
* ``compare.residual_table(fixed_interval="bootstrap")``: the same table with the trial bootstrap
  option (10,000 replicates per task: the bank with raw P's) for the tasks-fixed interval;
* the two-stage bootstrap option (``hierarchical="tasks_then_trials"``, ``all`` row) for comparison.

CPU time (this process, all threads) is printed beside wall time because a shared
machine's load inflates wall time; the target is checked on both. Peak memory is the
process's max RSS (``resource.getrusage``), which includes the Python interpreter and
numpy/scipy themselves.

    .venv/bin/python benchmarks/bootstrap_speed.py [--tasks 1000] [--boot 10000]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

from hrbench.stats import compare
from hrbench.stats.compare.bootstrap import hierarchical_gammas, trial_bank
from hrbench.stats.packed import pack
from hrbench.stats.residuals import residual_table
from hrbench.stats.synthetic import simulate_task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--stages", type=int, default=6)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--boot", type=int, default=10_000)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    tasks = []
    for j in range(args.tasks):
        q = rng.uniform(0.75, 0.99, args.stages)
        r = q * rng.uniform(0.85, 1.0, args.stages)
        tasks.append(simulate_task(f"t{j}", f"fam{j % 4}", q, r, args.trials, args.trials, rng))

    t0, c0 = time.perf_counter(), time.process_time()
    rows = residual_table(tasks, n_boot=args.boot)
    t_table, c_table = time.perf_counter() - t0, time.process_time() - c0
    peak_default = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is KiB on Linux

    t0, c0 = time.perf_counter(), time.process_time()
    boot_rows = compare.residual_table(tasks, n_boot=args.boot, seed=0, fixed_interval="bootstrap")
    t_boot, c_boot = time.perf_counter() - t0, time.process_time() - c0
    del boot_rows

    t0, c0 = time.perf_counter(), time.process_time()
    pk = pack(tasks)
    bank = trial_bank(pk, args.boot, np.random.SeedSequence(1), "jeffreys")
    hier = hierarchical_gammas([bank], pk, args.boot, np.random.SeedSequence(2), "jeffreys", pk.weights)
    t_two, c_two = time.perf_counter() - t0, time.process_time() - c0
    del bank, hier
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    draws = 2 * args.boot * args.tasks * args.stages
    print(f"{args.boot:,} resamples x {args.tasks:,} tasks x {args.stages} stages x {args.trials} trials "
          f"(checkpoint + natural): {draws / 1e6:.0f}M binomial draws")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end of the run")
    print(f"full residual_table, default ({len(rows)} rows, both CIs): wall {t_table:6.2f} s   cpu {c_table:6.2f} s"
          f"   peak RSS {peak_default:.2f} GiB")
    print(f"full residual_table, fixed_interval='bootstrap':      wall {t_boot:6.2f} s   cpu {c_boot:6.2f} s")
    print(f"two-stage hierarchical bootstrap (all row, option):   wall {t_two:6.2f} s   cpu {c_two:6.2f} s")
    print(f"peak memory (max RSS, whole run):                     {peak_gib:6.2f} GiB")
    ok = t_table < 5 and c_table < 5 and peak_gib < 2
    print("target (default table) < 5 s wall and CPU, < 2 GiB:", "met" if ok else "MISSED")
    print("bootstrap option < 5 s CPU:", "met" if c_boot < 5 else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
