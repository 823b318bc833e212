"""The three baseline models of the paper §3.2 and DESIGN §7.

* **product**: P_exp = Π q̂_i along one compatible checkpoint path.
* **oracle-scaffolded**: the same product, but each q̂_i measured from a
  separately built clean canonical state. Those states may never co-occur in
  one real rollout, so the result is flagged ``needs_compatibility``.
* **checkpoint simulator**: Monte Carlo over a stage graph (retries within a
  budget, recovery after failure, OR of alternative branches), with per-stage
  probabilities estimated from checkpoint trials. On a fixed path without
  retries it is exactly the product (:func:`exact_success_probability` proves it
  for a given graph; the Monte Carlo agrees in expectation).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hrbench.stats.data import ZeroRule
from hrbench.stats.intervals import smoothed_array

BaselineKind = Literal["product", "oracle_scaffolded", "checkpoint_simulator"]


class Baseline(BaseModel):
    """A P_expected with the model that produced it."""

    model_config = ConfigDict(frozen=True)

    kind: BaselineKind
    p_expected: float
    needs_compatibility: bool
    mc_se: float | None = None  # Monte Carlo standard error (simulator only)
    n_sims: int | None = None


def p_expected(q: Sequence[float], model: BaselineKind = "product", graph: "StageGraph | None" = None,
               n_sims: int = 200_000, seed: int = 0) -> Baseline:
    """P_expected from stage estimates q̂_i under a baseline model: the one place it is computed.

    ``product`` and ``oracle_scaffolded`` multiply q̂_i along the path (the second flagged: its
    states were built separately); ``checkpoint_simulator`` runs the Monte Carlo simulator over
    ``graph`` (default: the fixed path of the stages) with q̂_i as first-attempt probabilities.
    """
    q = np.asarray(q, dtype=np.float64)
    if model == "checkpoint_simulator":
        graph = graph or StageGraph.path(q)
        names = [s.name for s in graph.stages]
        return simulator_baseline(graph.with_probabilities(dict(zip(names, q))), n_sims, seed)
    return Baseline(kind=model, p_expected=float(np.prod(q)), needs_compatibility=model == "oracle_scaffolded")


def product_baseline(k: Sequence[int], m: Sequence[int], zero_rule: ZeroRule = "jeffreys") -> Baseline:
    """Π q̂_i over a compatible checkpoint path (same zero rule as the residual)."""
    return p_expected(smoothed_array(k, m, zero_rule), "product")


def oracle_scaffolded_baseline(k: Sequence[int], m: Sequence[int], zero_rule: ZeroRule = "jeffreys") -> Baseline:
    """Π q̂_i from separately built canonical states; flagged as needing a compatibility argument."""
    return p_expected(smoothed_array(k, m, zero_rule), "oracle_scaffolded")


class StageNode(BaseModel):
    """One stage of a task graph.

    A node is *eligible* when its prerequisites passed (``join="all"``) or when
    any of them passed (``join="any"``: an OR of alternative branches). A node
    with ``recovers=X`` is a recovery step: eligible only if X was attempted and
    failed (and its own prerequisites hold); if it passes, X counts as passed.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    q: float = Field(ge=0, le=1, description="first-attempt success probability")
    retry_q: float | None = Field(default=None, ge=0, le=1, description="success probability of a retry (default q)")
    max_retries: int = Field(default=0, ge=0, description="retries allowed at this stage")
    requires: list[str] = Field(default_factory=list)
    join: Literal["all", "any"] = "all"
    recovers: str | None = None


