"""Dense rewards, pass@1 at thresholds, the failure taxonomy and the cost–pass frontier (LHTB review §2, §5, §6).

Subtask scores r_k ∈ [0, 1] come in three kinds (review §2.3):

* binary:            r_k = 1[condition]                               (eq. 3)
* continuous:        r_k = max(0, 1 − |ŷ_k − y_k| / ε_k)              (eq. 4)
* episode-aggregate: r_k = (1/N) Σ_i 1[success_i]                     (eq. 5)

A run's reward is R = Σ_k w_k r_k / Σ_k w_k (eq. 1; equal weights give the plain mean, eq. 2).
Over a set of runs T:

* pass@1(τ) = (1/|T|) Σ_t 1[R_t ≥ τ] for τ ∈ {0.9, 0.95, 1.0} (eq. 6), with a binomial interval
  (Wilson or Jeffreys, :mod:`hrbench.stats.intervals`): the estimand is the probability that one
  run of this agent on a task drawn like these reaches R ≥ τ;
* mean reward R̄ = (1/|T|) Σ_t R_t (eq. 7), with a Student-t interval on the mean of the runs,
  clipped to [0, 1] (the original reports no interval at all: the review's complaint W6).

A run with R < τ_fail (0.95) is a failure of one of three types (§5.1): *timeout* (a budget or a
fixed bound of the harness ran out while the agent was working: hrbench's ``timeout``, ``turn_cap``
and ``limit_exceeded`` exits), *early exit* (the agent stopped on its own: ``failed``,
``early_exit``, or a ``passed`` exit whose dense reward is below τ_fail) and *harness error* (every
exit without a result, :mod:`hrbench.exits`: not the agent's failure, never a pass; the report
leaves such runs out of R̄ and pass@1). A false finish (§5.2) is an early exit with R ≥ 0.75.
Everything here is a pure function of arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

from hrbench.exits import ALL_EXIT_REASONS, NO_RESULT_REASONS
from hrbench.stats.intervals import jeffreys_interval, wilson_interval

PASS_THRESHOLDS: tuple[float, ...] = (0.9, 0.95, 1.0)
FAILURE_THRESHOLD = 0.95
FALSE_FINISH_REWARD = 0.75
# Rewards are sums of floats: R = 0.95 computed as 0.9499999999 must still reach τ = 0.95.
_TOL = 1e-9

FailureType = Literal["passed", "timeout", "early_exit", "harness_error"]
FAILURE_TYPES: tuple[FailureType, ...] = ("timeout", "early_exit", "harness_error")
# Every exit reason's type when R < τ (hrbench.exits is the one list: a reason missing here fails at import).
_EXIT_TO_FAILURE: dict[str, FailureType] = {
    "timeout": "timeout", "turn_cap": "timeout", "limit_exceeded": "timeout",
    "failed": "early_exit", "early_exit": "early_exit", "passed": "early_exit",
    **{reason: "harness_error" for reason in NO_RESULT_REASONS},
}
if set(_EXIT_TO_FAILURE) != set(ALL_EXIT_REASONS):
    raise AssertionError(f"failure types do not cover the exit reasons {sorted(set(ALL_EXIT_REASONS) ^ set(_EXIT_TO_FAILURE))}")


def _unit_interval(values: np.ndarray, what: str) -> np.ndarray:
    bad = ~np.isfinite(values) | (values < 0) | (values > 1)
    if np.any(bad):
        raise ValueError(f"{what} must be finite and in [0, 1]; got {values[bad][:5].tolist()}")
    return values


def binary_reward(condition: Sequence[bool] | np.ndarray) -> np.ndarray:
    """r_k = 1[condition] (eq. 3)."""
    return np.asarray(condition, dtype=bool).astype(np.float64)


def continuous_reward(y_hat: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                      epsilon: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """r_k = max(0, 1 − |ŷ − y| / ε) (eq. 4); a missing (NaN) ŷ scores 0."""
    y_hat, y = np.asarray(y_hat, dtype=np.float64), np.asarray(y, dtype=np.float64)
    eps = np.asarray(epsilon, dtype=np.float64)
    if np.any(~(eps > 0)):
        raise ValueError(f"the tolerance epsilon must be > 0 for every continuous subtask, got {epsilon}")
    with np.errstate(invalid="ignore"):
        r = np.maximum(0.0, 1.0 - np.abs(y_hat - y) / eps)
    return np.where(np.isnan(r), 0.0, r)


def episode_reward(successes: Sequence[bool] | np.ndarray) -> np.ndarray | float:
    """r_k = (1/N) Σ_i 1[success_i] (eq. 5), over the last axis (one row of N episodes per subtask)."""
    s = np.asarray(successes, dtype=bool)
    if s.shape[-1] == 0:
        raise ValueError("an episode-aggregate subtask needs at least one episode")
    out = s.mean(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def task_reward(r: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None) -> np.ndarray | float:
    """R = Σ_k w_k r_k / Σ_k w_k (eq. 1) over the last axis; equal weights by default (eq. 2)."""
    r = _unit_interval(np.asarray(r, dtype=np.float64), "subtask rewards r_k")
    if r.shape[-1] == 0:
        raise ValueError("a task reward needs at least one subtask")
    w = np.ones(r.shape[-1]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (r.shape[-1],) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be {r.shape[-1]} non-negative numbers with a positive sum, got {weights}")
    out = (r * w).sum(axis=-1) / w.sum()
    return float(out) if np.ndim(out) == 0 else out


def stage_rewards(reached: Sequence[float], n_stages: int) -> np.ndarray:
    """Per-stage r_k of one natural rollout: the rewards of the stages it reached, 0 for the rest."""
    if len(reached) > n_stages:
        raise ValueError(f"{len(reached)} stage rewards for a task of {n_stages} stages")
    return np.concatenate([np.asarray(reached, dtype=np.float64), np.zeros(n_stages - len(reached))])


def reward_from_subrewards(rewards: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """R from Harbor's ``reward.json`` (subtask name → r_k); weights by name, 1 where not given."""
    if not rewards:
        raise ValueError("reward.json holds no subtask rewards")
    names = sorted(rewards)
    w = [1.0 if weights is None else float(weights.get(n, 1.0)) for n in names]
    return float(task_reward([float(rewards[n]) for n in names], w))


