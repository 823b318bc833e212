"""Protects the asset checks that run the suites: a corrupted table fails its blocking check, with GX's verdict
(which expectation, how many rows, examples) in the check's metadata. The checks are invoked directly (Dagster
cannot run a partitioned check without its asset in process); a whole study runs them in tests/test_pipeline.py."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from dagster import (
    AssetCheckKey, AssetCheckResult, AssetKey, AssetMaterialization, DagsterInstance, MultiPartitionKey,
    build_op_context,
)
from dagster._core.execution.context.invocation import DirectAssetCheckExecutionContext

from pipelines.builder import build_definitions
from assets.checks import EXPECTED_BEFORE_OBSERVED, QUALITY
from hrbench.catalogue import table_key
from tests.conftest import TINY, TINY_STUDY
from tests.quality.conftest import AGENT, CONDITION, StudyTables

PARTITION = MultiPartitionKey({"agent": AGENT, "task": "tiny-chain"})


def _check(out, key: AssetCheckKey, partition: str | MultiPartitionKey, table: pd.DataFrame,
           instance: DagsterInstance | None = None) -> AssetCheckResult:
    """Invoke one check of the study's definitions on a table, as Dagster would for that partition."""
    defs = build_definitions(TINY_STUDY, out)
    (check,) = [c for c in defs.asset_checks if key in c.check_keys]
    instance = instance or DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(TINY.agents, [AGENT])
    resources = {"study": defs.resources["study"]} if "study" in check.required_resource_keys else {}
    (name,) = [n for n, k in check.keys_by_input_name.items() if k == key.asset_key]
    with build_op_context(partition_key=partition, instance=instance) as op_context:
        return check(DirectAssetCheckExecutionContext(op_context), **{name: table}, **resources)


@pytest.mark.parametrize("corrupted", [False, True], ids=["clean", "duplicated-key"])
def test_the_checkpoint_trials_check_fails_on_a_duplicated_key(study_tables: StudyTables, tmp_path, corrupted: bool):
    trials = study_tables.checkpoint
    if corrupted:
        trials = pd.concat([trials, trials.iloc[[0]]], ignore_index=True)
    key = AssetCheckKey(AssetKey(TINY.asset_key("checkpoint_trials")), QUALITY)
    result = _check(tmp_path, key, PARTITION, trials)
    assert result.passed is not corrupted, result.description
    meta = {k: getattr(v, "value", v) for k, v in result.metadata.items()}
    assert meta["suite"] == "checkpoint_trials" and meta["rows"] == len(trials)
    if corrupted:
        assert "each trial must appear once" in result.description
        assert meta["failed"] == 1 and meta["unexpected/expect_column_values_to_be_unique/trial_key"] == 2
        assert trials["trial_key"].iloc[0] in meta["examples/expect_column_values_to_be_unique/trial_key"]


def test_the_suites_that_guard_an_estimate_are_blocking(tmp_path):
    defs = build_definitions(TINY_STUDY, tmp_path)
    blocking = {table_key(k.asset_key.path): spec.blocking for c in defs.asset_checks
                for k, spec in zip(c.check_keys, c.check_specs) if k.name == QUALITY}
    assert blocking == {"checkpoint_trials": True, "baseline/natural_trials": True, "baseline/stage_estimates": True,
                        "baseline/expected_success": True, "baseline/observed_success": False,
                        "baseline/horizon_residuals": True}


def test_a_probability_above_one_fails_the_expected_success_check(study_tables: StudyTables, tmp_path):
    key = AssetCheckKey(AssetKey(TINY.asset_key(f"{CONDITION}/expected_success")), QUALITY)
    result = _check(tmp_path, key, AGENT, study_tables.expected.assign(p_expected=1.2))
    assert not result.passed
    assert "P_expected must lie in [0, 1]" in result.description and "p_expected=1.2" in result.description


def test_a_natural_trial_started_before_its_expected_fails_the_order_check(study_tables: StudyTables, tmp_path):
    registration = study_tables.design.registration(AGENT)
    stamps = {"prereg_sha256": study_tables.prereg, "agent_sha256": registration.agent_sha256}
    instance = DagsterInstance.ephemeral()
    instance.report_runless_asset_event(AssetMaterialization(
        asset_key=AssetKey(TINY.asset_key(f"{CONDITION}/expected_success")), partition=AGENT, metadata=stamps))
    fixed_at = time.time()
    natural = study_tables.natural.assign(started_at=pd.Timestamp(fixed_at + 60, unit="s", tz="UTC").isoformat())
    natural.loc[natural.index[7], "started_at"] = pd.Timestamp(fixed_at - 30, unit="s", tz="UTC").isoformat()
    instance.report_runless_asset_event(AssetMaterialization(
        asset_key=AssetKey(TINY.asset_key(f"{CONDITION}/natural_trials")), partition=str(PARTITION), metadata=stamps))
    key = AssetCheckKey(AssetKey(TINY.asset_key(f"{CONDITION}/natural_trials")), EXPECTED_BEFORE_OBSERVED)
    result = _check(tmp_path, key, PARTITION, natural, instance)
    assert not result.passed, result.metadata
    assert "every natural trial must start after its agent's baseline P_expected was fixed" in result.description
    assert "1 of 30 rows" in result.description and natural["trial_key"].iloc[7] in result.description
