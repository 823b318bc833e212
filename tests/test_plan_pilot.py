"""Protects `hrbench plan --pilot OUT demo.yaml` (issue 22): the plan takes q_i and P_obs from a pilot run's
stored tables (a condition's tables live under `<condition>/`, named by the table catalogue).

The pilot is a small run of the demo's first agent on one of its tasks, not the whole demo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance
from typer.testing import CliRunner

from hrbench.cli import app
from hrbench.protocol import DEMO_STUDY
from pipelines.materialize import run_study

TASK = "lt-arith-orderedids-d1-n12-s0-k4"


@pytest.fixture(scope="module")
def pilot(tmp_path_factory) -> Path:
    """OUT of a finished pilot: the demo's agent sim-steady on one task, the baseline only, two trials a cell."""
    study = yaml.safe_load(DEMO_STUDY.read_text())
    study.update(name="demo-pilot", conditions=["baseline"], trials={"checkpoint": 2, "natural": 2},
                 agents=study["agents"][:1], bootstrap={"n_boot": 100, "seed": 7})
    study["tasks"] = {"registry": "builtin", "include": [TASK]}
    study.pop("depth", None)
    study.pop("sensitivity", None)
    folder = tmp_path_factory.mktemp("pilot")
    (folder / "pilot.yaml").write_text(yaml.safe_dump(study))
    run_study(folder / "pilot.yaml", folder / "out", instance=DagsterInstance.ephemeral(), progress=False)
    return folder / "out"


@pytest.mark.slow
def test_plan_takes_the_pilots_tables_for_the_agent_and_task_it_ran(pilot: Path):
    result = CliRunner().invoke(app, ["plan", "--pilot", str(pilot), str(DEMO_STUDY), "--sims", "200"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert re.search(r"inputs: pilot, sim truth\.", result.output), result.output
    # the pilot's own agent and task are planned from its tables; every other cell from the sim truth
    assert re.search(rf"sim-steady\s+│\s+{TASK}", result.output)
