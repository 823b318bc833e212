"""Protects the max-|t| simultaneous band over the confirmatory claims (issue 25 item 1, `claims.error_rate:
maxt`): its closed forms (independent claims: Šidák; one claim repeated: the claim's own level), the claims'
correlation from their linearized terms, and its family-wise coverage on simulated studies whose truth is known."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from hrbench.claims import adjusted_claims, claim_record, contrast_claim_values, residual_claim_values
from hrbench.protocol import Study
from hrbench.stats import paired_difference, residual_table, simulate_task
from hrbench.stats.claims import MaxT, claims_correlation


def test_the_band_is_sidak_for_independent_claims_and_the_claims_own_level_for_one_repeated():
    alpha, k = 0.05, 5
    # 50,000 draws: tail probabilities to ±0.001 (one MC standard error); tolerances are 3 of them
    assert MaxT.of(np.eye(k)).level(alpha) == pytest.approx((1 - alpha) ** (1 / k), abs=6e-4)
    assert MaxT.of(np.ones((k, k))).level(alpha) == pytest.approx(1 - alpha, abs=3e-3)
    p = np.array([0.001, 0.01, 0.2])
    assert MaxT.of(np.eye(3)).adjust(p) == pytest.approx(1 - (1 - p) ** 3, abs=3e-3)
    # correlated claims: between the two, and never wider than Bonferroni
    half = MaxT.of(np.full((k, k), 0.5) + 0.5 * np.eye(k)).level(alpha)
    assert 1 - alpha < half < (1 - alpha) ** (1 / k) < 1 - alpha / k + 1e-9


def test_the_correlation_is_the_cluster_covariance_of_the_claims_terms():
    x = {"t1": ("F", 0.1), "t2": ("F", -0.1), "t3": ("F", 0.05), "t4": ("F", -0.05)}
    y = {t: (f, 2 * v + 1.0) for t, (f, v) in x.items()}  # an affine image: correlation 1 (centred within family)
    z = {t: (f, -v) for t, (f, v) in x.items()}
    other = {"u1": ("F", 0.3), "u2": ("F", -0.3)}  # no common task: independent
    w = {"t1": ("F", 0.1), "t2": ("F", 0.1), "t3": ("F", -0.1), "t4": ("F", -0.1)}
    corr = claims_correlation([x, y, z, other, None, w])
    assert corr[0, 1] == pytest.approx(1) and corr[0, 2] == pytest.approx(-1)
    assert corr[0, 3] == 0 and corr[0, 4] == 0 and corr[4, 4] == 1
    # closed form: Σ x w / √(Σx² Σw²) = (0.01 − 0.01 − 0.005 + 0.005) / … = 0
    assert corr[0, 5] == pytest.approx(0.0, abs=1e-12)
    assert corr[2, 5] == pytest.approx(0.0, abs=1e-12)


# -- coverage: one agent, baseline and two conditions sharing its checkpoint trials; 5 claims --------------------

_Q = {"A": np.array([[0.95, 0.9, 0.9], [0.9, 0.85, 0.95], [0.85, 0.9, 0.8], [0.95, 0.95, 0.85]]),
      "B": np.array([[0.8, 0.9, 0.9], [0.9, 0.8, 0.85], [0.9, 0.9, 0.95], [0.85, 0.95, 0.9]])}
_GAMMA = {"A": np.array([0.3, 0.6, 0.9, 0.45]), "B": np.array([0.8, 0.2, 0.5, 0.65])}  # each task type's Γ at baseline
_SCALE = {"baseline": 1.0, "context_reset": 0.5, "state_repair": 0.8}  # what each condition leaves of it


def _r(family: str, condition: str) -> np.ndarray:
    return _Q[family] * np.exp(-_SCALE[condition] * _GAMMA[family] / 3)[:, None]


def _truth(condition: str) -> float:
    """Tasks sampled (types uniform within family, equal family sizes): ln(E P_exp / E P_obs) of the population."""
    pe = np.mean([np.prod(_Q[f], axis=1).mean() for f in _Q])
    po = np.mean([np.prod(_r(f, condition), axis=1).mean() for f in _Q])
    return float(np.log(pe / po))


def _study(error_rate: str) -> Study:
    return Study.model_validate({"name": "s", "agents": [{"id": "a", "kind": "sim", "sim": {"skill": 0.9}}],
                                 "conditions": list(_SCALE), "bootstrap": {"level": 0.95},
                                 "claims": {"error_rate": error_rate}})


def _claims(study: Study, rng: np.random.Generator, per_family: int = 8, m: int = 20) -> pd.DataFrame:
    types = {f: rng.integers(0, 4, per_family) for f in _Q}
    sides = {}
    for c in _SCALE:
        sides[c] = [simulate_task(f"{f}{j}", f, _Q[f][i], _r(f, c)[i], m, m, rng)
                    for f in _Q for j, i in enumerate(types[f])]
    for c in ("context_reset", "state_repair"):  # the conditions reuse the baseline's checkpoint trials
        sides[c] = [dataclasses.replace(t, checkpoint_passes=b.checkpoint_passes)
                    for t, b in zip(sides[c], sides["baseline"])]
    records = []
    for c, outcomes in sides.items():
        row = next(r for r in residual_table(outcomes, level=0.95, scopes=("all",))).model_dump()
        row |= {"agent": "a", "condition": c, "true_gamma_sampled": _truth(c)}
        records.append(claim_record("residual", row | residual_claim_values(study, row, outcomes, "jeffreys")))
    for c in ("context_reset", "state_repair"):
        row = paired_difference(sides["baseline"], sides[c], level=0.95, scopes=("all",),
                                shared_checkpoint=True)[0].model_dump()
        row |= {"agent": "a", "condition": c, "delta_gamma": row["delta"],
                "true_delta_gamma_sampled": _truth("baseline") - _truth(c)}
        records.append(claim_record("contrast", row | contrast_claim_values(study, row, sides["baseline"], sides[c], True)))
    return adjusted_claims(study, records)


def _all_covered(claims) -> bool:
    return bool(np.all((claims["adj_ci_low"] <= claims["truth"]) & (claims["truth"] <= claims["adj_ci_high"])))


def test_one_simulated_study_gets_a_band_narrower_than_bonferroni_from_the_claims_correlation():
    rng = np.random.default_rng(5)
    maxt = _claims(_study("maxt"), rng)
    holm = _claims(_study("holm"), np.random.default_rng(5))
    assert len(maxt) == 5 and maxt["truth"].notna().all()
    # the 5 claims share tasks and checkpoint trials: a band between the claims' own level and Šidák's
    level = maxt["adj_level"].iloc[0]
    assert (maxt["adj_level"] == level).all() and 0.95 < level < 0.95 ** (1 / 5) - 0.001
    assert (holm["adj_level"] == 0.99).all()
    width = (maxt["adj_ci_high"] - maxt["adj_ci_low"]) / (holm["adj_ci_high"] - holm["adj_ci_low"])
    assert (width < 1).all()
    # single-step: never above Bonferroni's k·p (Holm's step-down can be below it for the larger p-values)
    p = maxt["p_value"].to_numpy()
    assert (maxt["p_adjusted"] <= np.minimum(5 * p, 1) + 1e-12).all() and (maxt["p_adjusted"] >= p).all()


@pytest.mark.slow
def test_the_max_t_band_covers_all_five_truths_at_once_at_the_nominal_rate():
    """600 studies of 2 families × 8 tasks (4 task types each), m = m_0 = 20, baseline and two conditions on
    the baseline's checkpoint trials; claims Γ × 3 and ΔΓ × 2 (k = 5), family-wise level 0.95 (MC error 0.009)."""
    rng = np.random.default_rng(11)
    reps = 600
    covered = sum(_all_covered(_claims(_study("maxt"), rng)) for _ in range(reps))
    print(f"family-wise coverage {covered / reps:.3f}")
    assert 0.93 <= covered / reps <= 0.97, covered / reps


