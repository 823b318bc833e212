"""Simulated task outcomes with known truth, for calibration, planning and tests.

A simulated agent passes checkpoint stage ``i`` with probability ``q_i`` and,
in a natural rollout that reached stage ``i``, passes it with probability
``r_i``; so P_expected = Π q_i, P_observed = Π r_i and Γ_H = Σ ln(q_i/r_i)
exactly.
"""

from __future__ import annotations

import numpy as np

from hrbench.stats.data import TaskOutcomes


def simulate_counts(
    q: np.ndarray, r: np.ndarray, m: np.ndarray, m0: int, rng: np.random.Generator, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``size`` independent datasets of one task: checkpoint ``k`` (size, S) and natural ``passed`` (size, S)."""
    q, r = np.asarray(q, float), np.asarray(r, float)
    k = rng.binomial(np.broadcast_to(np.asarray(m), (size, q.size)), q)
    passed = np.empty((size, r.size), np.int64)
    alive = np.full(size, m0, np.int64)
    for i in range(r.size):
        alive = rng.binomial(alive, r[i])
        passed[:, i] = alive
    return k, passed


def simulate_task(
    name: str,
    family: str,
    q: np.ndarray,
    r: np.ndarray,
    m: int | np.ndarray,
    m0: int,
    rng: np.random.Generator,
    weight: float = 1.0,
) -> TaskOutcomes:
    """One task's raw trials: ``m`` checkpoint trials per stage and ``m0`` natural rollouts."""
    q, r = np.asarray(q, float), np.asarray(r, float)
    m_arr = np.broadcast_to(np.asarray(m), q.shape)
    passes = tuple((rng.random(int(mi)) < qi).astype(np.int64) for qi, mi in zip(q, m_arr))
    # Depth = stages passed before the first natural failure.
    survive = rng.random((m0, r.size)) < r
    depths = np.cumprod(survive, axis=1).sum(axis=1)
    return TaskOutcomes(name=name, family=family, weight=weight, checkpoint_passes=passes, natural_depths=depths)
