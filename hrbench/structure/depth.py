"""Depth D by turn-capped evaluation: the run order of the depth paper, Appendix B.

A model m is measured on one task through a callable ``run(cap) -> RunResult``
(``cap=None`` is a run without a cap). The first model of the set:

1. runs twice without a cap; if neither run passes it gives no estimate;
2. otherwise N_m = the fewest turns among its passing runs, and every cap
   T >= N_m counts as passed without being run (a run already passed within
   N_m <= T turns);
3. the caps below N_m are tried in increasing order, up to two runs each, the
   second skipped once the first passes; the first cap with a passing run is
   D_m = min{T in caps : P_T = 1};
4. if no cap below N_m passes, D_m is the smallest cap >= N_m, or "above the
   largest cap" when N_m exceeds it.

Every later model runs only at the caps below the current estimate D (all caps
when the first model's task is above the largest cap), up to two runs per cap
and never without a cap; it can only lower D. It is not run when D = 1 or when
the first model gives no estimate. D = min over the models that give one (eq. 6).

Everything here is pure except :func:`harness_runner`, which turns the real
harness (a natural rollout under ``Budget.task_max_turns = cap``) into ``run``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hrbench.agents.base import Agent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_natural_trial
from hrbench.protocol import CONDITIONS, Budget
from hrbench.tasks.model import Task

CAPS: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 40, 80)
UNCAPPED_RUNS = 2
RUNS_PER_CAP = 2

DepthStatus = Literal["estimate", "above_largest_cap", "no_estimate", "not_run"]


class RunResult(BaseModel):
    """One run as the depth protocol sees it: did it pass, and in how many turns (all parts together)."""

    model_config = ConfigDict(frozen=True)
    passed: bool
    turns: int = Field(ge=0)


RunFn = Callable[[int | None], RunResult]


class DepthRun(BaseModel):
    """One run made by the protocol, in the order it was made (cap None = uncapped)."""

    model_config = ConfigDict(frozen=True)
    model: str
    cap: int | None
    passed: bool
    turns: int


class ModelDepth(BaseModel):
    """D_m of one model on one task, with the runs that produced it."""

    model_config = ConfigDict(frozen=True)
    model: str
    status: DepthStatus
    estimate: int | None  # D_m, a cap; None unless status == "estimate"
    fewest_passing_turns: int | None  # N_m (first model only)
    runs: tuple[DepthRun, ...]


class DepthEstimate(BaseModel):
    """D of one task over a model set: the minimum of the models' estimates."""

    model_config = ConfigDict(frozen=True)
    status: DepthStatus  # "estimate", "above_largest_cap" or "no_estimate"
    depth: int | None
    n_turns: int | None  # N of the first model (what the paper reports as N)
    models: tuple[ModelDepth, ...]

    @property
    def runs(self) -> tuple[DepthRun, ...]:
        return tuple(itertools.chain.from_iterable(m.runs for m in self.models))


def _check_caps(caps: Sequence[int]) -> tuple[int, ...]:
    caps = tuple(caps)
    if not caps or any(c < 1 for c in caps) or list(caps) != sorted(set(caps)):
        raise ValueError(f"caps must be distinct positive integers in increasing order, got {caps}")
    return caps


def _first_passing_cap(name: str, run: RunFn, caps: Sequence[int], runs: list[DepthRun],
                       runs_per_cap: int) -> int | None:
    """Try caps in increasing order, up to `runs_per_cap` runs each, stopping at the first pass."""
    for cap in caps:
        for _ in range(runs_per_cap):
            result = run(cap)
            runs.append(DepthRun(model=name, cap=cap, passed=result.passed, turns=result.turns))
            if result.passed:
                return cap
    return None


def measure_first_model(name: str, run: RunFn, caps: Sequence[int] = CAPS, uncapped_runs: int = UNCAPPED_RUNS,
                        runs_per_cap: int = RUNS_PER_CAP) -> ModelDepth:
    """D_m of the first model: uncapped runs, then the caps below N_m (Appendix B, 'Order of runs')."""
    caps = _check_caps(caps)
    runs: list[DepthRun] = []
    for _ in range(uncapped_runs):
        result = run(None)
        runs.append(DepthRun(model=name, cap=None, passed=result.passed, turns=result.turns))
    passing = [r.turns for r in runs if r.passed]
    if not passing:
        return ModelDepth(model=name, status="no_estimate", estimate=None, fewest_passing_turns=None,
                          runs=tuple(runs))
    n_m = min(passing)
    found = _first_passing_cap(name, run, [c for c in caps if c < n_m], runs, runs_per_cap)
    if found is None:
        found = next((c for c in caps if c >= n_m), None)
    status: DepthStatus = "estimate" if found is not None else "above_largest_cap"
    return ModelDepth(model=name, status=status, estimate=found, fewest_passing_turns=n_m, runs=tuple(runs))


