"""Simulation-based calibration of the residual estimator (issue 3, item 7).

For every cell of the grid — P_expected ∈ {0.2, 0.5, 0.9}, true Γ ∈ {0, 0.5},
trials per stage ∈ {20, 50, 200} (natural rollouts m_0 = the same number),
tasks ∈ {5, 20, 100}, 3–6 stages per task — and for each replication:

1. draw the study's tasks from a fixed *population* of 24 simulated task types
   (tasks redrawn every replication);
2. simulate checkpoint and natural trials; run ``residual_table`` with the
   defaults (jeffreys rule, percentile intervals, unbiased aggregate, rescaled
   one-stage hierarchical interval) unless ``--zero-rule`` / ``--ci-method`` /
   ``--aggregate`` / ``--hierarchical`` say otherwise, and read the ``all`` row;
3. score the hierarchical interval against the *population* Γ and the
   trial-level interval against the Γ of the tasks actually drawn (tasks-fixed
   truth; averaging that conditional coverage over task draws is still a check
   of the tasks-fixed interval).

Population: each type has n ∈ {3..6} stages, logit P_exp,t ~ logit P + N(0, 0.5²),
stage shares of ln P_exp,t ~ Dirichlet(4,…,4); the natural conditionals are
r_ti = q_ti^(1+λ_t) with λ_t = λ ± 0.3 (half the types each), so Γ_t varies
across tasks, and λ is solved so that the population Γ = ln(E P_exp / E P_obs)
equals the cell's Γ exactly.

Reported per cell: coverage of the nominal 95% hierarchical (the headline,
against the population truth) and trial-level (against the drawn tasks' truth)
intervals, their median widths, bias of Γ̂ against the drawn tasks' truth
(estimation bias from finite trials) and against the population truth, and the
share of replications in which some raw proportion was 0 (the zero rule was
needed).

    .venv/bin/python benchmarks/calibration.py            # 500 reps, n_boot 500
    .venv/bin/python benchmarks/calibration.py --quick    # 100 reps, n_boot 300, smaller grid
    .venv/bin/python benchmarks/calibration.py --acceptance-only --zero-rule haldane
    .venv/bin/python benchmarks/calibration.py --acceptance-only --aggregate smoothed --hierarchical tasks_then_trials  # pre-fix
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import optimize, special

from hrbench.stats.residuals import residual_table
from hrbench.stats.synthetic import simulate_task

N_TYPES = 24
SPREAD = 0.3  # ± spread of λ_t across task types


def population(p_target: float, gamma: float, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Task types (q, r) whose population Γ is exactly ``gamma``."""
    rng = np.random.default_rng(seed)
    p_exp = special.expit(special.logit(p_target) + rng.normal(0, 0.5, N_TYPES))
    n = rng.integers(3, 7, N_TYPES)
    shares = [rng.dirichlet(np.full(k, 4.0)) for k in n]
    q = [pe**s for pe, s in zip(p_exp, shares)]
    eps = np.where(np.arange(N_TYPES) % 2 == 0, -SPREAD, SPREAD)

    def excess(lam: float) -> float:
        return np.log(p_exp.mean()) - np.log(np.mean(p_exp ** (1 + lam + eps))) - gamma

    lam = optimize.brentq(excess, SPREAD - 1 + 1e-9, 50.0)
    return [(qi, qi ** (1 + lam + e)) for qi, e in zip(q, eps)]


