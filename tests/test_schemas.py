"""Protects the table schemas (hrbench/schemas.py): the trial schema is TrialRecord's, and a table is judged on
its columns, their kinds and their required values. Every stored table of a study against its schema:
tests/test_pipeline.py."""

from __future__ import annotations

import pandas as pd

from hrbench.catalogue import (CHECKPOINT_TRIALS, EXPECTED_SUCCESS, HORIZON_RESIDUALS, INTERVENTION_CONTRASTS,
                               NATURAL_TRIALS, PREFIX_ROLLOUTS)
from hrbench.claims import CLAIM_COLUMNS
from hrbench.harness.records import TrialRecord, records_table

TRIALS = CHECKPOINT_TRIALS.table_schema


def test_the_trial_schema_is_the_trial_records_columns_stamped():
    assert TRIALS.names == ["prereg_sha256", "agent_sha256", *(f for f in TrialRecord.model_fields
                                                                 if f != "prereg_sha256")]
    assert NATURAL_TRIALS.table_schema == PREFIX_ROLLOUTS.table_schema == TRIALS
    assert list(records_table([]).columns) == list(TrialRecord.model_fields)


def _expected_row() -> dict:
    return {"prereg_sha256": "p", "agent_sha256": "a", "agent": "steady", "condition": "baseline", "task": "t",
            "family": "f", "weight": 1.0, "n_stages": 2, "baseline_model": "product", "p_expected": 0.5,
            "mc_se": None, "needs_compatibility": False, "true_p_expected": 0.5}


def test_a_conforming_table_has_no_problems_and_an_empty_optional_column_has_no_kind():
    frame = pd.DataFrame([_expected_row()] * 2)
    assert EXPECTED_SUCCESS.table_schema.problems(frame) == []


def test_a_wrong_kind_an_empty_required_value_and_an_unknown_column_are_each_named():
    frame = pd.DataFrame([_expected_row()] * 2).assign(n_stages="two", extra=1)
    frame.loc[1, "agent"] = None
    assert EXPECTED_SUCCESS.table_schema.problems(frame) == [
        "unexpected column 'extra'", "column 'agent' is required but empty in 1 of 2 rows",
        "column 'n_stages' should hold integer values, not str"]


def test_the_residual_and_contrast_schemas_hold_every_claim_column_as_optional():
    for table in (HORIZON_RESIDUALS, INTERVENTION_CONTRASTS):
        columns = {c.name: c for c in table.table_schema.columns}
        assert set(CLAIM_COLUMNS) <= set(columns), table.name
        # exploratory rows leave them all empty but `confirmatory`
        assert [n for n in CLAIM_COLUMNS if columns[n].required] == ["confirmatory"], table.name
