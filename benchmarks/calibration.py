"""Simulation-based calibration of every row of the residual table (issue 8, item 4).

Grid: tasks per family n_f ∈ {1, 2, 3, 5, 10}, stages per task S ∈ {2, 4, 6},
P_expected ∈ {0.2, 0.5, 0.9}, true Γ ∈ {0, 0.5}, trials m ∈ {10, 20, 50} per
checkpoint stage (natural rollouts m_0 = m). Each replication:

1. draws a study of two families of n_f tasks each from a fixed *population* of 24
   task types of S stages (tasks redrawn every replication; the two families are two
   strata of the same population);
2. simulates checkpoint and natural trials and runs ``residual_table`` with the
   defaults (jeffreys rule, unbiased aggregate, MOVER task intervals, cluster-t
   tasks-sampled intervals, percentile tasks-fixed bootstrap);
3. scores every row against the truth of the interval's estimand: task rows and every
   ``tasks: fixed`` interval against the Γ of the tasks actually drawn, every
   ``tasks: sampled`` interval against the population Γ.

Population: logit P_exp,t ~ logit P + N(0, 0.5²), stage shares of ln P_exp,t ~
Dirichlet(4,…,4); natural conditionals r_ti = q_ti^(1+λ_t) with λ_t = λ ± 0.3 (half the
types each), λ solved so that the population Γ = ln(E P_exp / E P_obs) is the cell's Γ.
P = 0.9 with m = 10 puts most stages at k = m; P = 0.2 with S = 6 and m = 10 makes
k_0 = 0 common: the boundary regimes.

Printed per (cell, row kind, estimand): coverage over rows with a two-sided interval
that the method did not flag as too small (``cover``), coverage over every row with any
interval (``cover all``), mean finite width of the scored intervals, bias of Γ̂ (rows with
a point) against the same truth, the share of rows flagged too small for a tasks-sampled
interval (``few-tasks``/``too-few-tasks``), the share reported as a bound because Γ is
undefined (``one-sided``/``no-estimate``) and how often those bounds held, and the share
of the cell's counts (checkpoint stages and natural successes) at 0 or m. Verdict: ``ok`` — covers within [0.93, 0.97] (m ≥ 20) or ≥ 0.90 (m = 10);
``flagged`` — every row flagged too small by the method; ``over``/``under`` — outside
[0.93, 0.97] but ≥ 0.90; ``FAIL`` — unflagged coverage below 0.90.

``--confirm N`` re-runs every cell with a row outside the band (m ≥ 20) or below 0.90 with N replications
(the same seed, so its first 500 are the 500 above) and judges it on those: at 500
replications a row covering exactly 0.95 falls outside [0.93, 0.97] about 4 % of the time
(binomial SE 0.0097), so a grid of some 1,300 scored rows has dozens of such cells by chance
alone; at 2,000 (SE 0.0049) the band is ±4 SE. Confirmed cells print ``first→confirmed``.

    nice .venv/bin/python benchmarks/calibration.py                 # 500 reps, n_boot 400, full grid
    nice .venv/bin/python benchmarks/calibration.py --from-log L --confirm 2000 --confirm-log C
    nice .venv/bin/python benchmarks/calibration.py --quick         # CI smoke grid (< 2 min)
    nice .venv/bin/python benchmarks/calibration.py --cells nf=2,m=20 --out results.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
from scipy import optimize, special

from hrbench.stats.residuals import residual_table
from hrbench.stats.synthetic import simulate_task

N_TYPES = 24
SPREAD = 0.3  # ± spread of λ_t across task types
SMALL = {"few-tasks", "too-few-tasks"}
KINDS = (("task", "fixed"), ("family", "fixed"), ("family", "sampled"), ("all", "fixed"), ("all", "sampled"))
FULL_GRID = list(itertools.product((1, 2, 3, 5, 10), (2, 4, 6), (0.2, 0.5, 0.9), (0.0, 0.5), (10, 20, 50)))
QUICK_GRID = [(nf, 4, p, 0.5, 20) for nf in (1, 2, 3, 5, 10) for p in (0.2, 0.9)]


def population(p_target: float, gamma: float, n_stages: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Task types (q, r) of ``n_stages`` stages whose population Γ is exactly ``gamma``."""
    rng = np.random.default_rng(seed)
    p_exp = special.expit(special.logit(p_target) + rng.normal(0, 0.5, N_TYPES))
    shares = [rng.dirichlet(np.full(n_stages, 4.0)) for _ in range(N_TYPES)]
    q = [pe**s for pe, s in zip(p_exp, shares)]
    eps = np.where(np.arange(N_TYPES) % 2 == 0, -SPREAD, SPREAD)

    def excess(lam: float) -> float:
        return np.log(p_exp.mean()) - np.log(np.mean(p_exp ** (1 + lam + eps))) - gamma

    lam = optimize.brentq(excess, SPREAD - 1 + 1e-9, 50.0)
    return [(qi, qi ** (1 + lam + e)) for qi, e in zip(q, eps)]


