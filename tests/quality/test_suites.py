"""Protects the data-quality suites: each expectation, corrupted in turn, fails alone and says what and where."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pandas as pd
import pytest

from hrbench import quality
from hrbench.quality import gx
from hrbench.quality.suites import EMPTY_REQUIRED
from tests.quality.conftest import AGENT, CONDITION, EXPECTED_AT, StudyTables


# the suites that read each table
READERS = {"checkpoint": ["checkpoint"], "natural": ["natural", "order"], "stage_estimates": ["stage_estimates"],
           "expected": ["expected"], "observed": ["observed"], "residuals": ["residuals"]}


def _tables(t: StudyTables) -> dict[str, pd.DataFrame]:
    return {"checkpoint": t.checkpoint, "natural": t.natural, "stage_estimates": t.stage_estimates,
            "expected": t.expected, "observed": t.observed, "residuals": t.residuals}


def _suites(t: StudyTables, replaced: dict[str, pd.DataFrame] | None = None) -> dict[str, quality.SuiteResult]:
    """The suites on the study's tables; given `replaced` (corrupted copies), only the suites that read those."""
    tables = {**_tables(t), **(replaced or {})}
    per_agent = dict(design=t.design, agents=[AGENT], condition=CONDITION)
    suites = {
        "checkpoint": lambda: quality.check_trials("checkpoint_trials", tables["checkpoint"],
                                                   t.runner.checkpoint_specs(AGENT, "tiny-chain"), t.prereg),
        "natural": lambda: quality.check_trials("natural_trials", tables["natural"],
                                                t.runner.natural_specs(AGENT, "tiny-chain", CONDITION), t.prereg),
        "order": lambda: quality.check_evidence_order(tables["natural"], {AGENT: EXPECTED_AT.timestamp()}, [AGENT],
                                                      CONDITION),
        "stage_estimates": lambda: quality.check_stage_estimates(tables["stage_estimates"], **per_agent),
        "expected": lambda: quality.check_expected_success(tables["expected"], **per_agent),
        "observed": lambda: quality.check_observed_success(tables["observed"], **per_agent),
        "residuals": lambda: quality.check_horizon_residuals(tables["residuals"], **per_agent),
    }
    names = [n for table in replaced for n in READERS[table]] if replaced else list(suites)
    return {name: suites[name]() for name in names}


def test_the_study_tables_pass_every_suite_in_one_context(study_tables: StudyTables):
    results = _suites(study_tables)
    assert {name: r.description() for name, r in results.items() if not r.success} == {}
    assert all(r.outcomes and r.rows for r in results.values())
    assert gx._batch_definition.cache_info().currsize == 1  # one ephemeral GX context for the whole process


def _copy(frame: pd.DataFrame, row: int, **values) -> pd.DataFrame:
    frame = frame.copy()
    for column, value in values.items():
        frame.loc[frame.index[row], column] = value
    return frame


def _reward(frame: pd.DataFrame, row: int, reward: float) -> pd.DataFrame:
    outcomes = [{"stage": "make", "reward": 1.0}, {"stage": "double", "reward": reward}]
    return _copy(frame, row, stage_outcomes_json=json.dumps(outcomes))


def _started(frame: pd.DataFrame, row: int, seconds_before_expected: float) -> pd.DataFrame:
    when = EXPECTED_AT - pd.Timedelta(seconds=seconds_before_expected)
    return _copy(frame, row, started_at=when.isoformat(timespec="milliseconds"))


