"""Per-task point estimates: stage proportions, P_expected, P_observed, Γ_H.

DESIGN §7 and the position paper §3.2–3.3. For one task on a fixed path,

    q̂_i = s(k_i, m_i)                   checkpoint conditional at stage i
    r̂_i = s(passed_i, reached_i)        natural-rollout conditional at stage i
    P̂_exp = Π q̂_i,  P̂_obs = Π r̂_i,  Γ̂ = ln(P̂_exp / P̂_obs) = Σ_i ln(q̂_i / r̂_i)

where ``s`` is the pre-declared zero rule. Expected and observed go through the
same rule so that, for an agent without degradation, smoothing bias cancels;
under raw proportions Π r̂_i telescopes to k_0 / m_0.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

from hrbench.stats.baselines import p_expected
from hrbench.stats.data import TaskOutcomes, ZeroRule
from hrbench.stats.intervals import (
    lower_bound_exact,
    smoothed_array,
    upper_bound_exact,
    wilson_interval,
)

BoundSide = Literal["lower", "upper"]


class TaskEstimate(BaseModel):
    """Point estimates for one task. ``None`` marks a quantity that is undefined under the rule."""

    model_config = ConfigDict(frozen=True)

    name: str
    family: str
    weight: float
    n_stages: int
    zero_rule: ZeroRule
    q: list[float]
    q_ci_low: list[float]
    q_ci_high: list[float]
    checkpoint_k: list[int]
    checkpoint_m: list[int]
    m0: int
    reached: list[int]
    passed: list[int]
    r: list[float | None]
    p_expected: float
    p_observed: float
    gamma: float | None
    stage_terms: list[float | None]
    se_delta: float | None
    zero_rule_applied: bool
    bound: BoundSide | None
    bound_value: float | None
    excluded: bool


def delta_se(q: np.ndarray, m: np.ndarray, p_obs: float, m0: int) -> float | None:
    """Delta-method SE of Γ̂ ignoring covariance (paper eq. 4); ``None`` if a probability is 0."""
    q = np.asarray(q, dtype=np.float64)
    if np.any(q <= 0) or p_obs <= 0:
        return None
    var = float(np.sum((1 - q) / (np.asarray(m) * q)) + (1 - p_obs) / (m0 * p_obs))
    return math.sqrt(var)


def log_proportions(
    k: np.ndarray, m: np.ndarray, passed: np.ndarray, reached: np.ndarray, zero_rule: ZeroRule
) -> tuple[np.ndarray, np.ndarray]:
    """``(ln q̂_i, ln r̂_i)`` under the rule; an unreached stage under a raw rule gives NaN."""
    with np.errstate(divide="ignore"):
        return np.log(smoothed_array(k, m, zero_rule)), np.log(smoothed_array(passed, reached, zero_rule))


def gamma_bound(
    side: BoundSide,
    q: np.ndarray,
    m: np.ndarray,
    k0: int,
    m0: int,
    level: float,
    n_simultaneous: int = 1,
) -> float:
    """One-sided bound on Γ when a raw log is undefined (zero rule ``bound``).

    ``lower`` (P̂_obs = 0, every q̂_i > 0): Γ ≥ ln(L_exp / U_obs), where U_obs is the
    exact upper limit for k_0 = 0 and L_exp = P̂_exp·exp(−z·se(ln P̂_exp)).
    ``upper`` (some q̂_j = 0, P̂_obs > 0): Γ ≤ ln(U_exp / L_obs), where U_exp is the
    smallest exact upper limit among zero stages (P_exp ≤ q_j) and L_obs the exact
    lower limit for P_obs. Each of the two limits gets α/2 (Bonferroni) so the bound
    holds at ``level``; ``n_simultaneous`` further splits α when one bound combines
    several tasks.
    """
    alpha = (1 - level) / (2 * n_simultaneous)
    q = np.asarray(q, dtype=np.float64)
    m = np.asarray(m)
    if side == "lower":
        z = float(stats.norm.ppf(1 - alpha))
        se_exp = math.sqrt(float(np.sum((1 - q) / (m * q))))
        low_exp = float(np.prod(q)) * math.exp(-z * se_exp)
        return math.log(low_exp / upper_bound_exact(0, m0, alpha))
    zero = q == 0
    up_exp = min(upper_bound_exact(0, int(mj), alpha) for mj in m[zero])
    return math.log(up_exp / lower_bound_exact(k0, m0, alpha))


def estimate_task(t: TaskOutcomes, zero_rule: ZeroRule = "jeffreys", level: float = 0.95) -> TaskEstimate:
    """Point estimates, Wilson stage intervals, delta SE and zero-rule handling for one task.

    Memoised on the (immutable) task per rule and level: a residual table, each contrast it is a side of
    and each claim's interval ask for the same task's estimate again (the claims' Monte Carlo spent half
    its time here)."""
    memo = t.__dict__.setdefault("_estimates", {})
    if (zero_rule, level) not in memo:
        memo[(zero_rule, level)] = _estimate_task(t, zero_rule, level)
    return memo[(zero_rule, level)]


def _estimate_task(t: TaskOutcomes, zero_rule: ZeroRule, level: float) -> TaskEstimate:
    k, m = t.checkpoint_k, t.checkpoint_m
    passed, reached = t.passed, t.reached
    log_q, log_r = log_proportions(k, m, passed, reached, zero_rule)
    q = np.exp(log_q)
    # An unreached stage (raw rules only) follows a stage with zero passes, so P̂_obs = 0
    # already; treat its log as 0 so the product telescopes to k0/m0.
    p_exp = p_expected(q, "product").p_expected
    p_obs = float(np.exp(np.nan_to_num(log_r, nan=0.0).sum()))
    # The raw log is undefined exactly where a raw proportion is 0; that is what the
    # zero rule is declared for, so that is what we flag (jeffreys shifts *every*
    # proportion, so "changed a value" alone would always be true).
    raw_zero = bool(np.any(k == 0) or passed[-1] == 0)
    undefined = p_exp == 0 or p_obs == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = log_q - log_r
    stage_terms = [float(v) if np.isfinite(v) else None for v in terms]

    gamma: float | None = None if undefined else float(np.log(p_exp) - np.log(p_obs))
    bound: BoundSide | None = None
    bound_value: float | None = None
    if zero_rule == "bound" and undefined:
        if p_obs == 0 and p_exp > 0:
            bound = "lower"
        elif p_exp == 0 and p_obs > 0:
            bound = "upper"
        # Both zero: neither side is informative; report no value at all.
        if bound is not None:
            bound_value = gamma_bound(bound, q, m, int(passed[-1]), t.m0, level)
    cis = [wilson_interval(int(ki), int(mi), level) for ki, mi in zip(k, m)]
    return TaskEstimate(
        name=t.name,
        family=t.family,
        weight=t.weight,
        n_stages=t.n_stages,
        zero_rule=zero_rule,
        q=[float(v) for v in q],
        q_ci_low=[c[0] for c in cis],
        q_ci_high=[c[1] for c in cis],
        checkpoint_k=[int(v) for v in k],
        checkpoint_m=[int(v) for v in m],
        m0=t.m0,
        reached=[int(v) for v in reached],
        passed=[int(v) for v in passed],
        r=[float(v) if np.isfinite(v) else None for v in np.exp(log_r)],
        p_expected=p_exp,
        p_observed=p_obs,
        gamma=gamma,
        stage_terms=stage_terms,
        se_delta=delta_se(q, m, p_obs, t.m0),
        zero_rule_applied=raw_zero,
        bound=bound,
        bound_value=bound_value,
        excluded=zero_rule == "exclude" and undefined,
    )


#: How a smoothing rule reads a count k of m (the note of a moved estimate says it).
RULE_READING = {"jeffreys": "every k/m as (k+½)/(m+1)", "haldane": "k/m as (k+½)/(m+1) where k = 0 or k = m"}


def _at_boundary(t: TaskOutcomes) -> list[str]:
    """The counts of a task at 0 or at their trials ("checkpoint 4/4 at stages 1, 3", "natural 5/5 at stage 2"):
    checkpoint k_i of m_i, then the natural conditionals passed_i of reached_i, stages grouped by count."""
    out = []
    for kind, k, n in (("checkpoint", t.checkpoint_k, t.checkpoint_m), ("natural", t.passed, t.reached)):
        stages: dict[str, list[str]] = {}
        for i, (ki, ni) in enumerate(zip(k.tolist(), n.tolist())):
            if ki == 0 or ki == ni:
                stages.setdefault(f"{ki}/{ni}", []).append(str(i + 1))
        if stages:
            out.append(f"{kind} " + ", ".join(f"{count} at stage{'s' if len(at) > 1 else ''} {', '.join(at)}"
                                              for count, at in stages.items()))
    return out


def rule_note(tasks: list[TaskOutcomes], zero_rule: ZeroRule, p_exp: float | None, p_obs: float | None,
              gamma: float | None) -> str | None:
    """One line saying how the zero rule moved a row's estimate off the raw ratio at a boundary count (some
    k = 0 or k = m), with the raw values beside the reported ones; None when nothing shown moves (to the
    printed precision) or no count of the row's tasks is at a boundary.

    A task row reports the rule's P's (an oracle passing 4/4 everywhere shows P_exp = 0.9⁴ = 0.656 under
    `jeffreys`, not 1); family and overall rows sum raw P's, so they move only when they hold one task.
    """
    if zero_rule not in RULE_READING or not tasks or p_exp is None or p_obs is None:
        return None
    w = np.array([t.weight for t in tasks], np.float64)
    raw_e = float(np.dot(w, [np.prod(t.checkpoint_k / t.checkpoint_m) for t in tasks]) / w.sum())
    raw_o = float(np.dot(w, [t.passed[-1] / t.m0 for t in tasks]) / w.sum())
    raw_g = math.log(raw_e / raw_o) if raw_e > 0 and raw_o > 0 else None
    moved = round(p_exp, 3) != round(raw_e, 3) or round(p_obs, 3) != round(raw_o, 3) or \
        (gamma is not None and (raw_g is None or round(gamma, 3) != round(raw_g, 3)))
    where = [f"{t.name} {'; '.join(b)}" if len(tasks) > 1 else "; ".join(b)
             for t in tasks if (b := _at_boundary(t))]
    if not moved or not where:
        return None
    gamma_text = "" if gamma is None else \
        f", Γ {gamma:.3f} (raw {'undefined' if raw_g is None else f'{raw_g:.3f}'})"
    return (f"{zero_rule} reads {RULE_READING[zero_rule]} ({', '.join(where)}): P_exp {p_exp:.3f} (raw "
            f"{raw_e:.3f}), P_obs {p_obs:.3f} (raw {raw_o:.3f}){gamma_text}")
