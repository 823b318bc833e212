"""How robustly the interventions study's acceptance holds: analysis-only replications over seeds.

Draws the interventions study's trial tables from each sim agent's closed-form model (hrbench.simulate:
same distribution as the sandboxed trials, no sandbox), runs the same analysis as the asset graph
(residuals per condition, contrasts, sensitivity), and counts how often every acceptance clause of
issue 9 holds. Usage: python benchmarks/conditions_acceptance.py [--study S] [--seeds N] [--m M --m0 M0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter

import numpy as np

from hrbench import analysis
from hrbench.design import StudyDesign
from hrbench.protocol import INTERVENTIONS_STUDY, LoadedStudy
from hrbench.runner import TrialRunner
from hrbench.simulate import simulated_trials
from hrbench.stores import StudyStores

# The intervals the acceptance names (beside the steady agent's, which must contain 0 = its truth).
NAMED = [("sim-rotting", c) for c in ("Γ(baseline)", "Γ(context_reset)", "Γ(state_repair)", "ΔΓ(context_reset)")] + \
    [("sim-fragile", c) for c in ("Γ(baseline)", "Γ(state_repair)", "Γ(context_reset)", "ΔΓ(state_repair)")]
ROLES = {"sim-rotting": ("context_reset", "state_repair"), "sim-fragile": ("state_repair", "context_reset")}


def contains(row, value: float) -> bool:
    return row["ci_low"] <= value <= row["ci_high"]


def clauses(design: StudyDesign, runner: TrialRunner, seed: int) -> Counter:
    """Which acceptance clauses hold in one replication (1) or not (0)."""
    rng = np.random.default_rng(seed)
    ok: Counter = Counter()
    for spec in design.study.agents:
        agent = spec.id
        checkpoint, natural = simulated_trials(design, runner, agent, rng)
        expected = analysis.expected_success(design, agent, analysis.stage_estimates(design, agent, checkpoint))
        res = analysis.horizon_residuals(design, agent, checkpoint, natural, expected)
        con = analysis.intervention_contrasts(design, agent, checkpoint, natural)
        all_res = {r["condition"]: r for r in res[res["scope"] == "all"].to_dict("records")}
        all_con = {r["condition"]: r for r in con[con["scope"] == "all"].to_dict("records")}
        for c, r in all_res.items():
            ok[f"{agent}: Γ({c}) covers its truth"] += contains(r, r["true_gamma"])
        for c, r in all_con.items():
            ok[f"{agent}: ΔΓ({c}) covers its truth"] += contains(r, r["true_delta_gamma"])
        truth_ok = all(contains(r, r["true_gamma"]) for r in all_res.values()) and \
            all(contains(r, r["true_delta_gamma"]) for r in all_con.values())
        ok[f"{agent}: every `all` interval covers its truth"] += truth_ok
        if agent in ROLES:
            fixes, keeps = ROLES[agent]
            ok[f"{agent}: baseline excludes 0"] += all_res["baseline"]["ci_low"] > 0
            ok[f"{agent}: {fixes} contains 0"] += contains(all_res[fixes], 0.0)
            ok[f"{agent}: {keeps} excludes 0"] += not contains(all_res[keeps], 0.0)
            ok[f"{agent}: ΔΓ({fixes}) excludes 0"] += not contains(all_con[fixes], 0.0)
        else:
            ok[f"{agent}: every condition contains 0"] += all(contains(r, 0.0) for r in all_res.values())
            sweep = analysis.sensitivity_verdicts(analysis.sensitivity_sweep(design, agent, checkpoint, natural))
            verdict = sweep[sweep["scope"] == "all"]["verdict"].iloc[0]
            ok[f"{agent}: sensitivity `all` is robust null"] += verdict == "robust null"
    return ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", default=str(INTERVENTIONS_STUDY))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--m", type=int, default=None, help="override trials.checkpoint")
    parser.add_argument("--m0", type=int, default=None, help="override trials.natural")
    parser.add_argument("--level", type=float, default=None, help="override bootstrap.level")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    design = StudyDesign.from_file(args.study)
    study = design.study
    if args.m or args.m0:
        study = study.model_copy(update={"trials": study.trials.model_copy(update={
            k: v for k, v in (("checkpoint", args.m), ("natural", args.m0)) if v})})
    if args.level:
        study = study.model_copy(update={"bootstrap": study.bootstrap.model_copy(update={"level": args.level})})
    design = StudyDesign(LoadedStudy(study=study, source=design.loaded.source))
    with tempfile.TemporaryDirectory() as tmp:
        runner = TrialRunner(design, StudyStores(tmp), progress=False)
        total: Counter = Counter()
        start = time.perf_counter()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            one = clauses(design, runner, seed)
            total.update(one)
            total["all acceptance clauses at once (every `all` interval covers its truth)"] += all(
                v for k, v in one.items() if "covers its truth" not in k or "every" in k)
            total["all acceptance clauses at once (the named intervals cover their truth)"] += all(
                v for k, v in one.items() if "every `all` interval" not in k and (
                    "covers its truth" not in k or any(f"{a}: {n}" in k for a, n in NAMED)))
    trials = design.study.trials
    print(f"{args.seeds} replications, m_i={trials.checkpoint}, m_0={trials.natural}, "
          f"level={design.study.bootstrap.level} "
          f"({time.perf_counter() - start:.0f} s)")
    for clause, n in sorted(total.items()):
        print(f"  {n / args.seeds:6.1%}  {clause}")


if __name__ == "__main__":
    main()
