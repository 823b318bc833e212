"""Protects the sim agent's declared batching ability (`SimParams.steps_per_turn`): measured through the real
harness on the calibration tasks, D comes out as constructed, and the closed-form truth does not move."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrbench.agents.sim import SimAgent, sim_truth
from hrbench.agents.specs import SimParams
from hrbench.envs.local import LocalBackend
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
from hrbench.structure.depth import estimate_depth, harness_runner
from hrbench.tasks.loader import load_task

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"
BUDGET = Budget(max_turns=None, timeout_sec=60, task_timeout_sec=120, memory_mb=512)
FREE = 100  # more steps than any calibration task has: batching limited only by reads-output


def _depth(tmp_path: Path, task_dir: str, **sim):
    task = load_task(REGISTRY / task_dir)
    agent = SimAgent(SimParams(skill=1.0, **sim))
    runner = harness_runner(task, agent, LocalBackend(tmp_path / "cache"), base_budget=BUDGET,
                            trajectory_dir=tmp_path / "traj")
    return estimate_depth([("sim", runner)])


def test_without_a_batching_ability_the_sim_types_the_whole_solution_in_one_turn(tmp_path):
    # unchanged behaviour: even the encrypted chain's reference script runs in one turn
    d = _depth(tmp_path, "calib-encrypted-chain")
    assert d.depth == 1 and d.n_turns == 1


def test_free_batching_sim_that_looks_first_needs_two_turns_on_the_parallel_task(tmp_path):
    d = _depth(tmp_path, "calib-parallel", steps_per_turn=FREE, defect_penalty=0.1)
    assert d.n_turns == 2 and d.depth == 2  # the probe, then every step at once: D <= 3


@pytest.mark.slow
@pytest.mark.parametrize("task_dir, free", [("calib-parallel", 1), ("calib-static-chain", 1),
                                            ("calib-encrypted-chain", 10)])
def test_sim_depth_is_one_step_per_turn_or_free_batching_where_the_task_allows_it(tmp_path, task_dir, free):
    stepwise = _depth(tmp_path / "one", task_dir, steps_per_turn=1)
    assert stepwise.depth == 10 and stepwise.n_turns == 10
    batching = _depth(tmp_path / "free", task_dir, steps_per_turn=FREE)
    assert batching.depth == free and batching.n_turns == free
    capped = [r for r in batching.runs if r.cap is not None]
    assert all(not r.passed and r.turns == r.cap for r in capped)  # every lower cap really ran and stopped it


def test_batching_leaves_the_sim_truth_unchanged():
    task = load_task(REGISTRY / "calib-static-chain")
    base = SimParams(skill=0.8, context_rot=0.2, defect_rate=0.3, defect_penalty=0.4)
    for spt in (1, 3, FREE):
        assert sim_truth(base.model_copy(update={"steps_per_turn": spt}), task, CONDITIONS["baseline"],
                         CheckpointProtocol()) == sim_truth(base, task, CONDITIONS["baseline"], CheckpointProtocol())


def test_steps_per_turn_must_be_positive():
    with pytest.raises(ValueError, match="steps_per_turn"):
        SimParams(steps_per_turn=0)
