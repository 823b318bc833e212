"""Tasks packed into arrays, and Γ per group (each family, then ``all``) from per-task P's.

Every residual and contrast scheme starts here: the closed-form intervals of a study
(:mod:`hrbench.stats.residuals`, :mod:`hrbench.stats.contrasts`) and the bootstrap
schemes kept for comparison (:mod:`hrbench.stats.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from hrbench.stats.data import TaskOutcomes, ZeroRule


@dataclass(frozen=True, eq=False)
class Packed:
    """Tasks padded to a common stage count; padding stages have ``m = 0`` and ``mask = False``."""

    tasks: tuple[TaskOutcomes, ...]
    k: np.ndarray  # (T, S) checkpoint successes
    m: np.ndarray  # (T, S) checkpoint trials
    m0: np.ndarray  # (T,) natural rollouts
    mask: np.ndarray  # (T, S) real stage
    weights: np.ndarray  # (T,)
    family_index: np.ndarray  # (T,) index into ``families``
    families: tuple[str, ...]

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_stages(self) -> int:
        return self.k.shape[1]


def pack(tasks: Sequence[TaskOutcomes]) -> Packed:
    """Pad a list of tasks into arrays (one row per task, one column per stage)."""
    if not tasks:
        raise ValueError("no tasks to analyse")
    T, S = len(tasks), max(t.n_stages for t in tasks)
    k = np.zeros((T, S), np.int64)
    m = np.zeros((T, S), np.int64)
    mask = np.zeros((T, S), bool)
    for j, t in enumerate(tasks):
        n = t.n_stages
        k[j, :n], m[j, :n], mask[j, :n] = t.checkpoint_k, t.checkpoint_m, True
    families = tuple(dict.fromkeys(t.family for t in tasks))
    fam_idx = np.array([families.index(t.family) for t in tasks])
    return Packed(
        tasks=tuple(tasks),
        k=k,
        m=m,
        m0=np.array([t.m0 for t in tasks], np.int64),
        mask=mask,
        weights=np.array([t.weight for t in tasks], np.float64),
        family_index=fam_idx,
        families=families,
    )


def group_matrix(pk: Packed) -> tuple[list[str], np.ndarray]:
    """Groups (each family, then ``all``) and the (T, G) membership matrix."""
    names = [*pk.families, "all"]
    member = np.zeros((pk.n_tasks, len(names)))
    member[np.arange(pk.n_tasks), pk.family_index] = 1.0
    member[:, -1] = 1.0
    return names, member


def aggregate_gamma(p_exp: np.ndarray, p_obs: np.ndarray, wmat: np.ndarray, zero_rule: ZeroRule) -> np.ndarray:
    """Γ per group from per-task P's: ln(Σ w P_exp / Σ w P_obs) with the same weights.

    ``p_exp``/``p_obs`` are (..., T); ``wmat`` is (T, G) with weights × membership.
    Under ``exclude`` a task with an undefined log drops out of the sums.
    """
    if zero_rule == "exclude":
        keep = (p_exp > 0) & (p_obs > 0)
        p_exp, p_obs = np.where(keep, p_exp, 0.0), np.where(keep, p_obs, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(p_exp @ wmat) - np.log(p_obs @ wmat)


def raw_probabilities(pk: Packed) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased per-task P̂_exp = Π k_i/m_i and P̂_obs = passed_n/m_0 (raw proportions)."""
    pe = np.prod(np.where(pk.mask, pk.k / np.maximum(pk.m, 1), 1.0), axis=1)
    po = np.array([t.passed[-1] / t.m0 for t in pk.tasks], np.float64)
    return pe, po


def sums_raw_probabilities(zero_rule: ZeroRule) -> bool:
    """Whether family/all rows sum the raw per-task P's rather than the rule's (docs/statistics.md §6).

    Raw P's are unbiased, so their sums are; only the smoothing rules' P's differ from raw
    (``bound``/``exclude`` estimate with raw proportions already).
    """
    return zero_rule in ("jeffreys", "haldane")
