"""Study planning: trials needed for a target interval on Γ, checked by simulation.

Delta method (paper eq. 4), with m_i = m checkpoint trials per stage and
m_0 = ratio · m natural rollouts:

    Var(Γ̂) ≈ (1/m) Σ_i (1−q_i)/q_i + (1/m_0) (1−P_obs)/P_obs

so a half-width h at level 1−α needs m ≥ z² (Σ(1−q)/q + (1−P)/(P·ratio)) / h².
The delta method ignores smoothing and skew, so :func:`simulate_half_width`
checks the plan on simulated agents with exactly these q and P_obs.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import special, stats

from hrbench.stats.data import ZeroRule
from hrbench.stats.estimate import log_proportions
from hrbench.stats.synthetic import simulate_counts


class Plan(BaseModel):
    """Trials per checkpoint stage and natural rollouts for a target half-width on Γ."""

    model_config = ConfigDict(frozen=True)

    q: list[float]
    p_obs: float
    level: float
    target_half_width: float
    m_stage: int
    m0: int
    se_delta: float  # at the planned trial counts
    half_width_delta: float  # achieved z · se_delta (≤ target)


class SimulatedWidth(BaseModel):
    """Sampling distribution of Γ̂ from simulated studies with known truth."""

    model_config = ConfigDict(frozen=True)

    m_stage: int
    m0: int
    n_sims: int
    gamma_true: float
    half_width: float  # half the central (level) range of Γ̂ across simulations
    sd: float
    bias: float
    half_width_delta: float
    ratio_to_delta: float  # half_width / half_width_delta


def _z(level: float) -> float:
    return float(stats.norm.ppf(0.5 + level / 2))


def _check(q: Sequence[float], p_obs: float) -> np.ndarray:
    qa = np.asarray(q, dtype=np.float64)
    if qa.size == 0 or np.any((qa <= 0) | (qa > 1)) or not 0 < p_obs <= 1:
        raise ValueError("planning needs every anticipated q_i in (0, 1] and P_obs in (0, 1]")
    return qa


def delta_se_planned(q: Sequence[float], p_obs: float, m_stage: int | Sequence[int], m0: int) -> float:
    """Delta-method SE of Γ̂ for anticipated q_i and P_obs at the given trial counts."""
    qa = _check(q, p_obs)
    m = np.broadcast_to(np.asarray(m_stage, dtype=np.float64), qa.shape)
    return math.sqrt(float(np.sum((1 - qa) / (m * qa))) + (1 - p_obs) / (m0 * p_obs))


def plan_trials(
    q: Sequence[float], p_obs: float, half_width: float, level: float = 0.95, ratio: float = 1.0
) -> Plan:
    """Smallest m (per stage) and m_0 = ⌈ratio·m⌉ whose delta half-width is ≤ ``half_width``."""
    qa = _check(q, p_obs)
    if half_width <= 0 or ratio <= 0:
        raise ValueError("half_width and ratio (m0 / m_i) must be positive")
    z = _z(level)
    need = z * z * (float(np.sum((1 - qa) / qa)) + (1 - p_obs) / (p_obs * ratio)) / half_width**2
    m = max(1, math.ceil(need - 1e-9))
    m0 = max(1, math.ceil(ratio * m - 1e-9))
    se = delta_se_planned(qa, p_obs, m, m0)
    return Plan(
        q=[float(v) for v in qa], p_obs=p_obs, level=level, target_half_width=half_width,
        m_stage=m, m0=m0, se_delta=se, half_width_delta=z * se,
    )


def natural_conditionals(q: np.ndarray, p_obs: float) -> np.ndarray:
    """Per-stage natural r_i with Π r_i = P_obs: the checkpoint shape scaled down uniformly
    (degradation spread over stages), or homogeneous if scaling would push an r_i above 1."""
    r = q * (p_obs / float(np.prod(q))) ** (1 / q.size)
    return r if np.all(r <= 1) else np.full(q.size, p_obs ** (1 / q.size))


def simulate_half_width(
    q: Sequence[float],
    p_obs: float,
    m_stage: int,
    m0: int,
    level: float = 0.95,
    n_sims: int = 4000,
    seed: int = 0,
    zero_rule: ZeroRule = "jeffreys",
) -> SimulatedWidth:
    """Simulate ``n_sims`` studies of one task and measure the spread of Γ̂ directly."""
    qa = _check(q, p_obs)
    r = natural_conditionals(qa, p_obs)
    k, passed = simulate_counts(qa, r, np.full(qa.size, m_stage), m0, np.random.default_rng(seed), n_sims)
    reached = np.concatenate([np.full((n_sims, 1), m0), passed[:, :-1]], axis=1)
    log_q, log_r = log_proportions(k, np.full_like(k, m_stage), passed, reached, zero_rule)
    gam = log_q.sum(1) - np.nan_to_num(log_r, nan=0.0).sum(1)
    gam = gam[np.isfinite(gam)]  # raw rules: undefined studies are what the zero rule reports
    truth = float(np.log(np.prod(qa)) - np.log(p_obs))
    lo, hi = np.quantile(gam, [(1 - level) / 2, (1 + level) / 2])
    hw_delta = _z(level) * delta_se_planned(qa, p_obs, m_stage, m0)
    hw = float(hi - lo) / 2
    return SimulatedWidth(
        m_stage=m_stage, m0=m0, n_sims=n_sims, gamma_true=truth, half_width=hw,
        sd=float(gam.std(ddof=1)), bias=float(gam.mean() - truth),
        half_width_delta=hw_delta, ratio_to_delta=hw / hw_delta,
    )


def min_detectable_gamma(
    q: Sequence[float],
    p_obs: float,
    m_i: int | Sequence[int],
    m0: int,
    power: float = 0.8,
    level: float = 0.95,
) -> float:
    """Smallest |Γ| a two-sided level test detects with probability ``power``: (z_{1−α/2} + z_power)·SE."""
    if not 0 < power < 1:
        raise ValueError("power must be in (0, 1)")
    return (_z(level) + float(stats.norm.ppf(power))) * delta_se_planned(q, p_obs, m_i, m0)


# -- the headline and the contrasts: tasks sampled (docs/statistics.md §10) -------------------------------

#: The calibration grid's range (docs/statistics.md §11): trial counts from 10 per stage and per task, and
#: families of at least 5 tasks for a tasks-sampled interval that is neither flagged nor conservative.
CALIBRATED_MIN_TRIALS = 10
CALIBRATED_MIN_FAMILY = 5


def calibrated_range_warnings(m_stage: int, m0: int, family_sizes: dict[str, int]) -> list[str]:
    """Why a design is below the range the calibration covers (empty when it is inside it)."""
    out = []
    if min(m_stage, m0) < CALIBRATED_MIN_TRIALS:
        out.append(f"m_i = {m_stage}, m_0 = {m0}: below the calibrated {CALIBRATED_MIN_TRIALS} trials per stage and "
                   "per task (intervals of task rows and contrasts are not calibrated there: boundary counts "
                   "dominate and many contrasts have no estimate)")
    small = sorted(f for f, n in family_sizes.items() if n < CALIBRATED_MIN_FAMILY)
    if small:
        out.append(f"families with fewer than {CALIBRATED_MIN_FAMILY} tasks ({', '.join(small)}): their population "
                   "(tasks: sampled) intervals are flagged few-tasks / too-few-tasks, wide and conservative")
    return out


def linearized_truth(p_exp: np.ndarray, p_obs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """x_t = (w_t/W)(P_exp,t/Ē − P_obs,t/Ō) of true per-task probabilities (Γ̂ − Γ ≈ Σ x̂_t − Σ x_t)."""
    W = weights.sum()
    E, O = float(np.dot(weights, p_exp) / W), float(np.dot(weights, p_obs) / W)
    return (weights / W) * (p_exp / E - p_obs / O)


def trial_variance_terms(q: Sequence[np.ndarray], p_exp: np.ndarray, p_obs: np.ndarray, weights: np.ndarray,
                         m_stage: int, m0: int, checkpoint: bool = True) -> np.ndarray:
    """τ_t: the trial-level variance of x̂_t at m_i, m_0 (``checkpoint=False``: the observed side only,
    for a contrast whose sides share their checkpoint trials)."""
    W = weights.sum()
    E, O = float(np.dot(weights, p_exp) / W), float(np.dot(weights, p_obs) / W)
    var_e = np.array([float(np.sum((np.prod(qt) / qt) ** 2 * qt * (1 - qt) / m_stage)) for qt in q])
    var_o = p_obs * (1 - p_obs) / m0
    return (weights / W) ** 2 * ((var_e / E**2 if checkpoint else 0.0) + var_o / O**2)


class HeadlineWidth(BaseModel):
    """Predicted tasks-sampled half-width of a group's interval (cluster-t), split into its parts."""

    model_config = ConfigDict(frozen=True)

    half_width: float  # t_ν · √V at the expected variances
    expected_half_width: float  # E[t_ν̂ · √v̂] over the estimated variances' χ² spread (what a study prints)
    df: float
    between: float  # Σ_f n_f σ²_f: the tasks' spread (does not shrink with trials)
    trial: float  # Σ_t τ_t at the planned trials

    def trials_needed(self, target: float, level: float, m_stage: int) -> int | None:
        """m_i (m_0 in proportion) at the declared tasks for ``target``; None when the tasks' spread alone is wider."""
        t = float(stats.t.ppf(0.5 + level / 2, max(self.df, 1.0)))
        room = target**2 / (t * t) - self.between
        return None if room <= 0 else max(1, math.ceil(m_stage * self.trial / room - 1e-9))


