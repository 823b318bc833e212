"""The gate between the method's steps: a table is computed only from tables whose blocking checks passed.

Every blocking check (assets/checks.py) writes its verdict on each partition it judged beside the table's
lineage record (`CheckRecord` in hrbench/lineage.py), bound to the sha256 of the bytes it judged. A verdict on
older bytes is no verdict: a table rewritten after its check (a run that left the checks out) counts as
never checked.

The rule is evaluated by the downstream assets themselves before they compute anything, so it holds for
every way a run is launched (UI, backfill, schedule, automation, the agent sensor, `hrbench run`): a run of
a downstream asset, however launched, refuses while an upstream blocking check failed or never ran on the
current table. The sensor and `hrbench run` read the same verdicts to decide that a step is done
(hrbench/steps.py), and `hrbench verify` / `hrbench lineage` name every table without a passing verdict.
The core reads the records, never Dagster: Dagster's own event log holds the same evaluations (the UI shows
them), but per check key, not per partition, and not from a store the core can read.
"""

from __future__ import annotations

import json

from hrbench.catalogue import (
    CHECKPOINT, EXPECTED, HORIZON_RESIDUALS, NATURAL, OBSERVED_SUCCESS, REGISTRATION, REPORT, REPORT_ASSET, RESIDUALS,
    SETUP, STAGE_ESTIMATES, TABLES, VERIFIER_AUDIT, Table, table,
)
from hrbench.lineage import check_problems, read_record
from hrbench.stores import PREREGISTRATION_KEY
from hrbench.study_run import StudyRun

STEP_ORDER = (SETUP, REGISTRATION, CHECKPOINT, EXPECTED, NATURAL, RESIDUALS, REPORT)
# Checked tables a table reads from its own step: in one run Dagster makes it wait for their blocking checks,
# across runs this gate does ("{c}": the table's own condition; None: every condition's).
SAME_STEP_INPUTS: dict[str, tuple[tuple[Table, str | None], ...]] = {
    "expected_success": ((STAGE_ESTIMATES, "{c}"),),
    "horizon_residuals": ((OBSERVED_SUCCESS, "{c}"),),
    "intervention_contrasts": ((HORIZON_RESIDUALS, None),),
    "sensitivity_sweep": ((HORIZON_RESIDUALS, "baseline"),),
}


def setup_problems(run: StudyRun) -> list[str]:
    """What is missing before any agent's work: the stored pre-registration of this study and its verifier audit."""
    try:
        stored = json.loads(run.stores.store.get(PREREGISTRATION_KEY)).get("prereg_sha256")
    except FileNotFoundError:
        return ["no pre-registration stored (preregistration.json): run the setup step (study_setup_job) first"]
    if stored != run.prereg_sha256:
        return [f"the stored pre-registration is {str(stored)[:12]}, not this study's {run.prereg_sha256[:12]}"]
    audit = read_record(run.stores.store, VERIFIER_AUDIT.name, ())
    if audit is None or audit.prereg_sha256 != [run.prereg_sha256]:
        return ["no verifier audit under this pre-registration: run the setup step (study_setup_job) first"]
    return []


def _partitions(spec: Table, agent: str, run: StudyRun) -> list[tuple[str, ...]]:
    return [(agent,)] if spec.partitioned == "agent" else [(agent, t.name) for t in run.design.tasks]


def upstream_problems(run: StudyRun, asset: str, agents: list[str]) -> list[str]:
    """Why `asset` may not be computed for these agents now: setup not done, or a blocking check of a table it
    comes after (an earlier step's, or one it reads in its own step) failed or never ran. Empty: go ahead."""
    problems = setup_problems(run)
    step = REPORT if asset == REPORT_ASSET else table(asset).step
    if problems or STEP_ORDER.index(step) <= STEP_ORDER.index(REGISTRATION):
        return problems
    condition = asset.split("/")[0] if "/" in asset else None
    conditions = run.study.condition_names
    wanted: list[tuple[Table, str]] = []
    for spec in TABLES:
        if spec.blocking_checks and STEP_ORDER.index(spec.step) < STEP_ORDER.index(step):
            wanted += [(spec, k) for k in ([spec.key(condition)] if spec.per_condition and condition
                                           else spec.keys(conditions))]
    for spec, which in SAME_STEP_INPUTS.get(asset.split("/")[-1], ()):
        keys = spec.keys(conditions) if which is None else [spec.key(which.format(c=condition))]
        wanted += [(spec, k) for k in keys if k.split("/")[0] in conditions]
    store = run.stores.tables.store
    return [p for spec, key in wanted for agent in agents for part in _partitions(spec, agent, run)
            for p in check_problems(store, key, part)]
