"""hrbench statistics engine: pure numpy/scipy functions, no orchestration imports.

See docs/statistics.md for every estimator and the decisions behind it.
"""

from hrbench.stats.baselines import (
    Baseline,
    StageGraph,
    StageNode,
    exact_success_probability,
    oracle_scaffolded_baseline,
    p_expected,
    product_baseline,
    simulate_graph,
    simulator_baseline,
)
from hrbench.stats.contrasts import DifferenceRow, paired_difference
from hrbench.stats.data import TaskOutcomes, ZeroRule, outcomes_from_counts
from hrbench.stats.estimate import TaskEstimate, delta_se, estimate_task
from hrbench.stats.horizon import horizon_below, horizon_table
from hrbench.stats.intervals import jeffreys_interval, smoothed_proportion, wilson_interval
from hrbench.stats.planning import Plan, SimulatedWidth, min_detectable_gamma, plan_trials, simulate_half_width
from hrbench.stats.residuals import Quadrant, QuadrantThresholds, ResidualRow, quadrant, residual_table
from hrbench.stats.synthetic import simulate_task

__all__ = [
    "Baseline",
    "DifferenceRow",
    "Plan",
    "Quadrant",
    "QuadrantThresholds",
    "ResidualRow",
    "SimulatedWidth",
    "StageGraph",
    "StageNode",
    "TaskEstimate",
    "TaskOutcomes",
    "ZeroRule",
    "delta_se",
    "estimate_task",
    "exact_success_probability",
    "horizon_below",
    "horizon_table",
    "jeffreys_interval",
    "min_detectable_gamma",
    "oracle_scaffolded_baseline",
    "p_expected",
    "outcomes_from_counts",
    "paired_difference",
    "plan_trials",
    "product_baseline",
    "quadrant",
    "residual_table",
    "simulate_graph",
    "simulate_half_width",
    "simulate_task",
    "simulator_baseline",
    "smoothed_proportion",
    "wilson_interval",
]