def true_gamma(types: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Γ of a set of tasks with equal weights: ln(Σ P_exp / Σ P_obs)."""
    return float(np.log(sum(np.prod(q) for q, _ in types)) - np.log(sum(np.prod(r) for _, r in types)))


def run_cell(args: tuple) -> dict:
    p_target, gamma, m, n_tasks, reps, n_boot, ci_method, zero_rule, hierarchical, aggregate, seed = args
    pop = population(p_target, gamma, seed)
    pop_truth = true_gamma(pop)
    rng = np.random.default_rng(seed + 1)
    hier_cover = trial_cover = zero_hits = 0
    hier_width, trial_width = [], []
    err_tasks, err_pop = [], []
    for rep in range(reps):
        chosen = [pop[i] for i in rng.integers(0, N_TYPES, n_tasks)]
        tasks = [simulate_task(f"t{j}", "F", q, r, m, m, rng) for j, (q, r) in enumerate(chosen)]
        row = residual_table(
            tasks, n_boot=n_boot, seed=rep, scopes=("all",), ci_method=ci_method, zero_rule=zero_rule,
            hierarchical=hierarchical, aggregate=aggregate,
        )[0]
        fixed_truth = true_gamma(chosen)
        hier_cover += row.ci_low <= pop_truth <= row.ci_high
        trial_cover += row.trial_ci_low <= fixed_truth <= row.trial_ci_high
        hier_width.append(row.ci_high - row.ci_low)
        trial_width.append(row.trial_ci_high - row.trial_ci_low)
        zero_hits += row.zero_rule_applied
        err_tasks.append(row.gamma - fixed_truth)
        err_pop.append(row.gamma - pop_truth)
    return dict(
        p=p_target, gamma=gamma, m=m, tasks=n_tasks, reps=reps,
        hier=hier_cover / reps, trial=trial_cover / reps,
        hier_w=float(np.median(hier_width)), trial_w=float(np.median(trial_width)),
        bias=float(np.mean(err_tasks)), bias_pop=float(np.mean(err_pop)), zero=zero_hits / reps,
    )


def verdict(c: dict) -> str:
    """Acceptance: cells with >= 50 trials per stage and >= 20 tasks need both coverages in [0.93, 0.97], |bias| <= 0.05."""
    if c["m"] < 50 or c["tasks"] < 20:
        return "-"
    ok = 0.93 <= c["hier"] <= 0.97 and 0.93 <= c["trial"] <= 0.97 and abs(c["bias"]) <= 0.05
    return "ok" if ok else "MISS"


def main() -> None:
    ap = argparse.ArgumentParser(description="Calibration of the Γ_H intervals on simulated agents")
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--boot", type=int, default=500, help="bootstrap replicates per interval")
    ap.add_argument("--quick", action="store_true", help="100 reps, n_boot 300, trials {50}, tasks {20}")
    ap.add_argument("--ci-method", choices=("percentile", "bca"), default="percentile")
    ap.add_argument("--zero-rule", choices=("jeffreys", "haldane"), default="jeffreys")
    ap.add_argument("--hierarchical", choices=("tasks_rescaled", "tasks_then_trials", "tasks_only"), default="tasks_rescaled")
    ap.add_argument("--aggregate", choices=("unbiased", "smoothed"), default="unbiased")
    ap.add_argument("--acceptance-only", action="store_true", help="only cells with >= 50 trials and >= 20 tasks")
    ap.add_argument("--cells", help="restrict the grid, e.g. 'p=0.5,gamma=0,m=50,tasks=100'")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    reps, n_boot = (100, 300) if args.quick else (args.reps, args.boot)
    ms = (50,) if args.quick else (20, 50, 200)
    ts = (20,) if args.quick else (5, 20, 100)
    # Seeds depend on the cell's position in the full grid, so a restricted run reproduces its cells.
    grid = list(itertools.product((0.2, 0.5, 0.9), (0.0, 0.5), (20, 50, 200), (5, 20, 100)))
    cells = [
        (p, g, m, t, reps, n_boot, args.ci_method, args.zero_rule, args.hierarchical, args.aggregate, 1000 * grid.index((p, g, m, t)))
        for p, g, m, t in itertools.product((0.2, 0.5, 0.9), (0.0, 0.5), ms, ts)
        if not args.acceptance_only or (m >= 50 and t >= 20)
    ]
    if args.cells:
        want = {k: float(v) for k, v in (kv.split("=") for kv in args.cells.split(","))}
        keys = ("p", "gamma", "m", "tasks")
        cells = [c for c in cells if all(want.get(k, c[i]) == c[i] for i, k in enumerate(keys))]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run_cell, cells))
    print(f"reps per cell: {reps}; n_boot: {n_boot}; intervals: {args.ci_method}; nominal level 0.95; zero rule {args.zero_rule}; "
          f"hierarchical {args.hierarchical}; aggregate {args.aggregate}; "
          f"wall {time.perf_counter() - t0:.0f} s")
    print("| P_exp | Γ | trials/stage | tasks | cover hier | cover trial | width hier | width trial | bias | bias vs pop | zero rule | acceptance |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in results:
        print(f"| {c['p']} | {c['gamma']} | {c['m']} | {c['tasks']} | {c['hier']:.3f} | {c['trial']:.3f} | {c['hier_w']:.3f} | {c['trial_w']:.3f} | "
              f"{c['bias']:+.3f} | {c['bias_pop']:+.3f} | {c['zero']:.2f} | {verdict(c)} |")


if __name__ == "__main__":
    main()