class PassAt1(BaseModel):
    """pass@1(τ) with its binomial interval: k of n runs reached R ≥ τ."""

    model_config = ConfigDict(frozen=True)
    tau: float
    k: int
    n: int
    rate: float
    ci_low: float
    ci_high: float
    method: str


def pass_at_1(R: Sequence[float] | np.ndarray, tau: float) -> tuple[int, int]:
    """(k, n): the runs with R ≥ τ, of all runs (eq. 6 is k / n)."""
    R = _unit_interval(np.asarray(R, dtype=np.float64), "task rewards R")
    return int(np.sum(R >= tau - _TOL)), int(R.size)


def pass_at_1_table(R: Sequence[float] | np.ndarray, taus: Sequence[float] = PASS_THRESHOLDS, level: float = 0.95,
                    method: Literal["wilson", "jeffreys"] = "wilson") -> list[PassAt1]:
    """pass@1(τ) for each τ with a Wilson or Jeffreys interval at `level`."""
    interval = {"wilson": wilson_interval, "jeffreys": jeffreys_interval}[method]
    rows = []
    for tau in taus:
        k, n = pass_at_1(R, tau)
        low, high = interval(k, n, level)
        rows.append(PassAt1(tau=tau, k=k, n=n, rate=k / n if n else math.nan, ci_low=low, ci_high=high,
                            method=method))
    return rows


class MeanReward(BaseModel):
    model_config = ConfigDict(frozen=True)
    n: int
    mean: float
    ci_low: float
    ci_high: float


