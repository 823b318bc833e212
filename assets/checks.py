"""Asset checks that enforce the order and completeness of evidence (DESIGN §8)."""


import pandas as pd
from dagster import (
    AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, AssetKey, MultiPartitionsDefinition,
    asset_check,
)

from assets.evidence import latest_materialization, metadata_text, prior_expected_success
from pipelines.partitions import AGENTS
from resources.study import StudyResource

EXPECTED_BEFORE_OBSERVED = "expected_success_precedes_natural_trials"
TRIAL_COUNTS = "trial_counts_match_preregistration"
STAGES_COMPLETE = "every_stage_estimated_within_unit_interval"


def build_study_checks(agent_task: MultiPartitionsDefinition, conditions: list[str]) -> list[AssetChecksDefinition]:
    """The blocking checks of the shared checkpoint trials and of every condition's branch."""

    @asset_check(asset="checkpoint_trials", name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description="Every checkpoint unit of every distinct protocol has exactly the pre-registered m_i "
                             "trials, no key twice (shared protocols run once).")
    def checkpoint_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                                checkpoint_trials: pd.DataFrame) -> AssetCheckResult:
        keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
        specs = study.run().runner.checkpoint_specs(keys["agent"], keys["task"])
        return _count_check(study, checkpoint_trials, specs)

    return [checkpoint_trial_counts] + [check for c in conditions for check in _condition_checks(c, agent_task)]


def _condition_checks(condition: str, agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    natural = AssetKey([condition, "natural_trials"])
    estimates = AssetKey([condition, "stage_estimates"])

    @asset_check(asset=natural, name=EXPECTED_BEFORE_OBSERVED, blocking=True, partitions_def=agent_task,
                 description=f"{condition}: P_expected must be materialized, under the same pre-registration, before "
                             "any natural rollout of that agent is used (evidence order, DESIGN §8).")
    def expected_success_precedes_natural_trials(context: AssetCheckExecutionContext) -> AssetCheckResult:
        key = context.partition_key
        agent = key.keys_by_dimension["agent"]  # type: ignore[attr-defined]
        materialized = latest_materialization(context.instance, natural, str(key))
        prereg = metadata_text(materialized, "prereg_sha256")
        expected = prior_expected_success(context.instance, agent, prereg,
                                          materialized.timestamp if materialized else None, condition)
        if expected is None:
            return AssetCheckResult(
                passed=False,
                description=(
                    f"no {condition}/expected_success for agent {agent!r} with prereg_sha256 {str(prereg)[:12]}… was "
                    "materialized before these natural trials; materialize expected_success first "
                    "(the prediction must be fixed before observing end-to-end success)"
                ),
                metadata={"agent": agent, "condition": condition, "prereg_sha256": str(prereg)},
            )
        return AssetCheckResult(passed=True, metadata={
            "agent": agent, "condition": condition, "prereg_sha256": str(prereg),
            "expected_success_timestamp": expected.timestamp,
        })

    @asset_check(asset=natural, name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description=f"{condition}: exactly the pre-registered m_0 natural rollouts, no key twice.")
    def natural_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                             natural_trials: pd.DataFrame) -> AssetCheckResult:
        keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
        specs = study.run().runner.natural_specs(keys["agent"], keys["task"], condition)
        return _count_check(study, natural_trials, specs)

    @asset_check(asset=estimates, name=STAGES_COMPLETE, blocking=True, partitions_def=AGENTS,
                 description=f"{condition}: every stage of every task has q̂ from the pre-registered m_i trials, with "
                             "q̂ and its interval inside [0, 1], before P_expected is composed from them.")
    def stage_estimates_complete(context: AssetCheckExecutionContext, study: StudyResource,
                                 stage_estimates: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        wanted = {(condition, t.name, s.name) for t in run.design.tasks for s in t.stages}
        got = set(zip(stage_estimates["condition"], stage_estimates["task"], stage_estimates["stage"]))
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
