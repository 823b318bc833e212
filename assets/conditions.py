"""One condition's own branch of assets (keys `<condition>/<name>`): stage estimates -> expected success ->
natural trials -> observed success -> horizon residuals."""

import pandas as pd
from dagster import (
    AssetDep, AssetExecutionContext, AssetIn, AssetKey, AssetsDefinition, Failure, MetadataValue,
    MultiPartitionsDefinition, Output, asset,
)

from assets.common import (
    BY_AGENT, ESTIMATES, SANDBOXES, SINGLE_RUN, STALE, TRIALS, asset_metadata, data_version, forest_plot_metadata, gated, in_parallel,
    of_agent, pair_key, per_agent_tables, registered, residual_markdown, run_pairs, sibling, stamp, versioned_output,
)
from assets.evidence import prior_expected_success
from assets.partitions import agents_of
from hrbench import analysis
from hrbench.harness.records import records_table
from hrbench.study_run import StudyRun
from resources.study import StudyResource

def condition_branch(condition: str, agent_task: MultiPartitionsDefinition, version: str) -> list[AssetsDefinition]:
    """One condition's own branch: stage estimates → expected → natural rollouts → observed → residuals."""
    prefix = [condition]
    per_agent = dict(key_prefix=prefix, partitions_def=agents_of(agent_task), code_version=version, backfill_policy=SINGLE_RUN,
                     automation_condition=STALE)

    def key(name: str) -> AssetKey:
        return AssetKey([condition, name])

    def estimands(run: StudyRun) -> list[analysis.Estimand]:
        return [analysis.Estimand.declared(run.study, condition)]

    @asset(name="stage_estimates", group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT)},
           **per_agent)
    def stage_estimates(context: AssetExecutionContext, study: StudyResource,
                        checkpoint_trials: pd.DataFrame) -> Output[dict]:
        """q̂_i with Wilson intervals per task and stage, from this condition's checkpoint protocol."""
        run = study.run()
        tables, regs = per_agent_tables(context, run, lambda a: analysis.stage_estimates(
            run.design, a, of_agent(checkpoint_trials, a), estimands(run)))
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, protocol=run.study.checkpoint_protocol(condition).protocol_hash()))

    @asset(name="expected_success", group_name=ESTIMATES, ins={"stage_estimates": AssetIn(key=key("stage_estimates"))},
           **per_agent)
    def expected_success(context: AssetExecutionContext, study: StudyResource,
                         stage_estimates: pd.DataFrame) -> Output[dict]:
        """P_expected(I) per task: this condition's prediction, fixed before any of its natural rollouts."""
        run = study.run()
        tables, regs = per_agent_tables(context, run, lambda a: analysis.expected_success(
            run.design, a, of_agent(stage_estimates, a)))
        everything = pd.concat(tables.values(), ignore_index=True)
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, mean_p_expected=float(everything["p_expected"].mean())))

    @asset(key_prefix=prefix, name="natural_trials", partitions_def=agent_task, group_name=TRIALS,
           code_version=version, backfill_policy=SINGLE_RUN, automation_condition=STALE, pool=SANDBOXES,
           deps=[AssetDep(key("expected_success"), partition_mapping=BY_AGENT)])
    def natural_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_0 natural end-to-end rollouts of this condition per task (stages passed, stop stage).

        Runs no rollout before this condition's P_expected for this agent is fixed under the same
        pre-registration and agent registration (so nothing is observed, or journaled for reuse, ahead
        of the prediction): it then stores an empty table and the blocking check
        `expected_success_precedes_natural_trials` fails the run."""
        run = study.run()
        pairs = run_pairs(context)
        gated(run, key("natural_trials").to_user_string(), sorted({a for a, _ in pairs}))
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        expected = {a: prior_expected_success(context.instance, sibling(context.asset_key, "expected_success"), a,
                                              run.prereg_sha256, regs[a].agent_sha256)
                    for a in regs}
        refused = sorted(a for a, e in expected.items() if e is None)
        for agent in refused:
            context.log.error(f"no {condition} expected_success for agent {agent!r} under this pre-registration and "
                              "registration: no natural rollout was run")

        def one(pair: tuple[str, str]) -> pd.DataFrame:
            records = [] if pair[0] in refused else run.runner.run_natural_trials(*pair, condition)
            return stamp(records_table(records), regs[pair[0]])

        frames = in_parallel(run, one, pairs)
        tables = {pair_key(*p): f for p, f in zip(pairs, frames)}
        everything = pd.concat(frames, ignore_index=True)
        extra = {"refused": f"expected_success missing for {refused}"} if refused else {}
        stamps = {f"expected_success_at/{a}": MetadataValue.timestamp(e.timestamp)
                  for a, e in expected.items() if e is not None}
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, passed=int(everything["passed"].sum()) if len(everything) else 0,
            missing_trials=analysis.missing_trials(everything), **stamps, **extra))

    @asset(name="observed_success", group_name=ESTIMATES, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
    }, **per_agent)
    def observed_success(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                         natural_trials: pd.DataFrame) -> Output[dict]:
        """r̂_i per stage and P̂_observed(I) per task from this condition's natural rollouts."""
        run = study.run()
        tables, regs = per_agent_tables(context, run, lambda a: analysis.observed_success(
            run.design, a, of_agent(checkpoint_trials, a), of_agent(natural_trials, a), estimands(run)))
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(run, tables, regs))

    @asset(name="horizon_residuals", group_name=ESTIMATES, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
        "expected_success": AssetIn(key=key("expected_success")),
    }, deps=[key("observed_success")], **per_agent)
    def horizon_residuals(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame, expected_success: pd.DataFrame) -> Output[dict]:
        """Γ_H(I) = ln(P_expected(I) / P_observed(I)) per task, family and overall, from the registered prediction."""
        run = study.run()
        try:
            tables, regs = per_agent_tables(context, run, lambda a: analysis.horizon_residuals(
                run.design, a, of_agent(checkpoint_trials, a), of_agent(natural_trials, a), of_agent(expected_success, a),
                estimands(run)))
        except analysis.ExpectedMismatch as exc:
            raise Failure(str(exc)) from exc
        everything = pd.concat(tables.values(), ignore_index=True)
        headline = everything[everything["scope"] != "task"]
        extra = {}
        if len(tables) == 1:
            overall = headline[headline["scope"] == "all"].iloc[0]
            # an undefined Γ or a missing interval (too few tasks for one) is left out, not shown as a number
            extra = {k: float(overall[k]) for k in ("gamma", "ci_low", "ci_high")
                     if overall[k] is not None and not pd.isna(overall[k])}
            extra = {("gamma_all" if k == "gamma" else k): v for k, v in extra.items()}
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, residuals=MetadataValue.md(residual_markdown(headline)), forest_plot=forest_plot_metadata(everything),
            **extra))

    return [stage_estimates, expected_success, natural_trials, observed_success, horizon_residuals]