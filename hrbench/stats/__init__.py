"""hrbench statistics engine: pure numpy/scipy functions, no orchestration imports.

See docs/statistics.md for every estimator and the decisions behind it.
"""

from hrbench.stats.data import ZeroRule, TaskOutcomes, outcomes_from_counts
from hrbench.stats.estimate import TaskEstimate, estimate_task, delta_se
from hrbench.stats.intervals import jeffreys_interval, smoothed_proportion, wilson_interval
from hrbench.stats.residuals import (
    QuadrantThresholds,
    Quadrant,
    ResidualRow,
    quadrant,
    residual_table,
)

__all__ = [
    "QuadrantThresholds",
    "Quadrant",
    "ResidualRow",
    "TaskEstimate",
    "TaskOutcomes",
    "ZeroRule",
    "delta_se",
    "estimate_task",
    "jeffreys_interval",
    "outcomes_from_counts",
    "quadrant",
    "residual_table",
    "smoothed_proportion",
    "wilson_interval",
]
