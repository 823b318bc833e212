"""The columns of every stored table: name, kind of value, and whether a row may leave it empty.

The catalogue (hrbench/catalogue.py) gives each table its schema from here; the data-quality suites
(hrbench/quality/suites.py) take their column expectations and row keys from it, and
tests/test_pipeline.py checks every table a study writes against it. The columns are those the writers
produce: the trial runner's `records_table` (`TrialRecord`), `StudyDesign.catalog`, the audit's `StageAudit`,
`measure_study_depth`, the protocol assets (assets/protocol.py) and `hrbench.analysis`; every table is
stamped with `prereg_sha256`, and every per-agent table with `agent_sha256` too (assets/common.py `stamp`).

A column's kind is judged on the table as read back from parquet: `string` (pandas' str or object of
str), `integer`, `float`, `boolean`, `list` (an array per cell). An optional column may be empty in any row,
and a column that is empty in every row of a table has no kind to judge (parquet stores it as nulls).
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

Kind = Literal["string", "integer", "float", "boolean", "list"]


class Column(BaseModel):
    """One column of a table."""

    model_config = ConfigDict(frozen=True)
    name: str
    kind: Kind
    required: bool = True  # every row has a value (optional: may be empty)


class Schema(BaseModel):
    """A table's columns; the writer may add columns matching `extra` (a trial's `reward.<stage>.<key>`)."""

    model_config = ConfigDict(frozen=True)
    columns: tuple[Column, ...]
    row_key: tuple[str, ...] = ()  # the columns naming a row; the table's quality suite judges them unique
    extra: str | None = None  # a regular expression for the names of further columns

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def unstamped(self) -> list[str]:
        """The columns its writer produces, in order, before the pre-registration and agent hashes are stamped."""
        return [n for n in self.names if n not in STAMPS]

    @property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if c.required]

    def problems(self, frame: pd.DataFrame) -> list[str]:
        """What in `frame` breaks the schema, one sentence each (empty when it conforms)."""
        found = [f"missing column {n!r}" for n in self.names if n not in frame.columns]
        found += [f"unexpected column {c!r}" for c in frame.columns
                  if c not in self.names and not (self.extra and re.fullmatch(self.extra, str(c)))]
        for column in self.columns:
            if column.name not in frame.columns:
                continue
            values = frame[column.name]
            empty = int(values.isna().sum()) if column.kind != "list" else int(values.map(_is_null).sum())
            if column.required and empty:
                found.append(f"column {column.name!r} is required but empty in {empty} of {len(values)} rows")
            if empty < len(values) and not _of_kind(values, column.kind):
                found.append(f"column {column.name!r} should hold {column.kind} values, not {values.dtype}")
        return found


def _is_null(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _of_kind(values: pd.Series, kind: Kind) -> bool:
    """Whether the non-empty values of a column are of the kind (an integer column with an empty cell is
    float in pandas, so an optional integer column may be float)."""
    present = values.dropna() if kind != "list" else values[~values.map(_is_null)]
    if kind == "integer":
        return pd.api.types.is_integer_dtype(values) or (
            pd.api.types.is_float_dtype(values) and bool((present == present.round()).all()))
    if kind == "float":
        return pd.api.types.is_float_dtype(values)
    if kind == "boolean":
        return pd.api.types.is_bool_dtype(values) or bool(present.map(lambda v: isinstance(v, (bool, np.bool_))).all())
    if kind == "string":
        return bool(present.map(lambda v: isinstance(v, str)).all())
    return bool(present.map(lambda v: isinstance(v, (list, np.ndarray))).all())


def _columns(spec: str) -> tuple[Column, ...]:
    """Columns from lines `name kind` (`name kind?` when optional): the tables below read as lists."""
    found = []
    for name, kind in (line.split() for line in spec.splitlines() if line.strip()):
        found.append(Column(name=name, kind=kind.rstrip("?"), required=not kind.endswith("?")))
    return tuple(found)


STAMPS = ("prereg_sha256", "agent_sha256")  # added by StudyDesign.stamp and assets/common.py `stamp`
STAMP = "prereg_sha256 string"
AGENT_STAMP = f"{STAMP}\nagent_sha256 string"

TASK_CATALOG = Schema(columns=_columns(f"""
    {STAMP}
    task string
    family string
    structure string
    n_stages integer
    stage string
    stage_index integer
    depends_on string
    stage_weight float
    task_weight float
    work_lines integer
    dependency_depth integer
    docker_only string?
    backend string
    task_version string?
    content_sha256 string
"""))

VERIFIER_AUDIT = Schema(columns=_columns(f"""
    {STAMP}
    task string
    stage string
    reference_reward float
    nothing_reward float
    key_removed_reward float?
    forged_reward float?
    edited_inputs_reward float?
    ok boolean
    problem string?
    key_check string
    notes list
"""))

PREREGISTRATION = Schema(columns=_columns(f"""
    {STAMP}
    study string
    version integer
    code_version string
    git_commit string?
    dirty boolean?
    source_sha256 string
    check_library_sha256 string
    path string