def measure_later_model(name: str, run: RunFn, below: float, caps: Sequence[int] = CAPS,
                        runs_per_cap: int = RUNS_PER_CAP) -> ModelDepth:
    """D_m of a later model: only the caps below the current estimate `below`, no uncapped runs."""
    caps = _check_caps(caps)
    lower = [c for c in caps if c < below]
    if not lower:
        return ModelDepth(model=name, status="not_run", estimate=None, fewest_passing_turns=None, runs=())
    runs: list[DepthRun] = []
    found = _first_passing_cap(name, run, lower, runs, runs_per_cap)
    return ModelDepth(model=name, status="estimate" if found is not None else "no_estimate", estimate=found,
                      fewest_passing_turns=None, runs=tuple(runs))


def estimate_depth(models: Sequence[tuple[str, RunFn]], caps: Sequence[int] = CAPS,
                   uncapped_runs: int = UNCAPPED_RUNS, runs_per_cap: int = RUNS_PER_CAP) -> DepthEstimate:
    """D = min_m D_m over a model set, measured in the paper's order (first model in full, the rest below D)."""
    if not models:
        raise ValueError("estimate_depth needs at least one (name, run) model")
    caps = _check_caps(caps)
    (first_name, first_run), *later = models
    first = measure_first_model(first_name, first_run, caps, uncapped_runs, runs_per_cap)
    measured = [first]
    if first.status == "no_estimate":
        measured += [ModelDepth(model=n, status="not_run", estimate=None, fewest_passing_turns=None, runs=())
                     for n, _ in later]
        return DepthEstimate(status="no_estimate", depth=None, n_turns=None, models=tuple(measured))
    current: float = first.estimate if first.estimate is not None else math.inf  # inf: above the largest cap
    for name, run in later:
        m = measure_later_model(name, run, current, caps, runs_per_cap)
        measured.append(m)
        if m.estimate is not None:
            current = min(current, m.estimate)
    if math.isinf(current):
        return DepthEstimate(status="above_largest_cap", depth=None, n_turns=first.fewest_passing_turns,
                             models=tuple(measured))
    return DepthEstimate(status="estimate", depth=int(current), n_turns=first.fewest_passing_turns,
                         models=tuple(measured))


def harness_runner(task: Task, agent: Agent, backend: LocalBackend, *, seed: int = 0,
                   base_budget: Budget | None = None, label: str = "depth",
                   trajectory_dir: Path | None = None, model: str | None = None) -> RunFn:
    """`run(cap)` backed by real natural rollouts of `agent` on `task` in the hrbench harness.

    A capped run states and enforces ``Budget.task_max_turns = cap`` (all parts together, App. B) and
    lifts the per-part cap; an uncapped run uses `base_budget` as given (its wall-time limits bound it).
    Each call is a new trial (its own trial key and seed), so repeated runs at one cap are independent.
    `model` names the model in the trial keys (default: the agent's class name); give each model of a
    set its own, or two agents of one class would share keys, seeds and trajectory files.
    """
    base = base_budget or Budget(max_turns=None, task_timeout_sec=600.0)
    counter = itertools.count()
    agent_name = model or getattr(agent, "name", type(agent).__name__)

    def run(cap: int | None) -> RunResult:
        budget = base if cap is None else base.model_copy(update={"task_max_turns": cap, "max_turns": None})
        spec = TrialSpec(prereg_sha256=label.ljust(16, "0"), agent=agent_name, condition="baseline",
                         protocol=f"depth-cap-{cap if cap is not None else 'none'}", task=task.name,
                         kind="natural", stage=None, trial_index=next(counter))
        record = run_natural_trial(spec, task, agent, backend, CONDITIONS["baseline"], budget, seed,
                                   trajectory_dir=trajectory_dir)
        return RunResult(passed=record.passed, turns=record.turns)

    return run


def depth_of_task(task: Task, agents: Sequence[Agent], backend: LocalBackend, *, seed: int = 0,
                  base_budget: Budget | None = None, caps: Sequence[int] = CAPS,
                  trajectory_dir: Path | None = None) -> DepthEstimate:
    """D of `task` over a model set of real agents (the first measured in full, the rest below D)."""
    models = [(getattr(a, "name", type(a).__name__),
               harness_runner(task, a, backend, seed=seed, base_budget=base_budget, trajectory_dir=trajectory_dir))
              for a in agents]
    return estimate_depth(models, caps)
