"""The homogeneous null (paper §3.2): constant stage success p, independent failures, no recovery.

An n-stage task then succeeds with probability p**n, and the first horizon at
which success falls to s or below is H_s = ⌈ln s / ln p⌉.
"""

from __future__ import annotations

import math
from typing import Sequence

# ln s / ln p is often an integer mathematically but lands a hair above it in
# floating point (ln 0.25 / ln 0.5 = 2.0000000000000004); round that noise away
# before the ceiling.
_ROUND = 9


def horizon_below(p: float, s: float) -> int:
    """H_s = ⌈ln s / ln p⌉: the first number of stages with p**n ≤ s (p, s in (0, 1))."""
    if not (0 < p < 1 and 0 < s < 1):
        raise ValueError(f"horizon_below needs 0 < p < 1 and 0 < s < 1, got p={p}, s={s}")
    return math.ceil(round(math.log(s) / math.log(p), _ROUND))


def horizon_table(ps: Sequence[float], ss: Sequence[float] = (0.5,)) -> list[dict[str, float | int]]:
    """The "first horizon below s" table: one row per (p, s) with H_s and p**H_s."""
    return [
        {"p": p, "s": s, "horizon": (h := horizon_below(p, s)), "success_at_horizon": p**h}
        for p in ps
        for s in ss
    ]
