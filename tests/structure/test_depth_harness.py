"""Protects depth measured through the real harness: stated turn caps enforced on natural rollouts in
the sandbox give D as constructed on the calibration tasks, for agents of declared batching ability."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrbench.agents.oracle import NopAgent
from hrbench.envs.local import LocalBackend
from hrbench.protocol import Budget
from hrbench.structure.batching import BatchingParams, StepBatchingAgent
from hrbench.structure.depth import estimate_depth, harness_runner
from hrbench.tasks.loader import load_task

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"
BUDGET = Budget(max_turns=None, timeout_sec=60, task_timeout_sec=120, memory_mb=512)


def _depth(tmp_path: Path, task_dir: str, steps_per_turn: int | None):
    task = load_task(REGISTRY / task_dir)
    agent = StepBatchingAgent(BatchingParams(steps_per_turn=steps_per_turn))
    backend = LocalBackend(tmp_path / "cache")
    return estimate_depth([(agent.name, harness_runner(task, agent, backend, base_budget=BUDGET,
                                                       trajectory_dir=tmp_path / "traj"))])


def test_free_batching_agent_gets_d_one_on_the_parallel_task_and_d_steps_on_the_encrypted_chain(tmp_path):
    parallel = _depth(tmp_path, "calib-parallel", None)
    assert parallel.depth == 1 and [r.cap for r in parallel.runs] == [None, None]
    encrypted = _depth(tmp_path, "calib-encrypted-chain", None)
    assert encrypted.n_turns == 10 and encrypted.depth == 10
    # every cap below 10 was really run twice and really stopped the agent at the cap
    capped = [r for r in encrypted.runs if r.cap is not None]
    assert [r.cap for r in capped] == [1, 1, 2, 2, 3, 3, 5, 5]
    assert all(not r.passed and r.turns == r.cap for r in capped)


@pytest.mark.slow
@pytest.mark.parametrize("task_dir, free", [("calib-static-chain", 1), ("calib-parallel", 1),
                                            ("calib-encrypted-chain", 10)])
def test_stepwise_agent_gets_d_steps_everywhere_and_free_batching_only_where_allowed(tmp_path, task_dir, free):
    assert _depth(tmp_path, task_dir, 1).depth == 10
    assert _depth(tmp_path, task_dir, None).depth == free


def test_an_agent_that_never_passes_gives_no_estimate(tmp_path):
    task = load_task(REGISTRY / "calib-parallel")
    d = estimate_depth([("nop", harness_runner(task, NopAgent(), LocalBackend(tmp_path / "c"), base_budget=BUDGET,
                                               trajectory_dir=tmp_path / "t"))])
    assert d.status == "no_estimate" and len(d.runs) == 2


@pytest.mark.slow
def test_a_free_batching_second_agent_lowers_d_of_a_stepwise_first_agent(tmp_path: Path):
    from hrbench.structure.depth import depth_of_task

    task = load_task(REGISTRY / "calib-static-chain")
    agents = [StepBatchingAgent(BatchingParams(steps_per_turn=1)), StepBatchingAgent()]
    d = depth_of_task(task, agents, LocalBackend(tmp_path / "c"), base_budget=BUDGET, trajectory_dir=tmp_path / "t")
    assert d.models[0].estimate == 10 and d.depth == 1
    assert [r.cap for r in d.models[1].runs] == [1]
