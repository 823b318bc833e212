"""The data-quality suites of a study's tables (docs/quality.md), built from its pre-registration.

Each suite is a list of rules on one table: its columns (every one its catalogue schema declares, hrbench/schemas.py,
and a value in each required one), its keys (the schema's row key) unique and exactly (or at least) the
pre-registered ones, probabilities and rewards in [0, 1], exit reasons from the allowed set,
token and cost columns non-negative, and — across tables — every natural trial started after
its agent's P_expected for the condition was fixed. `check_<table>` validates one table with GX.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from hrbench.catalogue import (
    CHECKPOINT_TRIALS, EXPECTED_SUCCESS, HORIZON_RESIDUALS, OBSERVED_SUCCESS, STAGE_ESTIMATES, Table,
)
from hrbench.design import StudyDesign
from hrbench.exits import ALL_EXIT_REASONS, is_missing
from hrbench.harness.records import TrialSpec
from hrbench.protocol import Retries
from hrbench.quality.gx import SuiteResult, validate
from hrbench.quality.rules import (
    Rule, after, at_least, between, exactly, has_columns, not_above, one_of, present, unique,
)
from hrbench.schemas import Schema

EXIT_REASONS = frozenset(ALL_EXIT_REASONS)
KEY = "row_key"  # the joined key columns of a per-agent table, the column its key rules judge
EMPTY_REQUIRED = "empty_required"  # the required columns a row leaves empty, the column its schema rule judges
TRIALS = CHECKPOINT_TRIALS.table_schema  # natural trials and prefix rollouts have the same
TRIAL_INDEX = list(TRIALS.row_key)
NON_NEGATIVE = ("tokens_in", "tokens_out", "cost_usd", "turns", "wall_s")
TRIALS_REMEDY = ("re-materialize {suite} for these partitions (trials resume from the journal); a table edited "
                 "by hand or copied from another study's output is replaced by that")
TABLE_REMEDY = ("re-materialize {suite} for these agents; if it fails again with unchanged inputs, the analysis "
                "wrote an impossible value: report it with this message")
RETRY_REMEDY = ("re-run the same command: {n} trial(s) will be retried (a trial without a result after its "
                "attempts is missing, not failed; the study's retries.max_missing_share tolerates {share:g} of a "
                "cell's trials). If they fail again, the last error says why")
ORDER_REMEDY = ("natural trials observed before their prediction cannot be compared with it: materialize "
                "{condition}/expected_success first, and re-run a study whose trials started earlier into a new --out")


def _unit(column: str, what: str) -> Rule:
    return between(column, 0, 1, f"{what} must lie in [0, 1]")


def schema_rules(schema: Schema) -> list[Rule]:
    """The column expectations of a table's catalogue schema: every declared column, a value in each required one
    (judged on `with_empty_required`'s column: one expectation, not one per column, each costing GX a pass)."""
    return [has_columns(schema.names, "the table must have every column its catalogue schema declares "
                                      "(hrbench/schemas.py); one renamed or dropped by its writer breaks its readers"),
            one_of(EMPTY_REQUIRED, {""}, "every row must have a value in each required column of its catalogue "
                                         "schema (the rows below name the empty ones)")]


def with_empty_required(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The table with a column naming, per row, the required columns it leaves empty (`a,b`; "" when none)."""
    empty = pd.Series("", index=frame.index, dtype=object)
    for column in (c for c in schema.required if c in frame.columns):
        empty = empty.where(frame[column].notna(), empty + "," + column)
    return frame.assign(**{EMPTY_REQUIRED: empty.str.lstrip(",")})


def _stamped(prereg_sha256: str) -> Rule:
    return one_of("prereg_sha256", {prereg_sha256}, "every row must carry this study's pre-registration hash")


def _keyed(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    columns = [c for c in columns if c in frame.columns]  # a missing one fails the schema's rule, not this join
    joined = frame[columns].astype(str).agg("|".join, axis=1) if len(frame) else pd.Series([], dtype=object)
    return frame.assign(**{KEY: joined})


def trial_rules(specs: Iterable[TrialSpec], prereg_sha256: str) -> list[Rule]:
    """Checkpoint or natural trials: exactly the pre-registered keys once each, sane outcomes and costs."""
    keys = {s.key for s in specs}
    return [
        *schema_rules(TRIALS),
        unique("trial_key", "each trial must appear once (a duplicated key would be counted twice)"),
        exactly("trial_key", keys, f"the trial keys must be exactly the {len(keys)} pre-registered trials"),
        _stamped(prereg_sha256),
        one_of("exit_reason", set(EXIT_REASONS), f"exit reasons must be one of {', '.join(sorted(EXIT_REASONS))}"),
        _unit("stage_reward_min", "every stage reward"),
        _unit("stage_reward_max", "every stage reward"),
        *(between(c, 0, None, f"{c} must be non-negative") for c in NON_NEGATIVE),
        present("started_at", "every trial must record when it started (the evidence-order check reads it)"),
    ]


def trial_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """The trial table with its stage rewards' extremes as columns (they live in stage_outcomes_json)."""
    rewards = [[o["reward"] for o in json.loads(text)] if isinstance(text, str) else []
               for text in trials["stage_outcomes_json"]] if len(trials) else []
    return trials.assign(stage_reward_min=[min(r) if r else None for r in rewards],
                         stage_reward_max=[max(r) if r else None for r in rewards])


def check_trials(suite: str, trials: pd.DataFrame, specs: Iterable[TrialSpec], prereg_sha256: str,
                 retries: Retries = Retries()) -> SuiteResult:
    """Validate a checkpoint or natural trial table against the trials pre-registered for its partitions, and
    each cell's missing trials (no result after their attempts) against `retries.max_missing_share`."""
    specs = list(specs)
    rows = validate(suite, with_empty_required(trial_frame(trials), TRIALS), trial_rules(specs, prereg_sha256),
                    TRIAL_INDEX, TRIALS_REMEDY.format(suite=suite))
    cells, tolerated = missing_cells(trials, specs, retries)
    share = validate(suite, cells, [between("m_missing", 0, tolerated, (
        f"at most {tolerated} of each cell's trials may be missing (retries.max_missing_share "
        f"{retries.max_missing_share:g})"))], ["cell", "m_planned", "m_missing", "last_error"])
    remedies = [rows.remedy] * (not rows.success) + \
        [RETRY_REMEDY.format(n=int(cells["m_missing"].sum()), share=retries.max_missing_share)] * (not share.success)
    return SuiteResult(suite=suite, rows=rows.rows, outcomes=rows.outcomes + share.outcomes,
                       remedy="; ".join(remedies))


def missing_cells(trials: pd.DataFrame, specs: list[TrialSpec], retries: Retries) -> tuple[pd.DataFrame, int]:
    """One row per cell of the pre-registered trials (a checkpoint unit of a protocol, or a condition's natural
    rollouts of a task): planned and missing trials and the last error of a missing one; and how many a cell
    may miss."""
    def cell(agent: str, kind: str, protocol: str, task: str, stage: str | None) -> str:
        return "/".join([agent, task, protocol, stage]) if kind == "checkpoint" else "/".join([agent, task, protocol])

    planned: dict[str, int] = {}
    for s in specs:
        key = cell(s.agent, s.kind, s.protocol, s.task, s.stage)
        planned[key] = planned.get(key, 0) + 1
    missing: dict[str, list[str]] = {}
    if len(trials):
        gone = trials[trials["exit_reason"].map(lambda r: r in EXIT_REASONS and is_missing(r)).astype(bool)]
        for row in gone.sort_values("trial_index").to_dict("records"):
            error = next((line for line in str(row.get("error") or "").splitlines() if line.strip()), "")
            missing.setdefault(cell(row["agent"], row["kind"], row["protocol"], row["task"], row["stage"]), []).append(
                f"{row['exit_reason']}: {error[:200]}")
    frame = pd.DataFrame([{"cell": k, "m_planned": n, "m_missing": len(missing.get(k, [])),
                           "last_error": (missing.get(k) or [None])[-1]} for k, n in planned.items()],
                         columns=["cell", "m_planned", "m_missing", "last_error"])
    per_cell = {n for n in planned.values()}
    return frame, min((retries.tolerated(n) for n in per_cell), default=0)


def _check_keyed(table: Table, condition: str, frame: pd.DataFrame, wanted: set[str], rules: list[Rule],
                 complete: str = "exactly") -> SuiteResult:
    """A per-agent table's suite: its schema's columns, its row key (`row_key`: unique, and `complete` the
    `wanted` keys joined with `|`), then `rules`."""
    suite, columns = table.key(condition), list(table.table_schema.row_key)
    label = "/".join(columns)
    key_rules = [unique(KEY, f"each ({label}) must appear once"),
                 (exactly if complete == "exactly" else at_least)(
                     KEY, wanted, f"the ({label}) rows must be {complete} the {len(wanted)} pre-registered ones")]
    schema = table.table_schema
    return validate(suite, with_empty_required(_keyed(frame, columns), schema), schema_rules(schema) + key_rules + rules,
                    columns, TABLE_REMEDY.format(suite=suite))


def check_stage_estimates(frame: pd.DataFrame, design: StudyDesign, agents: list[str], condition: str) -> SuiteResult:
    """q̂ of every stage of every task, from the pre-registered m_i trials less the missing ones, inside [0, 1]."""
    wanted = {"|".join((a, condition, t.name, s.name)) for a in agents for t in design.tasks for s in t.stages}
    planned = design.study.trials.checkpoint
    rules = [_stamped(design.prereg_sha256), *(_unit(c, c) for c in ("q_hat", "q_ci_low", "q_ci_high")),
             one_of("m_planned", {planned}, f"every stage's m_planned must be the pre-registered m_i = {planned}"),
             not_above("m", "m_planned", "every q̂ must come from at most the pre-registered m_i trials (m_used "
                                         "≤ m_planned; the shortfall is m_missing, trials without a result)")]
    return _check_keyed(STAGE_ESTIMATES, condition, frame, wanted, rules)


def check_expected_success(frame: pd.DataFrame, design: StudyDesign, agents: list[str], condition: str) -> SuiteResult:
    """P_expected of every task, once, inside [0, 1]."""
    wanted = {"|".join((a, condition, t.name)) for a in agents for t in design.tasks}
    rules = [_stamped(design.prereg_sha256), _unit("p_expected", "P_expected")]
    return _check_keyed(EXPECTED_SUCCESS, condition, frame, wanted, rules)


def check_observed_success(frame: pd.DataFrame, design: StudyDesign, agents: list[str], condition: str) -> SuiteResult:
    """r̂ of every stage and P_observed of every task, once, inside [0, 1]."""
    wanted = {"|".join((a, condition, t.name, s.name)) for a in agents for t in design.tasks for s in t.stages}
    rules = [_stamped(design.prereg_sha256), _unit("r_hat", "r̂"), _unit("p_observed", "P_observed")]
    return _check_keyed(OBSERVED_SUCCESS, condition, frame, wanted, rules)


def check_horizon_residuals(frame: pd.DataFrame, design: StudyDesign, agents: list[str],
                            condition: str) -> SuiteResult:
    """A residual row for every task, every family and `all` (others may follow), once; P's inside [0, 1]."""
    scopes = {("task", t.name) for t in design.tasks} | {("family", t.family) for t in design.tasks} | {("all", "all")}
    wanted = {"|".join((a, condition, s, n)) for a in agents for s, n in scopes}
    rules = [_stamped(design.prereg_sha256), _unit("p_expected", "P_expected"), _unit("p_observed", "P_observed")]
    return _check_keyed(HORIZON_RESIDUALS, condition, frame, wanted, rules, complete="at least")


def evidence_order_frame(natural: pd.DataFrame, expected_at: dict[str, float | None],
                         agents: Iterable[str]) -> pd.DataFrame:
    """One row per natural trial (and one per agent without any): its start and its agent's P_expected time, in
    seconds since the epoch. `expected_at[agent]` is None when no P_expected was fixed."""
    started = pd.to_datetime(natural["started_at"], utc=True, format="ISO8601") if len(natural) else None
    rows = [{"agent": a, "trial_key": k, "started_at": s.timestamp() if pd.notna(s) else None,
             "expected_at": expected_at.get(a)}
            for a, k, s in zip(natural["agent"], natural["trial_key"], started)] if started is not None else []
    seen = {r["agent"] for r in rows}
    rows += [{"agent": a, "trial_key": None, "started_at": None, "expected_at": expected_at.get(a)}
             for a in agents if a not in seen]
    return pd.DataFrame(rows, columns=["agent", "trial_key", "started_at", "expected_at"]).astype(
        {"started_at": float, "expected_at": float})


def check_evidence_order(natural: pd.DataFrame, expected_at: dict[str, float | None], agents: Iterable[str],
                         condition: str) -> SuiteResult:
    """Every natural trial of an agent started after that agent's P_expected for the condition was fixed."""
    frame = evidence_order_frame(natural, expected_at, agents)
    rules = [
        present("expected_at", f"no {condition}/expected_success with these natural trials' prereg_sha256 and agent "
                               "registration was materialized before them; materialize expected_success first (the "
                               "prediction must be fixed before observing end-to-end success)"),
        after("started_at", "expected_at", f"every natural trial must start after its agent's {condition} "
                                           "P_expected was fixed"),
    ]
    return validate(f"{condition}/evidence_order", frame, rules, ["agent", "trial_key"],
                    ORDER_REMEDY.format(condition=condition))