def test_the_claims_table_bands_every_agents_stored_claims_and_keeps_a_tasks_fixed_claim_at_bonferroni():
    """Through the tables the asset graph stores (parquet): two agents' marked residual rows, one of them with
    single-task families (a tasks-fixed claim: no terms, kept at 1 − α/k), adjusted by `claims_table`."""
    import io

    import pandas as pd

    from hrbench.claims import claims_table, mark_residual_claims

    study = Study.model_validate({"name": "s", "agents": [{"id": a, "kind": "sim", "sim": {"skill": 0.9}}
                                                           for a in ("a", "b")],
                                  "bootstrap": {"level": 0.95}, "claims": {"error_rate": "maxt"}})
    rng = np.random.default_rng(4)
    q = np.array([0.9, 0.85, 0.9])
    frames = []
    for agent, n_families in (("a", 2), ("b", 8)):
        outcomes = [simulate_task(f"t{j}", f"F{j % n_families}", q, q * 0.6 ** (1 / 3), 20, 20, rng) for j in range(8)]
        table = pd.DataFrame([r.model_dump() for r in residual_table(outcomes, level=0.95)])
        table.insert(0, "condition", "baseline")
        table.insert(0, "agent", agent)
        table["true_gamma"] = table["true_gamma_sampled"] = None
        table = mark_residual_claims(study, table, outcomes, "jeffreys")
        buffer = io.BytesIO()
        table.to_parquet(buffer)
        frames.append(pd.read_parquet(buffer))
    stored = pd.concat(frames, ignore_index=True)
    claimed = stored[stored["confirmatory"]]
    assert isinstance(claimed["claim_terms"].iloc[0], str) and claimed["claim_terms"].iloc[1] is None
    claims = claims_table(study, stored, pd.DataFrame())
    assert list(claims["claim_estimand"]) == ["tasks: sampled", "tasks: fixed"]
    # two independent claims: Šidák's level for the t interval; the tasks-fixed one keeps Bonferroni's 1 − α/2
    # (50,000 draws: the per-claim tail 0.025 to ±0.0005; 4 of them)
    assert claims["adj_level"].iloc[0] == pytest.approx(0.95**0.5, abs=2e-3) and claims["adj_level"].iloc[1] == 0.975
    assert "claim_terms" not in claims and "claim_df" not in claims


def test_the_terminal_names_the_band_and_each_level_it_prints():
    from hrbench.cli import claim_sentences

    claim = {"agent": "a", "kind": "residual", "condition": "baseline", "name": "all", "estimate": 0.5,
             "adj_ci_low": 0.1, "adj_ci_high": 0.9, "ci_low": 0.2, "ci_high": 0.8, "claim_estimand": "tasks: sampled",
             "verdict": "different", "truth": None, "adj_level": 0.9871}
    summary = {"claims": [claim, claim | {"adj_level": 0.99, "claim_estimand": "tasks: fixed"}], "n_claims": 2,
               "error_rate": "maxt", "alpha": 0.05, "equivalence_margin": None}
    head = claim_sentences(summary)[0]
    assert "max-|t| simultaneous band" in head and "98.71% / 99%" in head