class StageGraph(BaseModel):
    """A task's stage DAG; ``stages`` must list prerequisites before the stages that need them."""

    model_config = ConfigDict(frozen=True)

    stages: list[StageNode]
    goal: str
    retry_budget: int | None = Field(default=None, ge=0, description="retries shared by the whole task; None = per-stage caps only")

    @model_validator(mode="after")
    def _check(self) -> "StageGraph":
        seen: dict[str, int] = {}
        for i, s in enumerate(self.stages):
            if s.name in seen:
                raise ValueError(f"stage {s.name!r} is declared twice")
            for dep in [*s.requires, *([s.recovers] if s.recovers else [])]:
                if dep not in seen:
                    raise ValueError(f"stage {s.name!r} refers to {dep!r}, which must be declared before it")
            seen[s.name] = i
        for i, s in enumerate(self.stages):
            if s.recovers:
                # A dependent of X placed before X's recovery would never see the repair.
                early = [t.name for t in self.stages[seen[s.recovers] + 1 : i] if s.recovers in t.requires]
                if early:
                    raise ValueError(f"recovery {s.name!r} of {s.recovers!r} must come before its dependents {early}")
        if self.goal not in seen:
            raise ValueError(f"goal {self.goal!r} is not a declared stage")
        return self

    @classmethod
    def path(cls, q: Sequence[float], names: Sequence[str] | None = None) -> "StageGraph":
        """A fixed path without retries: stage i requires stage i−1; goal is the last stage."""
        names = list(names or [f"s{i + 1}" for i in range(len(q))])
        stages = [StageNode(name=n, q=float(p), requires=[names[i - 1]] if i else []) for i, (n, p) in enumerate(zip(names, q))]
        return cls(stages=stages, goal=names[-1])

    def with_probabilities(self, q: Mapping[str, float]) -> "StageGraph":
        """Copy with estimated first-attempt probabilities (e.g. q̂ from checkpoint trials) per stage name."""
        return self.model_copy(update={"stages": [s.model_copy(update={"q": q.get(s.name, s.q)}) for s in self.stages]})


def _budget(graph: StageGraph) -> int:
    """Effective shared budget: an absent shared budget never binds."""
    return graph.retry_budget if graph.retry_budget is not None else sum(s.max_retries for s in graph.stages)


def simulate_graph(graph: StageGraph, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` independent Monte Carlo runs of the graph; returns goal success per run (bool)."""
    index = {s.name: i for i, s in enumerate(graph.stages)}
    passed = np.zeros((len(graph.stages), n), bool)
    failed = np.zeros_like(passed)
    budget = np.full(n, _budget(graph))
    for i, s in enumerate(graph.stages):
        deps = passed[[index[d] for d in s.requires]]
        ok = deps.all(axis=0) if s.join == "all" else (deps.any(axis=0) if s.requires else np.ones(n, bool))
        if s.recovers:
            ok &= failed[index[s.recovers]]
        win = ok & (rng.random(n) < s.q)
        retry_q = s.q if s.retry_q is None else s.retry_q
        for _ in range(s.max_retries):
            again = ok & ~win & (budget > 0)
            budget -= again
            win |= again & (rng.random(n) < retry_q)
        passed[i], failed[i] = win, ok & ~win
        if s.recovers:
            target = index[s.recovers]
            passed[target] |= win
            failed[target] &= ~win
    return passed[index[graph.goal]]


def exact_success_probability(graph: StageGraph) -> float:
    """Exact P(goal passes) by enumerating attempt outcomes (small graphs; same semantics as the simulator)."""
    stages = graph.stages
    index = {s.name: i for i, s in enumerate(stages)}
    goal = index[graph.goal]

    @lru_cache(maxsize=None)
    def walk(i: int, passed: frozenset[int], failed: frozenset[int], budget: int) -> float:
        if i == len(stages):
            return 1.0 if goal in passed else 0.0
        s = stages[i]
        deps = [index[d] in passed for d in s.requires]
        ok = all(deps) if s.join == "all" else (any(deps) if deps else True)
        if s.recovers:
            ok = ok and index[s.recovers] in failed
        if not ok:
            return walk(i + 1, passed, failed, budget)
        rq = s.q if s.retry_q is None else s.retry_q
        target = index[s.recovers] if s.recovers else None
        on_pass = (passed | {i} | ({target} if target is not None else set()), failed - ({target} if target is not None else set()))
        total, p_reach = 0.0, 1.0  # p_reach: probability that every attempt so far failed
        cap = min(s.max_retries, budget)
        for used in range(cap + 1):
            p = s.q if used == 0 else rq
            total += p_reach * p * walk(i + 1, frozenset(on_pass[0]), frozenset(on_pass[1]), budget - used)
            p_reach *= 1 - p
        total += p_reach * walk(i + 1, passed, failed | {i}, budget - cap)
        return total

    return walk(0, frozenset(), frozenset(), _budget(graph))


def simulator_baseline(graph: StageGraph, n_sims: int = 200_000, seed: int = 0) -> Baseline:
    """P_expected from the checkpoint simulator, with its Monte Carlo standard error."""
    wins = simulate_graph(graph, n_sims, np.random.default_rng(seed))
    p = float(wins.mean())
    return Baseline(
        kind="checkpoint_simulator",
        p_expected=p,
        needs_compatibility=False,
        mc_se=float(np.sqrt(p * (1 - p) / n_sims)),
        n_sims=n_sims,
    )