def predicted_half_width(x: np.ndarray, tau: np.ndarray, family_index: np.ndarray, level: float) -> HeadlineWidth:
    """The cluster-t half-width expected at these true linearized terms and trial variances: within family f
    the stratum total varies by n_f σ²_f + Σ τ_t (tasks sampled, then trials), with Satterthwaite df as the
    interval computes them (hrbench.stats.cluster). Single-task families add their trial variance only.

    A study prints t_ν̂ · √v̂ with v̂_f and ν̂ estimated: each family's v̂_f spreads as V_f χ²_{n_f−1}/(n_f−1),
    and at a high level t_ν̂ is steep in ν̂ (t_{0.9975} is 3.15 at 20 df, 3.58 at 10), so the expected printed
    half-width is above t_ν √V; ``expected_half_width`` averages it over 4,000 such draws (seeded)."""
    between = trial = denom = fixed = 0.0
    parts, dfs = [], []
    for f in np.unique(family_index):
        s = family_index == f
        n = int(s.sum())
        v_trial = float(tau[s].sum())
        v_between = n * float(np.var(x[s], ddof=1)) if n > 1 else 0.0
        between, trial = between + v_between, trial + v_trial
        if n > 1:
            denom += (v_between + v_trial) ** 2 / (n - 1)
            parts.append(v_between + v_trial)
            dfs.append(n - 1)
        else:
            fixed += v_trial
    total = between + trial
    df = total**2 / denom if denom > 0 else math.nan
    t = float(stats.t.ppf(0.5 + level / 2, df)) if df == df else math.nan
    expected = math.nan
    if parts:
        k = np.asarray(dfs, np.float64)
        draws = np.random.default_rng(0).chisquare(k, size=(4000, k.size)) / k * np.asarray(parts)
        v = draws.sum(axis=1) + fixed
        nu = v**2 / np.sum(draws**2 / k, axis=1)
        expected = float(np.mean(stats.t.ppf(0.5 + level / 2, nu) * np.sqrt(v)))
    return HeadlineWidth(half_width=t * math.sqrt(total), expected_half_width=expected, df=df, between=between,
                         trial=trial)


