"""Asset checks that enforce the order and completeness of evidence (DESIGN §8).

Checks on partitioned assets carry the asset's partitions (a preview API; warnings from it are
silenced here only) and, in a run over many partitions, judge every partition of the run.
"""


import json
import warnings
from pathlib import Path

import pandas as pd
from dagster import (
    AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, AssetKey, MultiPartitionsDefinition, PartitionsDefinition,
    PreviewWarning, asset_check,
)

from hrbench.preregistration import load_registration
from hrbench.storage import TableStore, store_for
from pipelines.defs.study.evidence import latest_materialization, metadata_for_agent, metadata_text, prior_expected_success
from pipelines.defs.study.partitions import AGENTS
from resources.study import StudyResource

EXPECTED_BEFORE_OBSERVED = "expected_success_precedes_natural_trials"
TRIAL_COUNTS = "trial_counts_match_preregistration"
STAGES_COMPLETE = "every_stage_estimated_within_unit_interval"
REGISTERED = "hashes_match_stored_registration"
# The per-agent tables whose hashes are checked against the stored records; a condition's are `<condition>/<name>`.
SHARED_REGISTERED = ("checkpoint_trials",)
CONDITION_REGISTERED = ("natural_trials", "stage_estimates", "expected_success", "observed_success",
                        "horizon_residuals")


def registered_assets(conditions: list[str]) -> list[str]:
    """The tables the registration check guards, for a study with these conditions."""
    return [*SHARED_REGISTERED, *(f"{c}/{n}" for c in conditions for n in CONDITION_REGISTERED)]


def _keys(context: AssetCheckExecutionContext) -> list[dict[str, str]]:
    return [k.keys_by_dimension for k in context.partition_keys]  # type: ignore[attr-defined]


