"""Raw per-task outcomes: the only input the statistics engine accepts.

A task unit bundles the checkpoint trials (stage by stage, from declared
checkpoints) with the natural end-to-end rollouts of the same agent
configuration, because every interval in hrbench resamples those two kinds of
trial *together* (DESIGN §7: "keeping checkpoint and natural trials of a task
paired").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

ZeroRule = Literal["jeffreys", "haldane", "bound", "exclude"]
ZERO_RULES: tuple[ZeroRule, ...] = ("jeffreys", "haldane", "bound", "exclude")


@dataclass(frozen=True, eq=False)  # eq=False: numpy fields make field-wise == ambiguous
class TaskOutcomes:
    """Checkpoint and natural-rollout outcomes of one task under one condition.

    Attributes:
        name: task identifier (unique within a study; used to pair conditions).
        family: task family used for aggregation.
        weight: declared task weight for family / overall aggregation.
        checkpoint_passes: one 0/1 array per stage, in path order; stage ``i``'s
            array holds its ``m_i`` checkpoint trials.
        natural_depths: one int per natural rollout: the number of consecutive
            stages passed from the start (``n_stages`` means the rollout succeeded).
    """

    name: str
    family: str
    weight: float
    checkpoint_passes: tuple[np.ndarray, ...]
    natural_depths: np.ndarray

    def __post_init__(self) -> None:
        # Validate at the boundary so every estimator downstream can assume sane counts.
        passes = tuple(np.asarray(p).astype(np.int64).ravel() for p in self.checkpoint_passes)
        depths = np.asarray(self.natural_depths).astype(np.int64).ravel()
        where = f"task {self.name!r}"
        if not passes:
            raise ValueError(f"{where}: checkpoint_passes is empty; declare at least one stage")
        for i, p in enumerate(passes):
            if p.size == 0:
                raise ValueError(f"{where}: stage {i + 1} has no checkpoint trials (m_{i + 1} = 0)")
            if np.any((p != 0) & (p != 1)):
                raise ValueError(f"{where}: stage {i + 1} checkpoint_passes must be 0/1")
        if depths.size == 0:
            raise ValueError(f"{where}: natural_depths is empty (m_0 = 0)")
        if np.any((depths < 0) | (depths > len(passes))):
            raise ValueError(f"{where}: natural_depths must lie in 0..{len(passes)} (number of stages)")
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"{where}: weight must be a positive finite number, got {self.weight}")
        object.__setattr__(self, "checkpoint_passes", passes)
        object.__setattr__(self, "natural_depths", depths)
        # The counts every estimator reads, computed once (read-only: the task is immutable).
        # The calibration reads them ~10 times per task and table; recomputing was a quarter of its time.
        counts = np.bincount(depths, minlength=len(passes) + 1)
        passed = natural_passed(counts)
        cached = {
            "_k": np.array([int(p.sum()) for p in passes], dtype=np.int64),
            "_m": np.array([p.size for p in passes], dtype=np.int64),
            "_depth_counts": counts,
            "_passed": passed,
            "_reached": np.concatenate([[depths.size], passed[:-1]]),
        }
        for key, value in cached.items():
            value.flags.writeable = False
            object.__setattr__(self, key, value)

    @property
    def n_stages(self) -> int:
        """Number of stages on the task's required path."""
        return len(self.checkpoint_passes)

    @property
    def checkpoint_k(self) -> np.ndarray:
        """Checkpoint successes ``k_i`` per stage."""
        return self._k

    @property
    def checkpoint_m(self) -> np.ndarray:
        """Checkpoint trials ``m_i`` per stage."""
        return self._m

    @property
    def m0(self) -> int:
        """Number of natural rollouts."""
        return int(self.natural_depths.size)

    @property
    def depth_counts(self) -> np.ndarray:
        """Rollouts ending at each depth ``0..n_stages`` (length ``n_stages + 1``)."""
        return self._depth_counts

    @property
    def passed(self) -> np.ndarray:
        """Natural rollouts that passed stage ``i`` (i.e. depth >= i), per stage."""
        return self._passed

    @property
    def reached(self) -> np.ndarray:
        """Natural rollouts that reached stage ``i``: ``m0`` then ``passed_{i-1}``."""
        return self._reached


def natural_passed(depth_counts: np.ndarray) -> np.ndarray:
    """``passed_i = #(depth >= i)`` for ``i = 1..n`` from counts of depths ``0..n``."""
    tail = np.cumsum(depth_counts[::-1])[::-1]  # tail[d] = #(depth >= d)
    return tail[1:]


def outcomes_from_counts(
    name: str,
    family: str,
    k: np.ndarray,
    m: np.ndarray,
    depth_counts: np.ndarray,
    weight: float = 1.0,
) -> TaskOutcomes:
    """Build :class:`TaskOutcomes` from counts (order of trials is irrelevant to every estimator)."""
    k = np.asarray(k, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    passes = tuple(np.repeat(np.array([1, 0]), [int(ki), int(mi - ki)]) for ki, mi in zip(k, m))
    depths = np.repeat(np.arange(len(depth_counts)), np.asarray(depth_counts, dtype=np.int64))
    return TaskOutcomes(name=name, family=family, weight=weight, checkpoint_passes=passes, natural_depths=depths)
