"""Protects the confirmatory claims on the study's tables: which rows are claimed, their adjusted intervals and
p-values, and the adjustment across every agent's claims."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from hrbench.claims import claims_table, mark_residual_claims
from hrbench.protocol import Study
from hrbench.stats import residual_table, simulate_task
from hrbench.stats.claims import claim_level, holm_adjust


def _study(**claims) -> Study:
    agent = {"kind": "sim", "sim": {"skill": 0.9}}
    return Study.model_validate({"name": "s", "agents": [{"id": "a", **agent}, {"id": "b", **agent}],
                                 "conditions": ["baseline", "context_reset", "state_repair"],
                                 "bootstrap": {"level": 0.95}, "claims": claims})


def _outcomes(seed: int, ratio: float) -> list:
    rng = np.random.default_rng(seed)
    q = np.array([0.9, 0.85, 0.9])
    return [simulate_task(f"t{j}", "AB"[j % 2], q, q * ratio ** (1 / 3), 20, 20, rng) for j in range(10)]


def _frame(study: Study, agent: str, outcomes: list) -> pd.DataFrame:
    table = pd.DataFrame([r.model_dump() for r in residual_table(outcomes, level=study.bootstrap.level)])
    table.insert(0, "condition", "baseline")
    table.insert(0, "agent", agent)
    table["true_gamma"] = table["true_gamma_sampled"] = None
    return mark_residual_claims(study, table, outcomes, "jeffreys")


def test_the_study_counts_its_claims_and_validates_the_contrasts():
    assert _study().n_claims == 2 * (3 * 1 + 2)  # agents × (conditions × rows + non-baseline contrasts)
    assert _study(rows=["all", "A"], contrasts=["state_repair"]).n_claims == 2 * (3 * 2 + 1)
    assert _study().claims_alpha == pytest.approx(0.05)
    with pytest.raises(ValueError, match="claims.contrasts"):
        _study(contrasts=["baseline"])


def test_only_the_declared_rows_are_claimed_with_the_interval_at_the_simultaneous_level():
    study = _study()
    outcomes = _outcomes(1, 0.6)
    table = _frame(study, "a", outcomes)
    claimed = table[table["confirmatory"]]
    assert list(claimed["name"]) == ["all"]
    level = claim_level(0.05, study.n_claims)
    again = next(r for r in residual_table(outcomes, level=level) if r.scope == "all")
    row = claimed.iloc[0]
    assert (row["adj_ci_low"], row["adj_ci_high"]) == pytest.approx((again.ci_low, again.ci_high))
    assert row["adj_ci_high"] - row["adj_ci_low"] > row["ci_high"] - row["ci_low"]
    # The p-value inverts the interval: at level 1 − p the interval's nearer end sits at 0.
    edge = next(r for r in residual_table(outcomes, level=1 - row["p_value"]) if r.scope == "all")
    assert min(abs(edge.ci_low), abs(edge.ci_high)) == pytest.approx(0, abs=1e-6)
    assert table.loc[~table["confirmatory"], "p_value"].isna().all()


def test_claims_are_adjusted_across_every_agent_and_get_verdicts():
    study = _study(equivalence_margin=3.0)
    frames = pd.concat([_frame(study, "a", _outcomes(2, 0.5)), _frame(study, "b", _outcomes(3, 1.0))])
    claims = claims_table(study, frames, pd.DataFrame())
    assert list(claims["agent"]) == ["a", "b"]
    assert claims["p_adjusted"].to_numpy() == pytest.approx(holm_adjust(claims["p_value"].to_numpy()))
    degrading, steady = claims.iloc[0], claims.iloc[1]
    assert degrading["verdict"] == "different" and degrading["p_adjusted"] <= 0.05
    assert steady["verdict"] == "equivalent"  # |adjusted interval| inside the wide margin
    no_margin = claims_table(_study(), frames, pd.DataFrame())
    assert "equivalent" not in set(no_margin["verdict"])


def test_a_row_without_a_population_interval_claims_its_tasks_fixed_interval_recomputed_at_the_claim_level():
    study = _study()
    outcomes = [dataclasses.replace(t, family=f"F{j}") for j, t in enumerate(_outcomes(4, 0.85)[:8])]  # one task each
    row = _frame(study, "a", outcomes).query("confirmatory").iloc[0]
    assert row["claim_estimand"] == "tasks: fixed"
    again = next(r for r in residual_table(outcomes, level=claim_level(0.05, study.n_claims)) if r.scope == "all")
    assert (row["adj_ci_low"], row["adj_ci_high"]) == pytest.approx((again.trial_ci_low, again.trial_ci_high))
    assert 1e-9 < row["p_value"] < 1  # inside the bisection's range: the edge below is the inversion's
    edge = next(r for r in residual_table(outcomes, level=1 - row["p_value"]) if r.scope == "all")
    assert min(abs(edge.trial_ci_low), abs(edge.trial_ci_high)) == pytest.approx(0, abs=1e-5)