"""))

TASK_DEPTH = Schema(columns=_columns(f"""
    {STAMP}
    task string
    family string
    depth integer?
    depth_status string
    n_turns integer?
    work_lines integer
    work_chars integer
    work_tokens integer?
    n_stages integer
    dependency_depth integer
    models string
    n_runs integer
    runs_json string
"""))

AGENT_REGISTRATION = Schema(columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    kind string
    program string
    registered_at string
    path string
"""))

# TrialRecord's fields (hrbench/harness/records.py; a test keeps them equal), stamped with the agent's hash.
TRIALS = Schema(row_key=("trial_key",), extra=r"reward\..+", columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    protocol string
    task string
    kind string
    stage string?
    trial_index integer
    trial_key string
    passed boolean
    stages_passed integer
    stopped_stage string?
    turns integer
    wall_s float
    agent_s float
    verifier_s float
    exit_reason string
    tokens_in integer
    tokens_out integer
    cost_usd float
    stage_outcomes_json string
    error string?
    exit_detail string?
    parse_errors integer
    compactions integer
    trajectory_path string?
    rewards_json string
    artifacts_json string
    harbor_reward float?
    started_at string?
    attempts integer
    earlier_attempts_json string
    recorded_at string?
"""))

STAGE_ESTIMATES = Schema(row_key=("agent", "condition", "task", "stage"), columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    protocol string
    task string
    family string
    stage string
    stage_index integer
    k integer
    m integer
    m_planned integer
    m_missing integer
    q_hat float?
    q_ci_low float?
    q_ci_high float?
    true_q float?
"""))

EXPECTED_SUCCESS = Schema(row_key=("agent", "condition", "task"), columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    task string
    family string
    weight float
    n_stages integer
    baseline_model string
    p_expected float?
    mc_se float?
    needs_compatibility boolean
    true_p_expected float?
"""))

# A task without an estimate leaves its counts of reached and passed stages empty.
OBSERVED_SUCCESS = Schema(row_key=("agent", "condition", "task", "stage"), columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    task string
    family string
    stage string
    stage_index integer
    reached integer?
    passed integer?
    r_hat float?
    true_r float?
    m0 integer
    m0_planned integer
    m0_missing integer
    k0 integer?
    p_observed float?
    true_p_observed float?
"""))

# The claim columns (hrbench.claims.CLAIM_COLUMNS) are filled on the study's pre-registered claims only;
# `claim_df` and `claim_terms` (JSON) on the t intervals the max-|t| band rescales.
CLAIM_COLUMNS = """
    confirmatory boolean
    claim_estimand string?
    p_value float?
    adj_level float?
    adj_ci_low float?
    adj_ci_high float?
    claim_df float?
    claim_terms string?
"""

# A task without an estimate (a cell whose trials are all missing) has no interval: its methods are empty.
HORIZON_RESIDUALS = Schema(row_key=("agent", "condition", "scope", "name"), columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    scope string
    name string
    family string?
    p_expected float?
    p_observed float?
    gamma float?
    ci_low float?
    ci_high float?
    ci_estimand string?
    trial_ci_low float?
    trial_ci_high float?
    se_delta float?
    ci_method string?
    trial_ci_method string?
    df float?
    level float?
    n_boot integer?
    zero_rule string?
    zero_rule_applied boolean?
    n_tasks integer
    n_excluded integer?
    quadrant string?
    bound string?
    bound_value float?
    flags list
    stage_terms string?
    stage_term_ci string?
    families_ci_low float?
    families_ci_high float?
    families_df float?
    true_gamma float?
    true_gamma_sampled float?
    rule_note string?
    m_planned integer
    m_used integer
    m_missing integer
    {CLAIM_COLUMNS}
"""))

INTERVENTION_CONTRASTS = Schema(columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    scope string
    name string
    gamma_a float?
    gamma_b float?
    delta_gamma float?
    ci_low float?
    ci_high float?
    trial_ci_low float?
    trial_ci_high float?
    ci_method string
    level float
    n_boot integer
    n_tasks integer
    ci_estimand string
    trial_ci_method string
    df float?
    flags list
    true_delta_gamma float?
    true_delta_gamma_sampled float?
    delta_stage_terms string?
    shared_checkpoint boolean
    {CLAIM_COLUMNS}
"""))

SENSITIVITY_SWEEP = Schema(columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    scope string
    protocol string
    protocol_hash string
    baseline_model string
    zero_rule string
    decomposition string
    name string
    gamma float?
    ci_low float?
    ci_high float?
    true_gamma float?
"""))

RESOURCE_ACCOUNTING = Schema(columns=_columns(f"""
    {AGENT_STAMP}
    agent string
    condition string
    kind string
    trials integer
    turns integer
    tokens_in integer
    tokens_out integer
    wall_s float
    cost_usd float
    missing_trials integer
    shared_protocol string?
    budget_rule string?
"""))