# (suite, table, corruption, the one expectation that must fail, words the message must hold)
CORRUPTIONS: dict[str, tuple[str, str, Callable[[pd.DataFrame], pd.DataFrame], str, list[str]]] = {
    "duplicate checkpoint trial key": (
        "checkpoint", "checkpoint", lambda f: pd.concat([f, f.iloc[[3]]], ignore_index=True),
        "expect_column_values_to_be_unique", ["each trial must appear once", "2 of 31 rows", "trial_key="]),
    "duplicate natural trial key": (
        "natural", "natural", lambda f: pd.concat([f, f.iloc[[0]]], ignore_index=True),
        "expect_column_values_to_be_unique", ["each trial must appear once", "2 of 31 rows"]),
    "missing checkpoint trial": (
        "checkpoint", "checkpoint", lambda f: f.iloc[1:],
        "expect_column_distinct_values_to_equal_set", ["exactly the 30 pre-registered trials", "missing "]),
    "trial of another study": (
        "natural", "natural", lambda f: _copy(f, 2, trial_key="0" * 16 + "/steady/baseline/x/tiny-chain/natural:all/2"),
        "expect_column_distinct_values_to_equal_set", ["missing ", "not expected 0000000000000000/steady"]),
    "probability 1.2 in P_expected": (
        "expected", "expected", lambda f: _copy(f, 0, p_expected=1.2),
        "expect_column_values_to_be_between", ["P_expected must lie in [0, 1]", "p_expected=1.2", "task=tiny-chain"]),
    "probability 1.2 in q_hat": (
        "stage_estimates", "stage_estimates", lambda f: _copy(f, 1, q_hat=1.2),
        "expect_column_values_to_be_between", ["q_hat must lie in [0, 1]", "q_hat=1.2", "stage=double"]),
    "negative r_hat": (
        "observed", "observed", lambda f: _copy(f, 0, r_hat=-0.1),
        "expect_column_values_to_be_between", ["r̂ must lie in [0, 1]", "r_hat=-0.1"]),
    "probability 1.2 in a residual's P_observed": (
        "residuals", "residuals", lambda f: _copy(f, 2, p_observed=1.2),
        "expect_column_values_to_be_between", ["P_observed must lie in [0, 1]", "scope=all"]),
    "duplicate residual row": (
        "residuals", "residuals", lambda f: pd.concat([f, f.iloc[[0]]], ignore_index=True),
        "expect_column_values_to_be_unique", ["each (agent/condition/scope/name) must appear once"]),
    "missing overall residual": (
        "residuals", "residuals", lambda f: f[f["scope"] != "all"],
        "expect_column_distinct_values_to_contain_set", ["missing steady|baseline|all|all"]),
    "unknown exit reason": (
        "natural", "natural", lambda f: _copy(f, 4, exit_reason="exploded"),
        "expect_column_values_to_be_in_set", ["exit reasons must be one of", "exit_reason=exploded"]),
    "stage reward 1.5": (
        "checkpoint", "checkpoint", lambda f: _reward(f, 5, 1.5),
        "expect_column_values_to_be_between", ["every stage reward must lie in [0, 1]", "stage_reward_max=1.5"]),
    "negative token count": (
        "natural", "natural", lambda f: _copy(f, 1, tokens_in=-5),
        "expect_column_values_to_be_between", ["tokens_in must be non-negative", "tokens_in=-5"]),
    "negative cost": (
        "checkpoint", "checkpoint", lambda f: _copy(f, 0, cost_usd=-0.01),
        "expect_column_values_to_be_between", ["cost_usd must be non-negative"]),
    "natural trial timestamped before its expected": (
        "order", "natural", lambda f: _started(f, 7, 30),
        "expect_column_pair_values_a_to_be_greater_than_b",
        ["every natural trial must start after its agent's baseline P_expected was fixed", "1 of 30 rows",
         "agent=steady", "natural:all/7"]),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_each_corruption_fails_its_own_expectation_with_a_readable_message(study_tables: StudyTables,
                                                                            corruption: str):
    suite, table, corrupt, expectation, words = CORRUPTIONS[corruption]
    results = _suites(study_tables, {table: corrupt(getattr(study_tables, table))})
    failed = {name: [o.expectation for o in r.failed] for name, r in results.items() if not r.success}
    # the one expectation fails, in every suite that reads the table (the order suite has no key rule)
    assert failed.get(suite) == [expectation], failed
    assert set(failed) == {suite}, failed
    message = results[suite].description()
    for word in words:
        assert word in message, (word, message)
    assert message.splitlines()[-1].startswith("What to do: ")
    meta = results[suite].metadata()
    assert meta["failed"] == 1 and meta[f"unexpected/{expectation}/{results[suite].failed[0].column}"] >= 1


def test_no_prediction_fails_the_order_suite_naming_the_agent(study_tables: StudyTables):
    result = quality.check_evidence_order(study_tables.natural.iloc[:0], {AGENT: None}, [AGENT], CONDITION)
    assert [o.expectation for o in result.failed] == ["expect_column_values_to_not_be_null"]
    assert "no baseline/expected_success" in result.description() and "agent=steady" in result.description()


def test_a_trial_without_a_start_time_fails(study_tables: StudyTables):
    natural = _copy(study_tables.natural, 0, started_at=None)
    result = quality.check_trials("natural_trials", natural, study_tables.runner.natural_specs(AGENT, "tiny-chain"),
                                  study_tables.prereg)
    assert [(o.expectation, o.column) for o in result.failed] == [("expect_column_values_to_not_be_null", "started_at")]


def test_a_missing_column_is_reported_not_raised(study_tables: StudyTables):
    result = quality.check_expected_success(study_tables.expected.drop(columns=["p_expected"]), study_tables.design,
                                            [AGENT], CONDITION)
    assert [o.column for o in result.failed] == [gx.TABLE, "p_expected"]  # the schema's columns, then its range
    assert "missing column p_expected" in result.description() and "could not be checked" in result.description()


def test_an_empty_required_value_fails_the_suite_naming_the_row_and_the_column(study_tables: StudyTables):
    natural = study_tables.natural.copy()
    natural.loc[natural.index[3], ["agent_sha256", "trial_index"]] = None
    result = _suites(study_tables, {"natural": natural})["natural"]
    assert [o.column for o in result.failed] == [EMPTY_REQUIRED]
    assert result.failed[0].unexpected == 1
    assert result.failed[0].examples == [f"{EMPTY_REQUIRED}=agent_sha256,trial_index, "
                                         f"trial_key={natural['trial_key'].iloc[3]}"]


# a required column of each table (its catalogue schema), renamed as a writer might
RENAMED = {"checkpoint": "verifier_s", "natural": "agent_sha256", "stage_estimates": "m_planned",
           "expected": "baseline_model", "observed": "k0", "residuals": "ci_method"}


@pytest.mark.parametrize("table", sorted(RENAMED))
def test_a_renamed_column_fails_the_suites_that_read_its_table(study_tables: StudyTables, table: str):
    frame = _tables(study_tables)[table]
    renamed = frame.rename(columns={RENAMED[table]: RENAMED[table] + "_v2"})
    for name, result in _suites(study_tables, {table: renamed}).items():
        if name == "order":
            continue  # the evidence order reads the trials' start times only
        assert not result.success, name
        assert f"missing column {RENAMED[table]}" in result.description(), name


def test_the_core_and_the_cli_do_not_import_great_expectations():
    code = ("import sys, hrbench.quality, pipelines.cli, pipelines.builder; "
            "assert 'great_expectations' not in sys.modules, 'imported eagerly'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
