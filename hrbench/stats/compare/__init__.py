"""Statistics kept for comparison only: no study selects anything here.

A study's intervals are closed-form (:mod:`hrbench.stats.residuals`, :mod:`hrbench.stats.contrasts`).
Tests and benchmarks check them against the bootstrap schemes here (docs/statistics.md §7.5, §11):
the trial-level bank, the hierarchical schemes, BCa, and sums of smoothed P's.
"""

from hrbench.stats.compare.contrasts import paired_difference
from hrbench.stats.compare.residuals import residual_table

__all__ = ["paired_difference", "residual_table"]
