"""The table catalogue: every table a study stores, with its name, key, partitioning and producing step.

A table's name is its Dagster asset name; a condition's own tables (its branch of the graph) are keyed
`<condition>/<name>`, both as assets and in the store (`tables/<condition>/<name>/...`, `StudyStores`).
The assets, checks, step jobs, sensor, lineage, report, plan and CLI read names and keys from here rather
than spelling them out. In Dagster every name of a study carries its namespace (`StudyNames`): asset keys are
`<study>/<key>`, jobs, sensors, schedules and the agents' partitions `<study>__<name>`, so several studies share
one instance; the store, one per study, keeps the bare key. Each table's columns are those its producer in `hrbench.analysis` (or the trial
runner: `TrialRecord`) writes, stamped with `prereg_sha256` and `agent_sha256`: its `table_schema`, one per table in
`hrbench.schemas`, which the quality suites and tests/test_pipeline.py judge tables by.
"""

from __future__ import annotations

import re
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict

from hrbench import schemas
from hrbench.schemas import Schema

Partitioning = Literal["none", "agent", "agent_task"]


class Table(BaseModel):
    """One stored table: what it is called, how it is keyed and partitioned, and which step writes it."""

    model_config = ConfigDict(frozen=True)
    name: str
    per_condition: bool  # each condition has its own, keyed `<condition>/<name>`
    partitioned: Partitioning  # one table per agent, per agent x task, or one for the study
    step: str  # the job of the study step that materializes it (hrbench/steps.py)
    table_schema: Schema  # its columns (hrbench/schemas.py)
    # One row per observed trial (TrialRecord's columns): `verify` checks it against the trial journal, and a
    # harness error in it re-runs its step. Prefix rollouts (transcripts for `matched` checkpoints, never
    # observed) are not counted among them.
    trials: bool = False
    report_reads: bool = False  # report.html / summary.json read it: an input of the report asset
    # The names of its blocking checks (assets/checks.py): no table after it in the method's order is computed
    # from it until each has passed on its current bytes (hrbench/gate.py).
    blocking_checks: tuple[str, ...] = ()

    def key(self, condition: str | None = None) -> str:
        """Its asset key (user string form) and table name in the store: `<condition>/<name>` for a
        condition's own table."""
        if self.per_condition != (condition is not None):
            raise ValueError(f"table {self.name!r} is {'per condition' if self.per_condition else 'shared'}: "
                             f"condition {condition!r} does not fit")
        return f"{condition}/{self.name}" if condition else self.name

    def keys(self, conditions: list[str]) -> list[str]:
        """Its keys in a study with these conditions (one, for a shared table)."""
        return [self.key(c) for c in conditions] if self.per_condition else [self.key()]


# The study's step jobs (hrbench/steps.py), in order; the last writes no table but the report's files.
SETUP, REGISTRATION, CHECKPOINT, EXPECTED, NATURAL, RESIDUALS, REPORT = (
    "study_setup_job", "agent_registration_job", "checkpoint_trials_job", "expected_success_job",
    "natural_trials_job", "horizon_residuals_job", "study_report_job")
REPORT_ASSET = "study_report"  # report.html and summary.json: files, not a table

# The asset checks (assets/checks.py) by name: GX suites, the registration hashes and the order of evidence.
QUALITY, REGISTERED, EXPECTED_BEFORE_OBSERVED = (
    "data_quality", "hashes_match_stored_registration", "expected_success_precedes_natural_trials")

TASK_CATALOG = Table(name="task_catalog", per_condition=False, partitioned="none", step=SETUP,
                     table_schema=schemas.TASK_CATALOG)
VERIFIER_AUDIT = Table(name="verifier_audit", per_condition=False, partitioned="none", step=SETUP,
                       table_schema=schemas.VERIFIER_AUDIT)
PREREGISTRATION = Table(name="preregistration", per_condition=False, partitioned="none", step=SETUP,
                        table_schema=schemas.PREREGISTRATION)
TASK_DEPTH = Table(name="task_depth", per_condition=False, partitioned="none", step=SETUP, report_reads=True,
                   table_schema=schemas.TASK_DEPTH)
AGENT_REGISTRATION = Table(name="agent_registration", per_condition=False, partitioned="agent", step=REGISTRATION,
                           table_schema=schemas.AGENT_REGISTRATION)
PREFIX_ROLLOUTS = Table(name="prefix_rollouts", per_condition=False, partitioned="agent_task", step=CHECKPOINT,
                        table_schema=schemas.TRIALS)