def build_study_checks(agent_task: MultiPartitionsDefinition, conditions: list[str]) -> list[AssetChecksDefinition]:
    """The blocking checks of the shared checkpoint trials and of every condition's branch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        registration_checks = [_registration_check(name, agent_task if name.endswith("_trials") else AGENTS)
                               for name in registered_assets(conditions)]
        return [_checkpoint_check(agent_task), *(c for cond in conditions for c in _condition_checks(cond, agent_task)),
                *registration_checks]


def _checkpoint_check(agent_task: MultiPartitionsDefinition) -> AssetChecksDefinition:
    @asset_check(asset="checkpoint_trials", name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description="Every checkpoint unit of every distinct protocol has exactly the pre-registered m_i "
                             "trials, no key twice (shared protocols run once).")
    def checkpoint_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                                checkpoint_trials: pd.DataFrame) -> AssetCheckResult:
        runner = study.run().runner
        return _count_check(study, checkpoint_trials,
                            [s for k in _keys(context) for s in runner.checkpoint_specs(k["agent"], k["task"])])

    return checkpoint_trial_counts


def _condition_checks(condition: str, agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    natural = AssetKey([condition, "natural_trials"])
    estimates = AssetKey([condition, "stage_estimates"])

    @asset_check(asset=natural, name=EXPECTED_BEFORE_OBSERVED, blocking=True, partitions_def=agent_task,
                 description=f"{condition}: P_expected must be materialized, under the same pre-registration and "
                             "agent registration, before any natural rollout of that agent is used (evidence order, "
                             "DESIGN §8).")
    def expected_success_precedes_natural_trials(context: AssetCheckExecutionContext) -> AssetCheckResult:
        late, stamps = [], {}
        for key in context.partition_keys:
            agent = key.split("|")[0]
            materialized = latest_materialization(context.instance, natural, key)
            prereg = metadata_text(materialized, "prereg_sha256")
            expected = prior_expected_success(context.instance, agent, prereg,
                                              metadata_for_agent(materialized, "agent_sha256", agent),
                                              materialized.timestamp if materialized else None, condition)
            if expected is None:
                late.append(agent)
            else:
                stamps[agent] = expected.timestamp
        if late:
            agents = sorted(set(late))
            return AssetCheckResult(
                passed=False,
                description=(
                    f"no {condition}/expected_success for agent {agents[0]!r} with these natural trials' "
                    "prereg_sha256 and agent registration was materialized before them; materialize "
                    "expected_success first (the prediction must be fixed before observing end-to-end success)"
                ),
                metadata={"agents": ", ".join(agents), "condition": condition},
            )
        return AssetCheckResult(passed=True, metadata={"condition": condition,
                                                       **{f"expected_success_at/{a}": t for a, t in stamps.items()}})

    @asset_check(asset=natural, name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description=f"{condition}: exactly the pre-registered m_0 natural rollouts, no key twice.")
    def natural_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                             natural_trials: pd.DataFrame) -> AssetCheckResult:
        runner = study.run().runner
        return _count_check(study, natural_trials,
                            [s for k in _keys(context) for s in runner.natural_specs(k["agent"], k["task"], condition)])

    @asset_check(asset=estimates, name=STAGES_COMPLETE, blocking=True, partitions_def=AGENTS,
                 description=f"{condition}: every stage of every task has q̂ from the pre-registered m_i trials, with "
                             "q̂ and its interval inside [0, 1], before P_expected is composed from them.")
    def stage_estimates_complete(context: AssetCheckExecutionContext, study: StudyResource,
                                 stage_estimates: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        agents = sorted(set(stage_estimates["agent"])) if len(stage_estimates) else [""]
        wanted = {(a, condition, t.name, s.name) for a in agents for t in run.design.tasks for s in t.stages}
        got = set(zip(stage_estimates["agent"], stage_estimates["condition"], stage_estimates["task"],
                      stage_estimates["stage"]))
        missing = sorted(wanted - got)
        probabilities = stage_estimates[["q_hat", "q_ci_low", "q_ci_high"]].to_numpy()
        outside = int(((probabilities < 0) | (probabilities > 1)).any(axis=1).sum())
        short = int((stage_estimates["m"] != run.study.trials.checkpoint).sum())
        ok = not missing and not outside and not short
        return AssetCheckResult(
            passed=ok,
            description=None if ok else (f"{len(missing)} stage(s) without an estimate (e.g. {missing[:3]}), "
                                         f"{outside} outside [0, 1], {short} not from m_i trials"),
            metadata={"stages": len(got), "missing": len(missing), "outside_unit_interval": outside},
        )

    return [expected_success_precedes_natural_trials, natural_trial_counts, stage_estimates_complete]


def _registration_check(asset: str, partitions_def: PartitionsDefinition) -> AssetChecksDefinition:
    @asset_check(asset=AssetKey.from_user_string(asset), name=REGISTERED, blocking=True, partitions_def=partitions_def,
                 description="Every row's prereg_sha256 is the stored pre-registration's (OUT/preregistration.json) "
                             "and its agent_sha256 the stored registration of its agent (OUT/registrations/<agent>.json).")
    def hashes_match_stored_registration(context: AssetCheckExecutionContext, study: StudyResource) -> AssetCheckResult:
        wrong = registration_problems(study.run().out_dir, asset, context.partition_keys)
        return AssetCheckResult(passed=not wrong, description="; ".join(wrong[:5]) or None,
                                metadata={"partitions": len(context.partition_keys), "mismatched": len(wrong)})

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
    path = Path(out_dir) / "preregistration.json"
    return json.loads(path.read_text()).get("prereg_sha256") if path.is_file() else None


def _count_check(study: StudyResource, trials: pd.DataFrame, specs: list) -> AssetCheckResult:
    run = study.run()
    expected = {s.key for s in specs}
    got = list(trials["trial_key"]) if len(trials) else []
    stamped = bool(len(trials)) and bool((trials["prereg_sha256"] == run.prereg_sha256).all())
    missing, extra = expected - set(got), set(got) - expected
    duplicates = len(got) - len(set(got))
    ok = not missing and not extra and not duplicates and stamped
    return AssetCheckResult(
        passed=bool(ok),
        description=None if ok else f"{len(missing)} missing, {len(extra)} unexpected, {duplicates} duplicated trial keys",
        metadata={"expected": len(expected), "rows": len(got), "missing": len(missing), "duplicates": duplicates},
    )
