"""Protects `hrbench depth`: D and W per task from a study's agents, measured through the real harness,
and errors that say what to pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrbench.cli import app

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"


def _study(tmp_path: Path, steps_per_turn: int) -> Path:
    path = tmp_path / "depth.yaml"
    path.write_text(f"""name: depth-cli
tasks:
  registry: {REGISTRY}
  include: [calib-parallel, calib-encrypted-chain]
agents:
  - id: batcher
    kind: sim
    sim: {{skill: 1.0, steps_per_turn: {steps_per_turn}}}
  - id: other
    kind: nop
""")
    return path


def _row(output: str, task: str) -> list[str]:
    line = next(line for line in output.splitlines() if task in line)
    return [cell.strip() for cell in line.split("│")[1:-1]]


def test_depth_prints_d_and_w_of_given_task_dirs_for_a_studys_agent(tmp_path):
    result = CliRunner().invoke(app, ["depth", str(REGISTRY / "calib-parallel"), "--study",
                                      str(_study(tmp_path, 100)), "--agent", "batcher"])
    assert result.exit_code == 0, result.output
    _, d, n, lines, *_ = _row(result.output, "calib-parallel")
    assert (d, n) == ("1", "1")
    assert int(lines) > 10  # W: ten answer lines and the preamble of the reference solution


@pytest.mark.slow
def test_depth_of_the_studys_tasks_with_a_stepwise_sim(tmp_path):
    result = CliRunner().invoke(app, ["depth", "--study", str(_study(tmp_path, 1)), "--agent", "batcher"])
    assert result.exit_code == 0, result.output
    assert _row(result.output, "calib-parallel")[1:3] == ["10", "10"]  # D, N
    assert _row(result.output, "calib-encrypted-chain")[1:3] == ["10", "10"]


def test_depth_of_a_task_no_agent_passes_is_none(tmp_path):
    result = CliRunner().invoke(app, ["depth", str(REGISTRY / "calib-parallel"), "--study",
                                      str(_study(tmp_path, 1)), "--agent", "other"])
    assert result.exit_code == 0, result.output
    assert _row(result.output, "calib-parallel")[1:3] == ["none", "—"]


def test_depth_without_agents_says_what_to_pass():
    result = CliRunner().invoke(app, ["depth", str(REGISTRY / "calib-parallel")])
    assert result.exit_code == 1 and "--study" in result.output and "--agent-config" in result.output


def test_depth_with_an_unknown_agent_names_the_known_ones(tmp_path):
    result = CliRunner().invoke(app, ["depth", "--study", str(_study(tmp_path, 1)), "--agent", "nobody"])
    assert result.exit_code == 1 and "nobody" in result.output and "batcher" in result.output
