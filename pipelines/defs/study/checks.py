"""Asset checks that enforce the order and completeness of evidence (DESIGN §8).

Checks on partitioned assets carry the asset's partitions (a preview API; warnings from it are
silenced here only) and, in a run over many partitions, judge every partition of the run.
"""


import json
import warnings
from pathlib import Path

import pandas as pd
from dagster import (
    AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, MultiPartitionsDefinition, PartitionsDefinition,
    PreviewWarning, asset_check,
)

from hrbench.preregistration import load_registration
from hrbench.storage import LocalTableStore
from pipelines.defs.study.evidence import latest_materialization, metadata_for_agent, metadata_text, prior_expected_success
from pipelines.defs.study.partitions import AGENTS
from resources.study import StudyResource

EXPECTED_BEFORE_OBSERVED = "expected_success_precedes_natural_trials"
TRIAL_COUNTS = "trial_counts_match_preregistration"
STAGES_COMPLETE = "every_stage_estimated_within_unit_interval"
REGISTERED = "hashes_match_stored_registration"
REGISTERED_ASSETS = ("checkpoint_trials", "natural_trials", "stage_estimates", "expected_success", "observed_success",
                     "horizon_residuals")


def _keys(context: AssetCheckExecutionContext) -> list[dict[str, str]]:
    return [k.keys_by_dimension for k in context.partition_keys]  # type: ignore[attr-defined]


def build_study_checks(agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        return _build(agent_task)


def _build(agent_task: MultiPartitionsDefinition) -> list[AssetChecksDefinition]:
    @asset_check(asset="natural_trials", name=EXPECTED_BEFORE_OBSERVED, blocking=True, partitions_def=agent_task,
                 description="P_expected must be materialized, under the same pre-registration and agent registration, "
                             "before any natural rollout of that agent is used (evidence order, DESIGN §8).")
    def expected_success_precedes_natural_trials(context: AssetCheckExecutionContext) -> AssetCheckResult:
        late, stamps = [], {}
        for key in context.partition_keys:
            agent = key.split("|")[0]
            natural = latest_materialization(context.instance, "natural_trials", key)
            prereg = metadata_text(natural, "prereg_sha256")
            expected = prior_expected_success(context.instance, agent, prereg,
                                              metadata_for_agent(natural, "agent_sha256", agent),
                                              natural.timestamp if natural else None)
            if expected is None:
                late.append(agent)
            else:
                stamps[agent] = expected.timestamp
        if late:
            agents = sorted(set(late))
            return AssetCheckResult(
                passed=False,
                description=(
                    f"no expected_success for agent {agents[0]!r} with these natural trials' prereg_sha256 and "
                    "agent registration was materialized before them; materialize expected_success first "
                    "(the prediction must be fixed before observing end-to-end success)"
                ),
                metadata={"agents": ", ".join(agents)},
            )
        return AssetCheckResult(passed=True, metadata={f"expected_success_at/{a}": t for a, t in stamps.items()})

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
        agents = sorted(set(stage_estimates["agent"])) if len(stage_estimates) else [""]
        wanted = {(a, c, t.name, s.name) for a in agents for c in run.study.conditions for t in run.tasks
                  for s in t.stages}
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

    registration_checks = [_registration_check(name, agent_task if name.endswith("_trials") else AGENTS)
                           for name in REGISTERED_ASSETS]
    return [expected_success_precedes_natural_trials, checkpoint_trial_counts, natural_trial_counts,
            stage_estimates_complete, *registration_checks]


def _registration_check(asset: str, partitions_def: PartitionsDefinition) -> AssetChecksDefinition:
    @asset_check(asset=asset, name=REGISTERED, blocking=True, partitions_def=partitions_def,
                 description="Every row's prereg_sha256 is the stored pre-registration's (OUT/preregistration.json) "
                             "and its agent_sha256 the stored registration of its agent (OUT/registrations/<agent>.json).")
    def hashes_match_stored_registration(context: AssetCheckExecutionContext, study: StudyResource) -> AssetCheckResult:
        wrong = registration_problems(study.run().out_dir, asset, context.partition_keys)
        return AssetCheckResult(passed=not wrong, description="; ".join(wrong[:5]) or None,
                                metadata={"partitions": len(context.partition_keys), "mismatched": len(wrong)})

    return hashes_match_stored_registration


def registration_problems(out_dir: Path, asset: str, partition_keys: list[str]) -> list[str]:
    """Partitions of `asset` whose rows carry a prereg_sha256 or agent_sha256 that no stored record has."""
    store = LocalTableStore(out_dir)
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


def _count_check(context: AssetCheckExecutionContext, study: StudyResource, trials: pd.DataFrame,
                 kind: str) -> AssetCheckResult:
    run = study.run()
    expected: set[str] = set()
    for keys in _keys(context):
        specs = (run.checkpoint_specs if kind == "checkpoint" else run.natural_specs)(keys["agent"], keys["task"])
        expected |= {s.key for s in specs}
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