CHECKPOINT_TRIALS = Table(name="checkpoint_trials", per_condition=False, partitioned="agent_task", step=CHECKPOINT,
                          trials=True, blocking_checks=(QUALITY, REGISTERED), table_schema=schemas.TRIALS)
STAGE_ESTIMATES = Table(name="stage_estimates", per_condition=True, partitioned="agent", step=EXPECTED,
                        report_reads=True, blocking_checks=(QUALITY, REGISTERED), table_schema=schemas.STAGE_ESTIMATES)
EXPECTED_SUCCESS = Table(name="expected_success", per_condition=True, partitioned="agent", step=EXPECTED,
                         blocking_checks=(QUALITY, REGISTERED), table_schema=schemas.EXPECTED_SUCCESS)
NATURAL_TRIALS = Table(name="natural_trials", per_condition=True, partitioned="agent_task", step=NATURAL,
                       trials=True, report_reads=True, blocking_checks=(EXPECTED_BEFORE_OBSERVED, QUALITY, REGISTERED),
                       table_schema=schemas.TRIALS)
# its GX suite does not block (no estimate is computed from it: the residuals read the trials themselves)
OBSERVED_SUCCESS = Table(name="observed_success", per_condition=True, partitioned="agent", step=RESIDUALS,
                         report_reads=True, blocking_checks=(REGISTERED,), table_schema=schemas.OBSERVED_SUCCESS)
HORIZON_RESIDUALS = Table(name="horizon_residuals", per_condition=True, partitioned="agent", step=RESIDUALS,
                          report_reads=True, blocking_checks=(QUALITY, REGISTERED),
                          table_schema=schemas.HORIZON_RESIDUALS)
INTERVENTION_CONTRASTS = Table(name="intervention_contrasts", per_condition=False, partitioned="agent",
                               step=RESIDUALS, report_reads=True, table_schema=schemas.INTERVENTION_CONTRASTS)
SENSITIVITY_SWEEP = Table(name="sensitivity_sweep", per_condition=False, partitioned="agent", step=RESIDUALS,
                          report_reads=True, table_schema=schemas.SENSITIVITY_SWEEP)
RESOURCE_ACCOUNTING = Table(name="resource_accounting", per_condition=False, partitioned="agent", step=RESIDUALS,
                            report_reads=True, table_schema=schemas.RESOURCE_ACCOUNTING)

# In the order the method writes them.
TABLES = (TASK_CATALOG, VERIFIER_AUDIT, PREREGISTRATION, TASK_DEPTH, AGENT_REGISTRATION, PREFIX_ROLLOUTS,
          CHECKPOINT_TRIALS, STAGE_ESTIMATES, EXPECTED_SUCCESS, NATURAL_TRIALS, OBSERVED_SUCCESS, HORIZON_RESIDUALS,
          INTERVENTION_CONTRASTS, SENSITIVITY_SWEEP, RESOURCE_ACCOUNTING)
BY_NAME = {t.name: t for t in TABLES}
TRIAL_TABLES = tuple(t.name for t in TABLES if t.trials)
CONDITION_TABLES = tuple(t.name for t in TABLES if t.per_condition)


def table(key: str) -> Table:
    """The catalogue's entry for an asset key or store name (`natural_trials`, `baseline/natural_trials`)."""
    return BY_NAME[key.split("/")[-1]]


class StudyNames(BaseModel):
    """The Dagster names of one study: its asset keys start with the study's namespace, and its jobs, sensors,
    schedules and the dynamic partitions of its agents are `<namespace>__<name>`. The instance's storage is shared
    by every code location of a deployment, so two studies (one code location each, docs/deploy.md) never write
    the same asset, partition set or run name; two studies of the same name would, and the docs say so."""

    model_config = ConfigDict(frozen=True)
    namespace: str

    @classmethod
    def of(cls, study_name: str) -> "StudyNames":
        """The names of the study called `study_name` (characters Dagster refuses in a name become `_`)."""
        return cls(namespace=re.sub(r"[^A-Za-z0-9_]", "_", study_name))

    def asset_key(self, key: str) -> list[str]:
        """The asset key path of a catalogue key (`baseline/natural_trials` -> [study, baseline, natural_trials])."""
        return [self.namespace, *key.split("/")]

    def name(self, definition: str) -> str:
        """A job's, sensor's or schedule's name in this study (`study_setup_job` -> `<study>__study_setup_job`)."""
        return f"{self.namespace}__{definition}"

    @property
    def agents(self) -> str:
        """The name of the study's dynamic partitions of agents."""
        return self.name("agent")


def table_key(asset_key_path: Sequence[str]) -> str:
    """The catalogue key (and store name) of a study's asset: its key path without the study's namespace."""
    return "/".join(asset_key_path[1:])
