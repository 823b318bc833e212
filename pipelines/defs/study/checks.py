"""Asset checks that enforce the order and completeness of evidence (DESIGN §8)."""


import pandas as pd
from dagster import (
    AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, MultiPartitionsDefinition, asset_check,
)

from pipelines.defs.study.evidence import latest_materialization, metadata_text, prior_expected_success
from pipelines.defs.study.partitions import AGENTS
from resources.study import StudyResource

EXPECTED_BEFORE_OBSERVED = "expected_success_precedes_natural_trials"
TRIAL_COUNTS = "trial_counts_match_preregistration"
STAGES_COMPLETE = "every_stage_estimated_within_unit_interval"


def build_study_checks(agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    @asset_check(asset="natural_trials", name=EXPECTED_BEFORE_OBSERVED, blocking=True, partitions_def=agent_task,
                 description="P_expected must be materialized, under the same pre-registration, before any "
                             "natural rollout of that agent is used (evidence order, DESIGN §8).")
    def expected_success_precedes_natural_trials(context: AssetCheckExecutionContext) -> AssetCheckResult:
        key = context.partition_key
        agent = key.keys_by_dimension["agent"]  # type: ignore[attr-defined]
        natural = latest_materialization(context.instance, "natural_trials", str(key))
        prereg = metadata_text(natural, "prereg_sha256")
        expected = prior_expected_success(context.instance, agent, prereg, natural.timestamp if natural else None)
        if expected is None:
            return AssetCheckResult(
                passed=False,
                description=(
                    f"no expected_success for agent {agent!r} with prereg_sha256 {str(prereg)[:12]}… was "
                    "materialized before these natural trials; materialize expected_success first "
                    "(the prediction must be fixed before observing end-to-end success)"
                ),
                metadata={"agent": agent, "prereg_sha256": str(prereg)},
            )
        return AssetCheckResult(passed=True, metadata={
            "agent": agent, "prereg_sha256": str(prereg), "expected_success_timestamp": expected.timestamp,
        })

    @asset_check(asset="checkpoint_trials", name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description="Every stage has exactly the pre-registered m_i checkpoint trials, no key twice.")
    def checkpoint_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                                checkpoint_trials: pd.DataFrame) -> AssetCheckResult:
        return _count_check(context, study, checkpoint_trials, "checkpoint")

    @asset_check(asset="natural_trials", name=TRIAL_COUNTS, blocking=True, partitions_def=agent_task,
                 description="Exactly the pre-registered m_0 natural rollouts per condition, no key twice.")
    def natural_trial_counts(context: AssetCheckExecutionContext, study: StudyResource,
                             natural_trials: pd.DataFrame) -> AssetCheckResult:
        return _count_check(context, study, natural_trials, "natural")

    @asset_check(asset="stage_estimates", name=STAGES_COMPLETE, blocking=True, partitions_def=AGENTS,
                 description="Every stage of every task has q̂ from the pre-registered m_i trials, with q̂ and its "
                             "interval inside [0, 1], before P_expected is composed from them.")
    def stage_estimates_complete(context: AssetCheckExecutionContext, study: StudyResource,
                                 stage_estimates: pd.DataFrame) -> AssetCheckResult:
        run = study.run()
        wanted = {(c, t.name, s.name) for c in run.study.conditions for t in run.tasks for s in t.stages}
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

    return [expected_success_precedes_natural_trials, checkpoint_trial_counts, natural_trial_counts,
            stage_estimates_complete]


def _count_check(context: AssetCheckExecutionContext, study: StudyResource, trials: pd.DataFrame,
                 kind: str) -> AssetCheckResult:
    run = study.run()
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    specs = (run.checkpoint_specs if kind == "checkpoint" else run.natural_specs)(keys["agent"], keys["task"])
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
