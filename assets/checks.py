"""Asset checks: the great-expectations suites of the study's tables (hrbench.quality, docs/quality.md),
the order of evidence, and the registration hashes (DESIGN §8).

Checks on partitioned assets carry the asset's partitions (a preview API; warnings from it are
silenced here only) and, in a run over many partitions, judge every partition of the run. A check
that guards an estimate downstream is blocking (the catalogue names which: `Table.blocking_checks`); each puts
GX's verdict in its metadata, and a blocking one also writes it beside the table's lineage record for every
partition it judged (hrbench/gate.py), where the downstream assets, the sensor, `hrbench run`, `verify` and
`lineage` read it.
"""


import json
import warnings
from pathlib import Path

import pandas as pd
from dagster import (
    AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, AssetKey, MultiPartitionsDefinition,
    PartitionsDefinition, PreviewWarning, asset_check,
)

from hrbench import quality
from hrbench.catalogue import (
    CHECKPOINT_TRIALS, CONDITION_TABLES, EXPECTED_BEFORE_OBSERVED, QUALITY, REGISTERED, StudyNames, table, table_key,
)
from hrbench.lineage import write_check_record
from hrbench.preregistration import load_registration
from hrbench.storage import TableStore, store_for
from hrbench.stores import StudyStores
from assets.common import in_namespace, sibling
from assets.evidence import first_expected_success, latest_materialization, metadata_for_agent, metadata_text
from assets.partitions import agents_of
from resources.study import StudyResource

# The per-agent tables whose hashes are checked against the stored records; a condition's are `<condition>/<name>`.
SHARED_REGISTERED = (CHECKPOINT_TRIALS.name,)
CONDITION_REGISTERED = CONDITION_TABLES
# A condition's per-agent tables with a suite (whether it blocks: the catalogue's `blocking_checks`).
PER_AGENT_SUITES = {"stage_estimates": quality.check_stage_estimates,
                    "expected_success": quality.check_expected_success,
                    "observed_success": quality.check_observed_success,
                    "horizon_residuals": quality.check_horizon_residuals}


def registered_assets(conditions: list[str]) -> list[str]:
    """The tables the registration check guards, for a study with these conditions."""
    return [*SHARED_REGISTERED, *(f"{c}/{n}" for c in conditions for n in CONDITION_REGISTERED)]


def _keys(context: AssetCheckExecutionContext) -> list[dict[str, str]]:
    return [k.keys_by_dimension for k in context.partition_keys]  # type: ignore[attr-defined]


def _blocking(asset: str, check: str) -> bool:
    return check in table(asset).blocking_checks


def _recorded(context: AssetCheckExecutionContext, study: StudyResource, result: AssetCheckResult) -> AssetCheckResult:
    """The result, its verdict written for every partition judged when the check is blocking (hrbench/gate.py).
    A suite judged over several partitions at once gives each the same verdict: one bad partition holds back
    the others of its run until the step is re-run (the safe side)."""
    asset, check = table_key(context.check_specs[0].asset_key.path), context.check_specs[0].name
    if _blocking(asset, check):
        store = study.run().stores.tables.store
        for key in context.partition_keys:
            write_check_record(store, asset, tuple(str(key).split("|")), check, result.passed,
                               context.op_execution_context.run_id, result.description)
    return result


def _result(context: AssetCheckExecutionContext, study: StudyResource, verdict: quality.SuiteResult,
            **extra) -> AssetCheckResult:
    return _recorded(context, study, AssetCheckResult(passed=verdict.success, description=verdict.description(),
                                                      metadata={**verdict.metadata(), **extra}))