def true_gamma(types: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Γ of a set of tasks with equal weights: ln(Σ P_exp / Σ P_obs)."""
    return float(np.log(sum(np.prod(q) for q, _ in types)) - np.log(sum(np.prod(r) for _, r in types)))


class Score:
    """Running tallies of one (row kind, estimand) in one cell."""

    def __init__(self) -> None:
        self.rows = self.scored = self.covered = self.with_ci = self.covered_all = self.small = 0
        self.bounds = self.bounds_covered = 0
        self.widths: list[float] = []
        self.errors: list[float] = []

    def add(self, low, high, gamma, truth: float, flags: set[str]) -> None:
        """One row: ``flags`` are the flags that concern this interval."""
        self.rows += 1
        if gamma is not None:
            self.errors.append(gamma - truth)
        if low is None or high is None:
            self.small += 1  # no interval: the method said too few tasks
            return
        hit = low <= truth <= high
        self.with_ci += 1
        self.covered_all += hit
        if SMALL & flags:
            self.small += 1
        elif {"one-sided", "no-estimate"} & flags:
            self.bounds += 1  # Γ undefined: scored apart (a bound is not a two-sided interval)
            self.bounds_covered += hit
        else:
            self.scored += 1
            self.covered += hit
            if np.isfinite(high - low):
                self.widths.append(high - low)

    def result(self) -> dict:
        nan = float("nan")
        return dict(
            rows=self.rows, scored=self.scored,
            cover=self.covered / self.scored if self.scored else nan,
            cover_all=self.covered_all / self.with_ci if self.with_ci else nan,
            width=float(np.mean(self.widths)) if self.widths else nan,
            bias=float(np.mean(self.errors)) if self.errors else nan,
            small=self.small / self.rows, bounds=self.bounds / self.rows,
            bound_cover=self.bounds_covered / self.bounds if self.bounds else nan,
        )


def run_cell(args: tuple) -> dict:
    """Every row kind of one grid cell over ``reps`` simulated studies."""
    (nf, S, p_target, gamma, m), reps, n_boot, seed = args
    pop = population(p_target, gamma, S, seed)
    pop_truth = true_gamma(pop)
    rng = np.random.default_rng(seed + 1)
    scores = {k: Score() for k in KINDS}
    boundary = stages = 0
    for rep in range(reps):
        chosen = [pop[i] for i in rng.integers(0, N_TYPES, 2 * nf)]
        fam = ["A"] * nf + ["B"] * nf
        tasks = [simulate_task(f"t{j}", fam[j], q, r, m, m, rng) for j, (q, r) in enumerate(chosen)]
        for t in tasks:
            k = t.checkpoint_k
            boundary += int(np.sum((k == 0) | (k == m))) + int(t.passed[-1] in (0, m))
            stages += S + 1
        truth_of = {
            ("task", f"t{j}"): true_gamma([c]) for j, c in enumerate(chosen)
        } | {("family", "A"): true_gamma(chosen[:nf]), ("family", "B"): true_gamma(chosen[nf:]),
             ("all", "all"): true_gamma(chosen)}
        for row in residual_table(tasks, n_boot=n_boot):
            fixed = truth_of[(row.scope, row.name)]
            flags = set(row.flags)
            # "few-tasks"/"too-few-tasks" speak of the tasks-sampled interval only.
            scores[(row.scope, "fixed")].add(row.trial_ci_low, row.trial_ci_high, row.gamma, fixed, flags - SMALL)
            if row.scope != "task":
                scores[(row.scope, "sampled")].add(row.ci_low, row.ci_high, row.gamma, pop_truth, flags)
    return dict(nf=nf, S=S, p=p_target, gamma=gamma, m=m, reps=reps, boundary=boundary / stages,
                kinds={k: s.result() for k, s in scores.items()})


def publish(lines: list[str], results: list[dict], out: str | None) -> None:
    """Print the calibration report (and write it to `out`); exit 1 if any cell FAILs."""
    print("\n".join(lines))
    if out:
        with open(out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    sys.exit(1 if any(verdict(r, c["m"]) == "FAIL" for c in results for r in c["kinds"].values()) else 0)


def verdict(r: dict, m: int) -> str:
    """ok / flagged / over / under / FAIL (see the module docstring)."""
    if r["scored"] == 0:
        return "flagged"
    c = r["cover"]
    if c < 0.90:
        return "FAIL"
    if m == 10:
        return "ok"
    return "ok" if 0.93 <= c <= 0.97 else ("over" if c > 0.97 else "under")


def table(results: list[dict]) -> list[str]:
    """Markdown table, one line per (cell, row kind, estimand)."""
    lines = ["| n_f | S | P_exp | Γ | m | boundary | row | tasks | cover | cover all | width | bias | too small | bound | bound cover | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in results:
        for (kind, est), r in c["kinds"].items():
            lines.append(
                f"| {c['nf']} | {c['S']} | {c['p']} | {c['gamma']} | {c['m']} | {c['boundary']:.2f} | {kind} | {est} | "
                f"{r['cover']:.3f} | {r['cover_all']:.3f} | {r['width']:.3f} | {r['bias']:+.3f} | {r['small']:.2f} | "
                f"{r['bounds']:.2f} | {r['bound_cover']:.3f} | {verdict(r, c['m'])} |")
    return lines


def compact(results: list[dict]) -> list[str]:
    """One line per cell: coverage of each (row, estimand); ``flag`` where the method flagged every row
    too small, ``*`` after a value outside [0.93, 0.97] (m ≥ 20) or below 0.90 (m = 10)."""
    head = " | ".join(f"{k[0]} {k[1]}" for k in KINDS)
    lines = [f"| n_f | S | P_exp | Γ | m | boundary | {head} | task bias | task bound share |",
             "|" + "---|" * (8 + len(KINDS))]
    for c in results:
        cells = []
        for kind in KINDS:
            r = c["kinds"][kind]
            v = verdict(r, c["m"])
            first = c.get("first", {}).get(kind)
            shown = f"{r['cover']:.3f}" if first is None else f"{first:.3f}→{r['cover']:.3f}"
            cells.append("flag" if v == "flagged" else shown + ("" if v == "ok" else "*"))
        t = c["kinds"][("task", "fixed")]
        lines.append(f"| {c['nf']} | {c['S']} | {c['p']} | {c['gamma']} | {c['m']} | {c['boundary']:.2f} | "
                     + " | ".join(cells) + f" | {t['bias']:+.3f} | {t['bounds']:.2f} |")
    return lines


def summary(results: list[dict]) -> list[str]:
    """Verdict counts per row kind and estimand, and the lowest unflagged coverage."""
    lines = ["| row | tasks | cells | ok | flagged | over | under | FAIL | min cover (m ≥ 20) | min cover (m = 10) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        rs = [(c["kinds"][kind], c["m"]) for c in results]
        v = [verdict(r, m) for r, m in rs]
        lo20 = min((r["cover"] for r, m in rs if m >= 20 and r["scored"]), default=float("nan"))
        lo10 = min((r["cover"] for r, m in rs if m == 10 and r["scored"]), default=float("nan"))
        lines.append(f"| {kind[0]} | {kind[1]} | {len(v)} | " + " | ".join(str(v.count(x)) for x in
                     ("ok", "flagged", "over", "under", "FAIL")) + f" | {lo20:.3f} | {lo10:.3f} |")
    return lines


def outside_band(cell: dict) -> bool:
    """Some row of the cell is over or under (m ≥ 20) or below 0.90: worth confirming with more replications."""
    return any(verdict(r, cell["m"]) in ("over", "under", "FAIL") for r in cell["kinds"].values())


def confirm(results: list[dict], reps: int, n_boot: int, log: str | None = None) -> list[dict]:
    """Re-run the cells outside the band with ``reps`` replications (same seeds); each confirmed
    cell keeps its first coverages under ``first``. Cells already in ``log`` are read from it."""
    done: dict[tuple, dict] = {}
    if log and os.path.exists(log):
        with open(log) as fh:
            done = {_cell_key(c): c for c in (_from_jsonable(json.loads(line)) for line in fh if line.strip())
                    if c["reps"] == reps}
    out = []
    for cell in results:
        if not outside_band(cell) or cell["reps"] >= reps:
            out.append(cell)
            continue
        key = _cell_key(cell)
        again = done.get(key)
        if again is None:
            again = run_cell((key, reps, n_boot, 1000 * FULL_GRID.index(key)))
            if log:
                with open(log, "a") as fh:
                    fh.write(json.dumps(_jsonable(again)) + "\n")
        out.append({**again, "first": {k: r["cover"] for k, r in cell["kinds"].items()}})
    return out


def _cell_key(result: dict) -> tuple:
    return (result["nf"], result["S"], result["p"], result["gamma"], result["m"])


def run(grid: list[tuple], reps: int, n_boot: int, workers: int, log: str | None = None,
        resume: bool = False) -> list[dict]:
    """Run the cells (seeds depend only on the cell, so a subset reproduces its cells).

    With ``log``, each finished cell is appended to that JSON-lines file at once, so a run
    stopped early keeps what it did (``--from-log`` renders it); ``resume`` skips the cells
    already in the log (same seeds, so the union is the run that was not stopped).
    """
    if resume and log and os.path.exists(log):
        with open(log) as fh:
            done_keys = {_cell_key(json.loads(line)) for line in fh if line.strip()}
        grid = [c for c in grid if c not in done_keys]
    cells = [(cell, reps, n_boot, 1000 * FULL_GRID.index(cell)) for cell in grid]
    # m = 20 and 50 first (the acceptance cells), small studies first within (a run stopped early
    # then has every family size of the cells it reached).
    m_rank = {20: 0, 50: 1, 10: 2}
    order = sorted(range(len(cells)), key=lambda i: (m_rank[cells[i][0][4]], cells[i][0][0] * cells[i][0][1]))
    done: dict[int, dict] = {}

    def keep(i: int, result: dict) -> None:
        done[i] = result
        if log:
            with open(log, "a") as fh:
                fh.write(json.dumps(_jsonable(result)) + "\n")

    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(run_cell, cells[i]): i for i in order}
            for fut in as_completed(futures):
                keep(futures[fut], fut.result())
    else:
        for i in order:
            keep(i, run_cell(cells[i]))
    return [done[i] for i in range(len(cells))]


def _jsonable(result: dict) -> dict:
    return {**result, "kinds": {f"{k[0]}/{k[1]}": v for k, v in result["kinds"].items()}}


def _from_jsonable(result: dict) -> dict:
    return {**result, "kinds": {tuple(k.split("/")): v for k, v in result["kinds"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description="Calibration of every row of the residual table")
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--boot", type=int, default=400, help="bootstrap replicates of the tasks-fixed aggregate interval")
    ap.add_argument("--quick", action="store_true", help="CI grid: n_f ∈ {1,2,3,5,10}, S=4, P ∈ {0.2,0.9}, Γ=0.5, m=20; 200 reps, n_boot 300")
    ap.add_argument("--cells", help="restrict the grid, e.g. 'nf=2,m=20,p=0.9'")
    ap.add_argument("--workers", type=int, default=1, help="processes (the machine is shared: default 1)")
    ap.add_argument("--out", help="also write the markdown tables to this file")
    ap.add_argument("--log", help="append each finished cell to this JSON-lines file")
    ap.add_argument("--from-log", help="render the tables from a --log file instead of running")
    ap.add_argument("--resume", action="store_true", help="skip the cells already in --log")
    ap.add_argument("--confirm", type=int, metavar="N", help="re-run the cells outside the band with N replications")
    ap.add_argument("--confirm-log", help="JSON-lines file of confirmed cells (read first, appended to)")
    args = ap.parse_args()
    grid = QUICK_GRID if args.quick else FULL_GRID
    reps = 200 if args.quick and args.reps == 500 else args.reps
    boot = 300 if args.quick and args.boot == 400 else args.boot
    if args.cells:
        want = {k: float(v) for k, v in (kv.split("=") for kv in args.cells.split(","))}
        keys = ("nf", "S", "p", "gamma", "m")
        grid = [c for c in grid if all(want.get(k, c[i]) == c[i] for i, k in enumerate(keys))]
    t0 = time.perf_counter()
    if args.from_log:
        with open(args.from_log) as fh:
            results = [_from_jsonable(json.loads(line)) for line in fh if line.strip()]
        key = {c: i for i, c in enumerate(FULL_GRID)}
        results = list({_cell_key(c): c for c in results}.values())  # a cell logged twice counts once
        results.sort(key=lambda c: key[_cell_key(c)])
        head = f"from {args.from_log}: {len(results)} cells, reps per cell {results[0]['reps'] if results else 0}; nominal 0.95"
    else:
        results = run(grid, reps, boot, args.workers, args.log, args.resume)
        head = (f"reps per cell: {reps}; n_boot: {boot}; nominal 0.95; cells: {len(grid)}; "
                f"wall {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")
    if args.confirm:
        outside = sum(outside_band(c) for c in results)
        results = confirm(results, args.confirm, boot, args.confirm_log)
        head += f"; {outside} cells outside the band re-run with {args.confirm} replications (first→confirmed)"
    publish([head, "", *summary(results), "", *compact(results), "", *table(results)], results, args.out)


if __name__ == "__main__":
    main()
