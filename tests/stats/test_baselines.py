"""Protects the baselines: the checkpoint simulator reduces to the product on a fixed path."""

import numpy as np
import pytest
from pydantic import ValidationError

from hrbench.stats import (
    StageGraph,
    StageNode,
    exact_success_probability,
    oracle_scaffolded_baseline,
    product_baseline,
    simulate_graph,
    simulator_baseline,
)


def test_simulator_equals_product_on_fixed_path_without_retries():
    q = [0.9, 0.8, 0.95, 0.7]
    graph = StageGraph.path(q)
    assert exact_success_probability(graph) == pytest.approx(np.prod(q), abs=1e-15)
    sim = simulator_baseline(graph, n_sims=400_000, seed=1)
    assert abs(sim.p_expected - np.prod(q)) < 4 * sim.mc_se


def branching_graph() -> StageGraph:
    return StageGraph(
        stages=[
            StageNode(name="setup", q=0.7, max_retries=2, retry_q=0.5),
            StageNode(name="api", q=0.6, requires=["setup"]),
            StageNode(name="cli", q=0.5, requires=["setup"]),
            StageNode(name="fix_api", q=0.4, recovers="api"),
            StageNode(name="ship", q=0.9, requires=["api", "cli"], join="any", max_retries=3),
        ],
        goal="ship",
        retry_budget=2,
    )


def test_simulator_monte_carlo_matches_exact_enumeration_with_retries_recovery_and_or():
    graph = branching_graph()
    exact = exact_success_probability(graph)
    wins = simulate_graph(graph, 400_000, np.random.default_rng(0))
    assert abs(wins.mean() - exact) < 4 * np.sqrt(exact * (1 - exact) / wins.size)
    # Retries, recovery and the OR branch all raise success above the plain path.
    assert exact > 0.7 * 0.6 * 0.9


def test_retry_budget_binds():
    free = StageGraph(stages=[StageNode(name="a", q=0.5, max_retries=3)], goal="a")
    capped = StageGraph(stages=[StageNode(name="a", q=0.5, max_retries=3)], goal="a", retry_budget=1)
    assert exact_success_probability(free) == pytest.approx(1 - 0.5**4)
    assert exact_success_probability(capped) == pytest.approx(1 - 0.5**2)


def test_graph_validation_rejects_undeclared_and_misordered_stages():
    with pytest.raises(ValidationError, match="declared before"):
        StageGraph(stages=[StageNode(name="b", q=0.5, requires=["a"]), StageNode(name="a", q=0.5)], goal="b")
    with pytest.raises(ValidationError, match="must come before its dependents"):
        StageGraph(
            stages=[
                StageNode(name="a", q=0.5),
                StageNode(name="b", q=0.5, requires=["a"]),
                StageNode(name="fix", q=0.5, recovers="a"),
            ],
            goal="b",
        )


def test_oracle_scaffolded_baseline_is_flagged_as_needing_compatibility():
    oracle = oracle_scaffolded_baseline([9, 8], [10, 10], "bound")
    assert oracle.needs_compatibility and oracle.p_expected == pytest.approx(0.72)
    assert not product_baseline([9, 8], [10, 10], "bound").needs_compatibility


def test_graph_takes_estimated_probabilities():
    graph = StageGraph.path([0.5, 0.5]).with_probabilities({"s1": 0.9, "s2": 0.8})
    assert exact_success_probability(graph) == pytest.approx(0.72)