def build_study_checks(names: StudyNames, agent_task: MultiPartitionsDefinition,
                       conditions: list[str]) -> list[AssetChecksDefinition]:
    """The suites of the shared checkpoint trials and of every condition's branch, and the registration checks, on
    the study's keys (its namespace)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        registration_checks = [_registration_check(name, agent_task if name.endswith("_trials") else agents_of(agent_task))
                               for name in registered_assets(conditions)]
        return in_namespace([_checkpoint_check(agent_task),
                             *(c for cond in conditions for c in _condition_checks(cond, agent_task)),
                             *registration_checks], names)


def _checkpoint_check(agent_task: MultiPartitionsDefinition) -> AssetChecksDefinition:
    @asset_check(asset="checkpoint_trials", name=QUALITY, blocking=_blocking("checkpoint_trials", QUALITY), partitions_def=agent_task,
                 description="GX suite: exactly the pre-registered m_i trials of every checkpoint unit and protocol, "
                             "each once; exit reasons allowed; stage rewards in [0, 1]; tokens, cost, turns, time "
                             "non-negative; every trial's start recorded.")
    def checkpoint_trials_quality(context: AssetCheckExecutionContext, study: StudyResource,
                                  checkpoint_trials: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        specs = [s for k in _keys(context) for s in run.runner.checkpoint_specs(k["agent"], k["task"])]
        return _result(context, study, quality.check_trials("checkpoint_trials", checkpoint_trials, specs,
                                                            run.prereg_sha256,
                                                            run.study.retries))

    return checkpoint_trials_quality


def _condition_checks(condition: str, agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    natural = AssetKey([condition, "natural_trials"])

    @asset_check(asset=natural, name=EXPECTED_BEFORE_OBSERVED, blocking=_blocking("natural_trials", EXPECTED_BEFORE_OBSERVED), partitions_def=agent_task,
                 description=f"GX suite: every {condition} natural trial started after its agent's P_expected was "
                             "first materialized under the same pre-registration and agent registration (evidence "
                             "order, DESIGN §8).")
    def expected_success_precedes_natural_trials(context: AssetCheckExecutionContext, study: StudyResource,
                                                 natural_trials: pd.DataFrame) -> AssetCheckResult:
        expected_at: dict[str, float | None] = {}
        checked = context.check_specs[0].asset_key  # `natural`, in the study's namespace
        for key in context.partition_keys:
            agent = key.split("|")[0]
            materialized = latest_materialization(context.instance, checked, key)
            first = first_expected_success(context.instance, sibling(checked, "expected_success"), agent,
                                           metadata_text(materialized, "prereg_sha256"),
                                           metadata_for_agent(materialized, "agent_sha256", agent))
            expected_at[agent] = first.timestamp if first else None
        verdict = quality.check_evidence_order(natural_trials, expected_at, sorted(expected_at), condition)
        return _result(context, study, verdict, condition=condition,
                       **{f"expected_success_at/{a}": t for a, t in expected_at.items() if t is not None})

    @asset_check(asset=natural, name=QUALITY, blocking=_blocking("natural_trials", QUALITY), partitions_def=agent_task,
                 description=f"GX suite: exactly the pre-registered m_0 {condition} natural rollouts, each once; exit "
                             "reasons allowed; stage rewards in [0, 1]; tokens, cost, turns, time non-negative.")
    def natural_trials_quality(context: AssetCheckExecutionContext, study: StudyResource,
                               natural_trials: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        specs = [s for k in _keys(context) for s in run.runner.natural_specs(k["agent"], k["task"], condition)]
        return _result(context, study, quality.check_trials(f"{condition}/natural_trials", natural_trials, specs,
                                                            run.prereg_sha256,
                                                            run.study.retries))

    return [expected_success_precedes_natural_trials, natural_trials_quality,
            *(_per_agent_check(condition, name, suite, agent_task) for name, suite in PER_AGENT_SUITES.items())]


def _per_agent_check(condition: str, name: str, suite, agent_task: MultiPartitionsDefinition) -> AssetChecksDefinition:
    """The GX suite of one per-agent table of a condition's branch, over the agents of the run."""

    # the one parameter that is no resource is the checked table (Dagster loads it through the IO manager)
    @asset_check(asset=AssetKey([condition, name]), name=QUALITY, blocking=_blocking(name, QUALITY), partitions_def=agents_of(agent_task),
                 description=f"GX suite on {condition}/{name}: {suite.__doc__.strip()}")
    def table_quality(context: AssetCheckExecutionContext, study: StudyResource, table: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        return _result(context, study, suite(table, run.design, list(context.partition_keys), condition))

    return table_quality


def _registration_check(asset: str, partitions_def: PartitionsDefinition) -> AssetChecksDefinition:
    @asset_check(asset=AssetKey.from_user_string(asset), name=REGISTERED, blocking=_blocking(asset, REGISTERED), partitions_def=partitions_def,
                 description="Every row's prereg_sha256 is the stored pre-registration's (OUT/preregistration.json) "
                             "and its agent_sha256 the stored registration of its agent (OUT/registrations/<agent>.json).")
    def hashes_match_stored_registration(context: AssetCheckExecutionContext, study: StudyResource) -> AssetCheckResult:
        wrong = registration_problems(study.run().out_dir, asset, context.partition_keys)
        return _recorded(context, study, AssetCheckResult(
            passed=not wrong, description="; ".join(wrong[:5]) or None,
            metadata={"partitions": len(context.partition_keys), "mismatched": len(wrong)}))

    return hashes_match_stored_registration


def registration_problems(out_dir: Path, asset: str, partition_keys: list[str]) -> list[str]:
    """Partitions of `asset` whose rows carry a prereg_sha256 or agent_sha256 that no stored record has."""
    store = TableStore(store_for(out_dir))
    stored_prereg = _stored_prereg(out_dir)
    wrong: list[str] = []
    for key in partition_keys:
        partition = tuple(key.split("|"))
        if not store.exists(asset, partition):
            wrong.append(f"{key}: no table")
            continue
        table = store.read(asset, partition)
        if len(table) and set(table["prereg_sha256"]) - {stored_prereg}:
            wrong.append(f"{key}: prereg_sha256 {sorted(set(table['prereg_sha256']))[0][:12]} is not the stored "
                         f"pre-registration {str(stored_prereg)[:12]}")
            continue
        registration = load_registration(out_dir, partition[0])
        if registration is None:
            wrong.append(f"{key}: agent {partition[0]!r} has no stored registration")
        elif len(table) and set(table["agent_sha256"]) - {registration.agent_sha256}:
            wrong.append(f"{key}: agent_sha256 is not the stored registration {registration.agent_sha256[:12]}")
    return wrong


def _stored_prereg(out_dir: Path) -> str | None:
    path = StudyStores(out_dir).preregistration_path
    return json.loads(path.read_text()).get("prereg_sha256") if path.is_file() else None
