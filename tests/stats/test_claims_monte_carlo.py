"""Protects what the confirmatory claims promise, by Monte Carlo (issue 25's acceptance; slow).

* On the demo's agents (analysis-only replications, as benchmarks/conditions_acceptance.py runs them: the
  trial tables drawn from each sim agent's closed-form model), 200 replications: the null agent's family-wise
  rate of a confirmatory interval excluding 0 stays at or below the declared α (+ Monte Carlo error), and
  no claim whose true |Γ| exceeds the equivalence margin is called `equivalent` in ≥ 99 % of them.
* Contrasts whose sides share their checkpoint trials (one calibration cell, 400 replications): coverage in
  [0.93, 0.97] at nominal 0.95, and narrower than the intervals that treat the sides as independent.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from hrbench.design import StudyDesign
from hrbench.protocol import LoadedStudy

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


@pytest.mark.slow
@pytest.mark.long  # minutes of Monte Carlo: CI's budget (HRBENCH_LONG=1 runs it)
def test_demo_claims_hold_their_error_rate_and_never_call_a_real_effect_equivalent():
    bench = _benchmark("conditions_acceptance")
    base = StudyDesign.from_file(bench.DEMO)
    study = base.study.model_copy(update={"claims": base.study.claims.model_copy(
        update={"equivalence_margin": MARGIN, "alpha": ALPHA})})
    design = StudyDesign(LoadedStudy(study=study, source=base.loaded.source))
    alpha = study.claims_alpha
    null_errors, equivalent_wrongly, real_effects = 0, 0, 0
    for seed in range(REPS):
        claims = bench.replicate_tables(design, 10_000 + seed, sweep=False)["claims"]
        assert len(claims) == study.n_claims
        null = claims[claims["agent"] == NULL_AGENT]
        null_errors += bool((null["verdict"] == "different").any())
        real = claims[claims["truth"].abs() > MARGIN]
        real_effects += len(real)
        equivalent_wrongly += int((real["verdict"] == "equivalent").sum())
    mc = 2 * math.sqrt(alpha * (1 - alpha) / REPS)
    print(f"null agent FWER {null_errors / REPS:.3f} (α = {alpha}); equivalent with |truth| > {MARGIN}: "
          f"{equivalent_wrongly} of {real_effects}")
    assert null_errors / REPS <= alpha + mc
    assert real_effects > 0 and equivalent_wrongly / real_effects <= 0.01


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
