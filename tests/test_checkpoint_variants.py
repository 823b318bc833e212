"""Protects the checkpoint protocol variants: `information: goal_only` states the task's goal instead of
the stage's instruction, in real sandboxes with real sim agents and verifiers."""

from __future__ import annotations

from pathlib import Path

from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.protocol import CheckpointProtocol
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

ALWAYS = SimParams(skill=1.0)


def _spec(stage: str, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent="sim", condition="baseline", protocol="p", task="tiny-chain",
                     kind="checkpoint", stage=stage, trial_index=index)


def _prompts(out: Path, record) -> list[str]:
    steps = read_trajectory(out / record.trajectory_path)["steps"]
    return [s["message"] for s in steps if s.get("source") == "user"]


def test_goal_only_states_the_whole_task_and_the_parts_done_not_the_stage_instruction(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    goal_only = CheckpointProtocol(information="goal_only")
    assert goal_only.protocol_hash() != CheckpointProtocol().protocol_hash()  # its own trial keys
    record = run_checkpoint_trial(_spec("report"), task, SimAgent(ALWAYS), backend, goal_only, 1,
                                  trajectory_dir=tmp_path / "trajectories")
    assert record.passed  # the real verifier of stage 3 judged the state the agent left
    (prompt,) = _prompts(tmp_path, record)
    assert prompt.startswith("Parts 1-2 of this task are marked complete.")
    assert "Here is part 3 of 3" not in prompt
    # without a task-level instruction.md the goal is every step's instruction, in order
    positions = [prompt.index(s.instruction.strip()) for s in task.stages]
    assert positions == sorted(positions) and task.goal in prompt
    given = run_checkpoint_trial(_spec("report", 1), task, SimAgent(ALWAYS), backend, CheckpointProtocol(), 1,
                                 trajectory_dir=tmp_path / "trajectories")
    (stated,) = _prompts(tmp_path, given)
    assert stated.startswith("Part 2 is marked complete. Here is part 3 of 3.")
    assert task.stages[0].instruction.strip() not in stated


def test_a_task_level_instruction_md_is_the_goal(tiny_task_copy: Path, tmp_path: Path):
    (tiny_task_copy / "instruction.md").write_text("Leave a report of the doubled seed plus one.\n")
    task = load_task(tiny_task_copy)
    assert task.goal == "Leave a report of the doubled seed plus one."
    record = run_checkpoint_trial(_spec("double"), task, SimAgent(ALWAYS), LocalBackend(tmp_path / "cache"),
                                  CheckpointProtocol(information="goal_only"), 1,
                                  trajectory_dir=tmp_path / "trajectories")
    (prompt,) = _prompts(tmp_path, record)
    assert record.passed and prompt.startswith("Part 1 of this task is marked complete.")
    assert prompt.endswith("Leave a report of the doubled seed plus one.")
    assert not any(s.instruction.strip() in prompt for s in task.stages)
    assert load_task(TINY_TASK).content_hash() != task.content_hash()  # a changed goal is a new task version
