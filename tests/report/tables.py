"""Plain input tables of a small study (two agents, two conditions, four tasks of which two transduction)
built directly, in the columns the assets store, so the report is tested without running trials."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hrbench.report.context import ReportHeader, ReportInputs

AGENTS = ("sim-steady", "sim-rotting")
CONDITIONS = ("baseline", "context_reset")
TASKS = {"chain-a": ("ops", 3, 12), "chain-b": ("ops", 4, 30),
         "lt-arith-a": ("transduction-arithmetic", 2, 8), "lt-uuid-b": ("transduction-uuid_sort", 2, 9)}
PREREG = "ab" * 32


def header() -> ReportHeader:
    return ReportHeader(
        study="small", description="a small study for the report tests", prereg_sha256=PREREG, zero_rule="jeffreys",
        baseline_model="product", checkpoint_trials=10, natural_trials=20, n_boot=500, bootstrap_seed=1, level=0.95,
        protocol={"state": "oracle_replay", "history": "fresh"},
        conditions=[{"name": c, "history": "full", "state": "own", "protocol": "00e6a7d679eb", "sharing": "own"}
                    for c in CONDITIONS],
        error_rate="holm", alpha=0.05, n_claims=2 * len(AGENTS) * len(CONDITIONS), equivalence_margin=0.5)


def claims() -> pd.DataFrame:
    """The confirmatory claims of the small study: each agent's `all` row per condition (hrbench.claims columns)."""
    rows = []
    for agent in AGENTS:
        rot = 0.15 if agent == "sim-rotting" else 0.0
        for condition in CONDITIONS:
            g = 3 * rot
            rows.append({"agent": agent, "kind": "residual", "condition": condition, "name": "all", "estimate": g,
                         "claim_estimand": "tasks: sampled", "ci_low": g - 0.5, "ci_high": g + 0.6,
                         "adj_ci_low": g - 0.7, "adj_ci_high": g + 0.8, "adj_level": 1 - 0.05 / 8,
                         "p_value": 0.2, "p_adjusted": 1.0, "verdict": "inconclusive", "truth": g,
                         "flags": ["boundary", "few-tasks"]})
    return pd.DataFrame(rows)


def inputs(seed: int = 3) -> ReportInputs:
    rng = np.random.default_rng(seed)
    est, obs, nat, res, cat, dense = [], [], [], [], [], []
    for task, (family, n, work) in TASKS.items():
        for i in range(n):
            cat.append({"task": task, "family": family, "n_stages": n, "stage": f"s{i + 1}", "stage_index": i,
                        "work_lines": work, "dependency_depth": n})
    for agent in AGENTS:
        rot = 0.15 if agent == "sim-rotting" else 0.0
        for condition in CONDITIONS:
            for task, (family, n, _) in TASKS.items():
                terms = []
                for i in range(n):
                    k = int(rng.integers(7, 11))
                    r = max(0.05, k / 10 - rot * i)
                    est.append({"agent": agent, "condition": condition, "protocol": "p1", "task": task,
                                "family": family, "stage": f"s{i + 1}", "stage_index": i, "k": k, "m": 10,
                                "q_hat": k / 10, "q_ci_low": 0.5, "q_ci_high": 1.0, "true_q": 0.9})
                    obs.append({"agent": agent, "condition": condition, "task": task, "family": family,
                                "stage": f"s{i + 1}", "stage_index": i, "reached": 20 - 3 * i, "passed": 18 - 3 * i,
                                "r_hat": r, "m0": 20, "k0": 12, "p_observed": 0.6})
                    terms.append(float(np.log(k / 10 / r)))
                res.append({"agent": agent, "condition": condition, "scope": "task", "name": task, "gamma": sum(terms),
                            "ci_low": sum(terms) - 0.4, "ci_high": sum(terms) + 0.4, "true_gamma": rot * n,
                            "ci_method": "trial-percentile", "estimand": "tasks: fixed", "zero_rule_applied": False,
                            "too_few_tasks": "", "stage_terms": json.dumps(terms)})
                for t in range(20):
                    passed = int(rng.integers(0, n + 1))
                    nat.append({"agent": agent, "condition": condition, "task": task, "trial_index": t,
                                "stages_passed": passed, "passed": passed == n,
                                "exit_reason": "passed" if passed == n else "failed"})
                    dense.append({"agent": agent, "condition": condition, "task": task, "family": family,
                                  "trial_index": t, "reward": passed / n, "exit_reason": nat[-1]["exit_reason"],
                                  "tokens": 0, "turns": passed + 1, "wall_s": 1.0, "cost_usd": 0.0})
            for scope, name in (("family", "ops"), ("all", "all")):
                res.append({"agent": agent, "condition": condition, "scope": scope, "name": name, "gamma": 3 * rot,
                            "ci_low": 3 * rot - 0.5, "ci_high": 3 * rot + 0.6, "trial_ci_low": 3 * rot - 0.2,
                            "trial_ci_high": 3 * rot + 0.2, "true_gamma": 3 * rot, "ci_method": "hierarchical-percentile",
                            "estimand": "tasks: sampled", "zero_rule_applied": scope == "all",
                            "too_few_tasks": "too few tasks" if scope == "family" else ""})
    contrasts = pd.DataFrame([{"agent": a, "condition": "context_reset", "scope": s, "name": n, "delta_gamma": 0.3,
                               "ci_low": -0.1, "ci_high": 0.7, "true_delta_gamma": 0.25, "ci_method": "paired"}
                              for a in AGENTS for s, n in (("family", "ops"), ("all", "all"))])
    sensitivity = pd.DataFrame([{"agent": a, "scope": s, "name": n, "gamma_min": 0.1, "gamma_max": 0.4,
                                 "verdict": "inconclusive", "direction": None, "driver": "zero_rule", "n_choices": 4, "true_gamma": 0.2}
                                for a in AGENTS for s, n in (("family", "ops"), ("all", "all"))])
    depth = pd.DataFrame([{"task": t, "depth": d, "depth_status": "estimate", "n_turns": d}
                          for t, d in zip(TASKS, (3, 5, 1, 2))])
    return ReportInputs(residuals=pd.DataFrame(res), contrasts=contrasts, sensitivity=sensitivity, claims=claims(),
                        stage_estimates=pd.DataFrame(est), observed=pd.DataFrame(obs), natural=pd.DataFrame(nat),
                        catalog=pd.DataFrame(cat), depth=depth, dense=pd.DataFrame(dense))
