"""Calibration of the paired contrast ΔΓ = Γ_a − Γ_b at every scope the report prints (issue 8).

Same population as ``benchmarks/calibration.py`` (24 task types of S stages around P_expected,
λ solved for a population Γ): side a (baseline) has population Γ_a = 0.5, side b (the
intervention) has the *same* checkpoint profiles q (the same seed) and natural conditionals
solved for Γ_b, so the known ΔΓ is Γ_a − Γ_b for the population and, for the drawn tasks,
the difference of their fixed-task truths. Each replication draws two families of n_f tasks,
runs both sides' trials independently on the same tasks and calls ``paired_difference`` with
its defaults (MOVER tasks-fixed intervals, paired cluster-t tasks-sampled intervals). Rows and
verdicts as in ``calibration.py``: task rows and ``trial_ci_*`` against the drawn tasks' ΔΓ,
``ci_*`` of family/all rows against the population ΔΓ; rows flagged ``few-tasks`` /
``too-few-tasks`` count as flagged; rows without a ΔΓ (a side's Γ is a bound) are counted apart
(the ``bound`` share).

``--shared`` (issue 25): side b reuses side a's checkpoint trials (conditions under one checkpoint
protocol: baseline, context reset, state repair), and ``paired_difference(shared_checkpoint=True)``
uses that covariance; ``--shared --independent-intervals`` scores the same shared-trial data with
the independent-sides intervals (what the report printed before), for the width comparison.

    nice .venv/bin/python benchmarks/calibration_contrasts.py --cells S=2 --out s2.md
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import time

import numpy as np

from calibration import KINDS, N_TYPES, SMALL, Score, compact, population, publish, summary, true_gamma
from hrbench.stats.contrasts import paired_difference
from hrbench.stats.synthetic import simulate_task

GAMMA_A = 0.5
GRID = list(itertools.product((1, 2, 3, 5, 10), (2, 4), (0.2, 0.5, 0.9), (0.0, 0.5), (20, 50)))


def run_cell(cell: tuple, reps: int, shared: bool = False, independent_intervals: bool = False) -> dict:
    """Every row kind of one cell (n_f, S, P, ΔΓ, m) over ``reps`` simulated paired studies.

    ``shared``: side b's checkpoint trials are side a's (one protocol); ``independent_intervals``
    scores such data with the intervals that ignore the sharing."""
    nf, S, p_target, delta, m = cell
    seed = 1000 * GRID.index(cell)
    pop_a = population(p_target, GAMMA_A, S, seed)
    pop_b = population(p_target, GAMMA_A - delta, S, seed)  # same seed: same q, other r
    pop_delta = true_gamma(pop_a) - true_gamma(pop_b)
    rng = np.random.default_rng(seed + 1)
    scores = {k: Score() for k in KINDS}
    for rep in range(reps):
        idx = rng.integers(0, N_TYPES, 2 * nf)
        fam = ["A"] * nf + ["B"] * nf
        side = {}
        for s, pop in (("a", pop_a), ("b", pop_b)):
            side[s] = [simulate_task(f"t{j}", fam[j], *pop[i], m, m, rng) for j, i in enumerate(idx)]
        if shared:  # one checkpoint protocol: the intervention's prediction uses the baseline's trials
            side["b"] = [dataclasses.replace(b, checkpoint_passes=a.checkpoint_passes)
                         for a, b in zip(side["a"], side["b"])]

        def truth(rows: list[int]) -> float:
            return true_gamma([pop_a[idx[j]] for j in rows]) - true_gamma([pop_b[idx[j]] for j in rows])

        truth_of = {("task", f"t{j}"): truth([j]) for j in range(2 * nf)} | {
            ("family", "A"): truth(list(range(nf))), ("family", "B"): truth(list(range(nf, 2 * nf))),
            ("all", "all"): truth(list(range(2 * nf)))}
        for row in paired_difference(side["a"], side["b"], level=0.95,
                                     shared_checkpoint=shared and not independent_intervals):
            if row.delta is None:  # a side's Γ is a bound (raw zero): no ΔΓ, counted apart
                for kind in ((row.scope, "fixed"), (row.scope, "sampled")):
                    if kind in scores:
                        scores[kind].rows += 1
                        scores[kind].bounds += 1
                continue
            flags = set(row.flags)
            fixed = truth_of[(row.scope, row.name)]
            scores[(row.scope, "fixed")].add(row.trial_ci_low, row.trial_ci_high, row.delta, fixed, flags - SMALL)
            if row.scope != "task":
                scores[(row.scope, "sampled")].add(row.ci_low, row.ci_high, row.delta, pop_delta, flags)
    return dict(nf=nf, S=S, p=p_target, gamma=delta, m=m, reps=reps, boundary=float("nan"),
                kinds={k: s.result() for k, s in scores.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description="Calibration of paired_difference (ΔΓ) at task, family and all scope")
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--cells", help="restrict the grid, e.g. 'S=2,m=20' (keys nf, S, p, delta, m)")
    ap.add_argument("--out", help="also write the markdown tables to this file")
    ap.add_argument("--log", help="append each finished cell to this JSON-lines file")
    ap.add_argument("--from-log", help="render the tables from a --log file instead of running")
    ap.add_argument("--shared", action="store_true", help="side b shares side a's checkpoint trials")
    ap.add_argument("--independent-intervals", action="store_true",
                    help="with --shared: score the intervals that ignore the sharing (the width comparison)")
    args = ap.parse_args()
    if args.from_log:
        with open(args.from_log) as fh:
            logged = [json.loads(line) for line in fh if line.strip()]
        results = [{**r, "kinds": {tuple(k.split("/")): v for k, v in r["kinds"].items()}} for r in logged]
        results.sort(key=lambda r: GRID.index((r["nf"], r["S"], r["p"], r["gamma"], r["m"])))
        lines = [f"paired_difference, Γ_a = {GAMMA_A}; column Γ is ΔΓ; from {args.from_log}: {len(results)} cells, "
                 f"reps per cell {results[0]['reps'] if results else 0}; nominal 0.95", "",
                 *summary(results), "", *compact(results)]
        print("\n".join(lines))
        return
    grid = GRID
    if args.cells:
        want = {k: float(v) for k, v in (kv.split("=") for kv in args.cells.split(","))}
        keys = ("nf", "S", "p", "delta", "m")
        grid = [c for c in grid if all(want.get(k, c[i]) == c[i] for i, k in enumerate(keys))]
    t0 = time.perf_counter()
    results = []
    for cell in grid:
        r = run_cell(cell, args.reps, args.shared, args.independent_intervals)
        results.append(r)
        if args.log:
            with open(args.log, "a") as fh:
                fh.write(json.dumps({**r, "kinds": {f"{k[0]}/{k[1]}": v for k, v in r["kinds"].items()}}) + "\n")
    mode = ("shared checkpoint trials, " + ("independent-sides intervals; " if args.independent_intervals
                                             else "shared-trial intervals; ")) if args.shared else ""
    head = (f"paired_difference, {mode}Γ_a = {GAMMA_A}; column Γ is ΔΓ; reps per cell: {args.reps}; nominal 0.95; "
            f"cells: {len(grid)}; wall {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")
    publish([head, "", *summary(results), "", *compact(results)], results, args.out)


if __name__ == "__main__":
    main()
