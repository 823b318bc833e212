"""Protects what the confirmatory claims promise, by Monte Carlo (issue 25's acceptance; slow).

* On the demo's agents, 200 replications drawn as counts from each sim agent's closed-form model
  (`hrbench.simulate.simulated_outcomes`, the claims through `benchmarks/conditions_acceptance.claims_of`:
  the same estimators, claim values and adjustment as the asset graph, claimed rows only): the null agent's
  family-wise rate of a confirmatory claim called `different` stays at or below the declared α (+ Monte Carlo
  error), and no claim whose true |Γ| exceeds the equivalence margin is called `equivalent` in ≥ 99 % of them.
* That fast path gives the pipeline's claims table on the same trials (default suite, a six-task demo).
* Contrasts whose sides share their checkpoint trials (one calibration cell, 400 replications): coverage in
  [0.93, 0.97] at nominal 0.95, and narrower than the intervals that treat the sides as independent.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hrbench.design import StudyDesign
from hrbench.protocol import LoadedStudy
from hrbench.simulate import simulated_outcomes

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NULL_AGENT = "sim-steady"
REPS = 200
MARGIN = 0.3  # nats: every degrading claim's truth of the demo is far above it, the null agent's is 0
# The claims' α: the demo's own (0.005) leaves an unadjusted family of 7 null claims at about 1 % in 200
# replications, inside α + MC error, so the check could not tell Holm from no adjustment; at 0.05 it can.
ALPHA = 0.05


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _demo(bench, tasks: list[str] | None = None) -> StudyDesign:
    """The demo with the test's margin and α (and, given ``tasks``, only those tasks and no depth step)."""
    base = StudyDesign.from_file(bench.DEMO)
    study = base.study.model_copy(update={"claims": base.study.claims.model_copy(
        update={"equivalence_margin": MARGIN, "alpha": ALPHA})})
    if tasks is not None:
        study = study.model_copy(update={"tasks": study.tasks.model_copy(update={"include": tasks}), "depth": None})
    return StudyDesign(LoadedStudy(study=study, source=base.loaded.source))


@pytest.mark.slow  # ~40 s of one core
def test_demo_claims_hold_their_error_rate_and_never_call_a_real_effect_equivalent():
    bench = _benchmark("conditions_acceptance")
    design = _demo(bench)
    study = design.study
    null_errors, equivalent_wrongly, real_effects = 0, 0, 0
    for claims in bench.claim_replications(design, REPS, seed=10_000):
        assert len(claims) == study.n_claims
        null = claims[claims["agent"] == NULL_AGENT]
        null_errors += bool((null["verdict"] == "different").any())
        real = claims[claims["truth"].abs() > MARGIN]
        real_effects += len(real)
        equivalent_wrongly += int((real["verdict"] == "equivalent").sum())
    mc = 2 * math.sqrt(ALPHA * (1 - ALPHA) / REPS)
    print(f"null agent FWER {null_errors / REPS:.3f} (α = {ALPHA}); equivalent with |truth| > {MARGIN}: "
          f"{equivalent_wrongly} of {real_effects}")
    assert null_errors / REPS <= ALPHA + mc
    assert real_effects > 0 and equivalent_wrongly / real_effects <= 0.01


def test_the_fast_replication_gives_the_pipelines_claims_table():
    """The Monte Carlo's claims (claimed rows only, no trial table) equal the asset graph's on the same trials."""
    bench = _benchmark("conditions_acceptance")
    design = _demo(bench, ["backup-rotation", "file-housekeeping", "log-chores", "lt-arith-orderedids-d1-n12-s0-k4",
                           "lt-arith-shuffledids-d2-n12-s0-k4", "lt-arith-noids-d3-n12-s0-k4"])
    outcomes: dict = {}
    tables = bench.replicate_tables(design, 3, sweep=False, outcomes=outcomes)
    fast = bench.claims_of(design, outcomes, bench.ClaimTruths(design, outcomes))
    assert len(fast) == design.study.n_claims == 21
    pd.testing.assert_frame_equal(fast, tables["claims"], check_dtype=False, rtol=1e-12)


def test_simulated_outcomes_draw_each_agents_model_and_share_one_protocols_checkpoint_trials():
    """The count draws have the sim truth's means (checkpoint k/m per stage, natural success), conditions
    of one checkpoint protocol hold the same checkpoint trials and compaction (its own protocol) others."""
    bench = _benchmark("conditions_acceptance")
    design = _demo(bench, ["backup-rotation", "lt-uuid-noids-d3-n12-s0-k4"])
    reps, agent = 1500, "sim-fragile"
    runs = simulated_outcomes(design, agent, np.random.default_rng(5), reps)
    m, m0 = design.study.trials.checkpoint, design.study.trials.natural
    for j, task in enumerate(design.tasks):
        for condition in design.study.condition_names:
            truth = design.truth(agent, task.name, condition)
            k = np.array([run[condition][j].checkpoint_k for run in runs])
            q = np.asarray(design.truth(agent, task.name, "baseline", design.study.checkpoint_protocol(condition)).q)
            assert np.all(np.abs(k.mean(0) / m - q) < 4 * np.sqrt(q * (1 - q) / (m * reps)) + 1e-9), (task.name, condition)
            passed = np.array([run[condition][j].passed[-1] for run in runs])
            p = truth.p_observed
            assert abs(passed.mean() / m0 - p) < 4 * math.sqrt(p * (1 - p) / (m0 * reps)) + 1e-9, (task.name, condition)
        first = runs[0]
        for shared in ("context_reset", "state_repair"):
            assert np.array_equal(first[shared][j].checkpoint_k, first["baseline"][j].checkpoint_k)
    assert any(not np.array_equal(run["compaction"][j].checkpoint_k, run["baseline"][j].checkpoint_k)
               for run in runs[:20] for j in range(len(design.tasks)))


@pytest.mark.slow
def test_shared_trial_contrasts_cover_and_are_narrower_than_independent_sides(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # calibration_contrasts imports its sibling `calibration`
    bench = _benchmark("calibration_contrasts")
    cell = (5, 4, 0.2, 0.5, 20)  # two families of 5 four-stage tasks, P_exp 0.2, ΔΓ 0.5, m = m_0 = 20
    shared = bench.run_cell(cell, 400, shared=True)["kinds"]
    independent = bench.run_cell(cell, 400, shared=True, independent_intervals=True)["kinds"]
    for kind in (("all", "sampled"), ("all", "fixed"), ("family", "fixed")):
        assert 0.93 <= shared[kind]["cover"] <= 0.97, (kind, shared[kind]["cover"])
    for kind in (("all", "fixed"), ("family", "fixed"), ("task", "fixed")):
        assert shared[kind]["width"] < independent[kind]["width"], kind
    assert shared[("all", "sampled")]["width"] <= independent[("all", "sampled")]["width"]
