"""Protects `matched` checkpoints in a study: the transcripts come from prefix rollouts run before the
checkpoints (so do `solution_conditioned` checkpoints' states), the prediction is still fixed before the natural rollouts it is compared with, and the
evidence-order check still blocks natural trials that precede their expected success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, AssetSelection, DagsterInstance, MultiPartitionKey, materialize

from hrbench.harness.trajectory import read_trajectory
from pipelines.builder import build_definitions
from pipelines.materialize import QUIET, run_study
from tests.conftest import FIXTURES, TINY, TINY_STUDY, stored_table


def _tiny_study(tmp_path_factory, name: str, checkpoint: dict) -> Path:
    """The tiny study on the fixture registry with `checkpoint` declared (4 checkpoint, 6 natural trials)."""
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["checkpoint"] = checkpoint
    study["trials"] = {"checkpoint": 4, "natural": 6}
    path = tmp_path_factory.mktemp(name) / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


@pytest.fixture(scope="module")
def matched_study(tmp_path_factory) -> Path:
    return _tiny_study(tmp_path_factory, "matched", {"history": "matched"})


def test_a_matched_study_runs_end_to_end(matched_study: Path, tmp_path: Path):
    out = tmp_path / "out"
    run_study(matched_study, out, instance=DagsterInstance.ephemeral(), progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert {r["agent"] for r in summary["residuals"] if r["scope"] == "all"} == {"steady", "rotting"}
    prefixes = stored_table(out, "tables/prefix_rollouts/steady/tiny-chain.parquet")
    checkpoints = stored_table(out, "tables/checkpoint_trials/steady/tiny-chain.parquet")
    natural = stored_table(out, "tables/baseline/natural_trials/steady/tiny-chain.parquet")
    assert len(prefixes) == 4 and (checkpoints["exit_reason"] != "harness_error").all()
    # The rollouts a prediction is compared with are not the ones its transcripts came from.
    assert not set(prefixes["trial_key"]) & set(natural["trial_key"])
    later = checkpoints[checkpoints["stage"] != "make"].iloc[0]
    steps = read_trajectory(out / later["trajectory_path"])["steps"]
    assert any("matched history: transcript prefix" in s["message"] for s in steps)


@pytest.fixture(scope="module")
def conditioned_study(tmp_path_factory) -> Path:
    return _tiny_study(tmp_path_factory, "conditioned", {"state": "solution_conditioned"})


@pytest.mark.parametrize("which", ["matched_study", "conditioned_study"])
def test_natural_trials_before_their_expected_success_are_still_blocked(which: str, request, tmp_path: Path):
    defs = build_definitions(request.getfixturevalue(which), tmp_path)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(TINY.agents, ["steady"])
    partition = str(MultiPartitionKey({"agent": "steady", "task": "tiny-chain"}))
    assets = list(defs.assets) + list(defs.asset_checks)
    # The prefix rollouts and matched checkpoints exist (after the agent's registration, which every trial
    # needs): outcomes of this agent have been recorded ...
    for selection, key in ((AssetSelection.groups("protocol"), None), (AssetSelection.assets(TINY.asset_key("agent_registration")), "steady"),
                           (AssetSelection.assets(TINY.asset_key("prefix_rollouts"), TINY.asset_key("checkpoint_trials")), partition)):
        result = materialize(assets, selection=selection, partition_key=key, instance=instance,
                             resources=defs.resources, raise_on_error=False, run_config=QUIET)
        assert result.success, selection
    # ... but no prediction is fixed yet: the observed rollouts must be refused.
    result = materialize(assets, selection=AssetSelection.assets(AssetKey(TINY.asset_key("baseline/natural_trials"))),
                         partition_key=partition, instance=instance, resources=defs.resources, raise_on_error=False,
                         run_config=QUIET)
    # the gate refuses them before any work (hrbench/gate.py): the prediction's table does not exist yet
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.message
    assert "baseline/natural_trials not computed" in message and "baseline/expected_success/steady: no table" in message
    assert not any(e.asset_key == AssetKey(TINY.asset_key("baseline/natural_trials"))
                   for e in result.get_asset_materialization_events() for e in [e.materialization])
    assert not list((tmp_path / "journal").glob("*/natural"))  # no compared rollout ran ahead of the prediction