def predicted_families_half_width(x: np.ndarray, tau: np.ndarray, family_index: np.ndarray,
                                  level: float) -> HeadlineWidth:
    """The families-resampled half-width (hrbench.stats.cluster.families_sampled_interval) expected at these
    true linearized terms and trial variances: the F family totals X_f = Σ_{t∈f} x_t are the sampled units, so
    the interval's variance v̂ = F/(F−1) Σ_f (X̂_f − X̂̄)² has expectation V = F·s²_X + Σ τ_t (s²_X: the totals'
    sample variance, ddof 1 — the families' spread, which does not shrink with trials or tasks; Σ τ: the trial
    part) on F − 1 df. A study prints t_{F−1}·√v̂ with v̂ ≈ V·χ²_{F−1}/(F−1), whose mean is t_{F−1}·√V·c₄ with
    c₄ = √(2/k)·Γ((k+1)/2)/Γ(k/2), k = F − 1 (``expected_half_width``; the floor at a share of the trial
    variance binds only in the far lower tail and is left out)."""
    fams = np.unique(family_index)
    F = int(fams.size)
    if F < 2:
        raise ValueError("a families-resampled interval needs at least 2 families")
    totals = np.array([float(x[family_index == f].sum()) for f in fams])
    between, trial = F * float(np.var(totals, ddof=1)), float(tau.sum())
    df = float(F - 1)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(between + trial)
    c4 = math.sqrt(2 / df) * math.exp(float(special.gammaln((df + 1) / 2) - special.gammaln(df / 2)))
    return HeadlineWidth(half_width=half, expected_half_width=half * c4, df=df, between=between, trial=trial)


def sized_families(families: Sequence[str], n_families: int) -> tuple[list[int], list[str]]:
    """Indices of the declared tasks (their ``families``) for a design of ``n_families`` families: the declared
    families in turn (first-seen order), each with all its declared tasks, a repeat labelled ``family#j`` as
    another family of the same kind. Families resampled: the declared families stand for their population,
    so more families are more draws like them (the declared mix once ``n_families`` is a multiple of theirs)."""
    order = list(dict.fromkeys(families))
    members = {f: [i for i, g in enumerate(families) if g == f] for f in order}
    idx, labels = [], []
    for j in range(n_families):
        f = order[j % len(order)]
        idx += members[f]
        labels += [f if j < len(order) else f"{f}#{j // len(order)}"] * len(members[f])
    return idx, labels