def mean_reward(R: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanReward:
    """R̄ (eq. 7) with the Student-t interval x̄ ± t_{n−1} s/√n, clipped to [0, 1]; n < 2 gives (0, 1)."""
    R = _unit_interval(np.asarray(R, dtype=np.float64), "task rewards R")
    n = int(R.size)
    if n == 0:
        return MeanReward(n=0, mean=math.nan, ci_low=0.0, ci_high=1.0)
    mean = float(R.mean())
    if n < 2:
        return MeanReward(n=n, mean=mean, ci_low=0.0, ci_high=1.0)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(R.std(ddof=1)) / math.sqrt(n)
    return MeanReward(n=n, mean=mean, ci_low=max(0.0, mean - half), ci_high=min(1.0, mean + half))


def failure_type(exit_reason: str, R: float, tau: float = FAILURE_THRESHOLD) -> FailureType:
    """The review's §5.1 type of one run: 'passed' when R ≥ τ, else timeout / early exit / harness error."""
    if exit_reason not in _EXIT_TO_FAILURE:
        raise ValueError(f"unknown exit reason {exit_reason!r}; expected one of {sorted(_EXIT_TO_FAILURE)}")
    if exit_reason in NO_RESULT_REASONS:
        return "harness_error"  # no result is never a pass, whatever its partial reward
    if R >= tau - _TOL:
        return "passed"
    return _EXIT_TO_FAILURE[exit_reason]


def is_false_finish(kind: FailureType, R: float, threshold: float = FALSE_FINISH_REWARD) -> bool:
    """A false finish (§5.2): an early exit at R ≥ 0.75."""
    return kind == "early_exit" and R >= threshold - _TOL


class FailureSummary(BaseModel):
    """Counts of failed runs by type (shares of the failed runs) and false finishes."""

    model_config = ConfigDict(frozen=True)
    n_runs: int
    n_failed: int
    counts: dict[str, int]
    shares: dict[str, float]
    false_finishes: int
    mean_reward_by_type: dict[str, float]


def failure_summary(exit_reasons: Sequence[str], R: Sequence[float] | np.ndarray,
                    tau: float = FAILURE_THRESHOLD) -> FailureSummary:
    """Classify every run and count the failure types, their mean R, and the false finishes."""
    R = _unit_interval(np.asarray(R, dtype=np.float64), "task rewards R")
    if len(exit_reasons) != R.size:
        raise ValueError(f"{len(exit_reasons)} exit reasons for {R.size} rewards")
    kinds = [failure_type(e, float(r), tau) for e, r in zip(exit_reasons, R)]
    failed = [k for k in kinds if k != "passed"]
    counts = {t: failed.count(t) for t in FAILURE_TYPES}
    by_type = {t: float(np.mean([r for k, r in zip(kinds, R) if k == t])) if counts[t] else math.nan
               for t in FAILURE_TYPES}
    return FailureSummary(
        n_runs=int(R.size), n_failed=len(failed), counts=counts,
        shares={t: counts[t] / len(failed) if failed else math.nan for t in FAILURE_TYPES},
        false_finishes=sum(is_false_finish(k, float(r)) for k, r in zip(kinds, R)),
        mean_reward_by_type=by_type,
    )


class ResourceSummary(BaseModel):
    """Tokens, turns, wall time and cost per task (means over runs)."""

    model_config = ConfigDict(frozen=True)
    n: int
    tokens: float
    turns: float
    wall_s: float
    cost_usd: float


def resource_summary(tokens: Sequence[float], turns: Sequence[float], wall_s: Sequence[float],
                     cost_usd: Sequence[float]) -> ResourceSummary:
    """Mean tokens (in + out), turns, wall seconds and dollars per run."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (tokens, turns, wall_s, cost_usd)]
    if len({a.size for a in arrays}) != 1:
        raise ValueError(f"resource columns differ in length: {[a.size for a in arrays]}")
    n = arrays[0].size
    means = [float(a.mean()) if n else math.nan for a in arrays]
    return ResourceSummary(n=n, tokens=means[0], turns=means[1], wall_s=means[2], cost_usd=means[3])


def pareto_frontier(cost: Sequence[float] | np.ndarray, pass_rate: Sequence[float] | np.ndarray) -> list[int]:
    """Indices of the cost–pass Pareto frontier (no other point costs no more and passes no less, with one
    strict), in increasing cost. Equal points are all kept."""
    c, p = np.asarray(cost, dtype=np.float64), np.asarray(pass_rate, dtype=np.float64)
    if c.shape != p.shape:
        raise ValueError(f"cost and pass rate differ in shape: {c.shape} vs {p.shape}")
    keep = []
    for i in range(c.size):
        dominated = np.any((c <= c[i]) & (p >= p[i]) & ((c < c[i]) | (p > p[i])))
        if not dominated:
            keep.append(i)
    return sorted(keep, key=lambda i: (c[i], -p[i], i))


__all__ = [
    "FAILURE_THRESHOLD", "FAILURE_TYPES", "FALSE_FINISH_REWARD", "PASS_THRESHOLDS", "FailureSummary",
    "MeanReward", "PassAt1", "ResourceSummary", "binary_reward", "continuous_reward", "episode_reward",
    "failure_summary", "failure_type", "is_false_finish", "mean_reward", "pareto_frontier", "pass_at_1",
    "pass_at_1_table", "resource_summary", "reward_from_subrewards", "stage_rewards", "task_reward",
]
