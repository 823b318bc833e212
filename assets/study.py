"""The asset graph of one study (DESIGN §8): shared checkpoint trials, one branch per condition,
then the contrasts, the sensitivity sweep and the report.

Assets are thin: each calls the core (`StudyRun`: design, stores, runner; `hrbench.analysis`) and returns a
table with metadata. Run assets are partitioned agent x task; aggregates by agent.
"""


import pandas as pd
from dagster import (
    AssetDep, AssetExecutionContext, AssetIn, AssetKey, AssetsDefinition, Failure,
    MaterializeResult, MetadataValue, MultiPartitionsDefinition, MultiToSingleDimensionPartitionMapping, Output, asset,
)

from hrbench import analysis
from hrbench.harness.records import records_table
from hrbench.protocol import StudyError
from hrbench.report.context import figure_metadata
from hrbench.report.html import study_report as write_study_report
from hrbench.report.summary import write_summary
from assets.evidence import prior_expected_success
from pipelines.partitions import AGENTS
from resources.study import StudyResource

BY_AGENT = MultiToSingleDimensionPartitionMapping(partition_dimension_name="agent")


def _agent_task(context: AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys["agent"], keys["task"]


def _meta(run, frame: pd.DataFrame, **extra) -> dict:
    return {"prereg_sha256": run.prereg_sha256, "rows": len(frame), **extra}


def build_study_assets(agent_task: MultiPartitionsDefinition, conditions: list[str],
                       prefix_rollouts: bool = False) -> list[AssetsDefinition]:
    """The assets, bound to the study's task partitions and conditions (each condition its own branch).

    `prefix_rollouts`: a `matched` checkpoint protocol needs recorded transcripts, so rollouts that
    only provide them run before the checkpoint trials (their outcomes are never observed as P_obs).
    """

    @asset
    def task_catalog(study: StudyResource) -> Output[pd.DataFrame]:
        """Every stage of every task in the study: family, structure, dependencies, work W, depth H_dep."""
        run = study.run()
        frame = run.design.catalog()
        return Output(frame, metadata=_meta(run, frame, tasks=len(run.design.tasks)))

    @asset(deps=[task_catalog])
    def verifier_audit(study: StudyResource) -> Output[pd.DataFrame]:
        """Reference = 1, nothing = 0, key step removed = stage fails, for every stage; fails the run otherwise."""
        run = study.run()
        rows = run.runner.audit()
        frame = run.design.stamp(pd.DataFrame([r.model_dump() for r in rows]))
        bad = [r for r in rows if not r.ok]
        if bad:
            lines = "\n".join(f"  {r.task}/{r.stage}: {r.problem}" for r in bad)
            raise Failure(f"verifier audit failed for {len(bad)} stage(s):\n{lines}")
        return Output(frame, metadata=_meta(run, frame, stages_audited=len(rows)))

    @asset(deps=[verifier_audit])
    def preregistration(study: StudyResource) -> Output[pd.DataFrame]:
        """The frozen protocol: canonical JSON of the study and task contents, and its SHA-256."""
        run = study.run()
        try:
            path = run.write_preregistration()
        except StudyError as exc:
            raise Failure(str(exc)) from exc
        frame = pd.DataFrame([{"prereg_sha256": run.prereg_sha256, "study": run.study.name,
                               "version": run.study.version, "path": str(path)}])
        return Output(frame, metadata=_meta(run, frame, path=str(path)))

    @asset(partitions_def=agent_task, deps=[preregistration])
    def prefix_rollouts(context: AssetExecutionContext, study: StudyResource) -> Output[pd.DataFrame]:
        """Rollouts under full history whose transcripts `matched` checkpoints start from (not observed as P_obs)."""
        run = study.run()
        agent, task = _agent_task(context)
        frame = records_table(run.runner.run_prefix_rollouts(agent, task))
        return Output(frame, metadata=_meta(run, frame, harness_errors=analysis.harness_errors(frame)))

    @asset(partitions_def=agent_task, deps=[preregistration, *([prefix_rollouts] if prefix_rollouts else [])])
    def checkpoint_trials(context: AssetExecutionContext, study: StudyResource) -> Output[pd.DataFrame]:
        """m_i trials of each stage from its declared checkpoint e_{i-1}, one row per trial, for every
        distinct checkpoint protocol (keyed by its hash: conditions sharing a protocol share its trials)."""
        run = study.run()
        agent, task = _agent_task(context)
        frame = records_table(run.runner.run_checkpoint_trials(agent, task))
        return Output(frame, metadata=_meta(run, frame, passed=int(frame["passed"].sum()),
                                            harness_errors=analysis.harness_errors(frame),
                                            protocols=len(run.runner.protocol_labels())))

    branches = [asset for condition in conditions for asset in _condition_branch(condition, agent_task)]
    natural_ins = {f"natural_{c}": AssetIn(key=AssetKey([c, "natural_trials"]), partition_mapping=BY_AGENT)
                   for c in conditions}

    @asset(partitions_def=AGENTS, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins},
           deps=[AssetKey([c, "horizon_residuals"]) for c in conditions])
    def intervention_contrasts(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                               **natural: pd.DataFrame) -> Output[pd.DataFrame]:
        """ΔΓ(I) = Γ(baseline) − Γ(I) per condition, task, family and overall, paired over tasks."""
        run = study.run()
        frame = analysis.intervention_contrasts(run.design, context.partition_key, checkpoint_trials,
                                                pd.concat(natural.values(), ignore_index=True))
        return Output(frame, metadata=_meta(run, frame))

    @asset(partitions_def=AGENTS, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
                                       "natural_trials": AssetIn(key=AssetKey(["baseline", "natural_trials"]),
                                                                 partition_mapping=BY_AGENT)},
           deps=[AssetKey(["baseline", "horizon_residuals"])])
    def sensitivity_sweep(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """Γ of the baseline under every admissible protocol, baseline model, zero rule and decomposition."""
        run = study.run()
        frame = analysis.sensitivity_sweep(run.design, context.partition_key, checkpoint_trials, natural_trials)
        verdicts = analysis.sensitivity_verdicts(frame)
        overall = verdicts[verdicts["scope"] == "all"].iloc[0]
        return Output(frame, metadata=_meta(run, frame, choices=int(overall["n_choices"]),
                                            verdict_all=str(overall["verdict"])))

    @asset(partitions_def=AGENTS, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins})
    def resource_accounting(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                            **natural: pd.DataFrame) -> Output[pd.DataFrame]:
        """Turns, tokens, wall time and cost per condition and trial kind, side by side."""
        run = study.run()
        frame = analysis.resource_accounting(run.design, context.partition_key, checkpoint_trials,
                                             pd.concat(natural.values(), ignore_index=True))
        return Output(frame, metadata=_meta(run, frame))

    # A study of the baseline alone has no intervention to contrast: no contrasts asset.
    interventions = len(conditions) > 1
    report_ins = {f"residuals_{c}": AssetIn(key=AssetKey([c, "horizon_residuals"])) for c in conditions}
    report_ins["sensitivity_sweep"] = AssetIn()
    report_ins["resource_accounting"] = AssetIn()
    if interventions:
        report_ins["intervention_contrasts"] = AssetIn()

    @asset(ins=report_ins)
    def study_report(study: StudyResource, sensitivity_sweep: pd.DataFrame, resource_accounting: pd.DataFrame,
                     **tables_in: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residuals per condition, contrasts, sensitivity, lineage."""
        run = study.run()
        contrasts = tables_in.pop("intervention_contrasts", pd.DataFrame())
        tables = analysis.current_tables(run.design, pd.concat(tables_in.values(), ignore_index=True),
                                         contrasts, sensitivity_sweep, resource_accounting)
        summary = write_summary(run.design, tables, run.stores.summary_path)
        report = write_study_report(run.design, tables, run.stores.report_path, run.stores)
        return MaterializeResult(metadata={
            "prereg_sha256": run.prereg_sha256, "report": str(report.path), "summary": str(summary),
            "rows": len(tables.residuals),
            **{k: MetadataValue.md(v) for k, v in figure_metadata(report.figures).items()},
        })

    return [task_catalog, verifier_audit, preregistration, *([prefix_rollouts] if prefix_rollouts else []),
            checkpoint_trials, *branches,
            *([intervention_contrasts] if interventions else []), sensitivity_sweep, resource_accounting, study_report]


def _condition_branch(condition: str, agent_task: MultiPartitionsDefinition) -> list[AssetsDefinition]:
    """One condition's own branch: stage estimates → expected → natural rollouts → observed → residuals."""
    prefix = [condition]

    def key(name: str) -> AssetKey:
        return AssetKey([condition, name])

    @asset(key_prefix=prefix, name="stage_estimates", partitions_def=AGENTS,
           ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT)})
    def stage_estimates(context: AssetExecutionContext, study: StudyResource,
                        checkpoint_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """q̂_i with Wilson intervals per task and stage, from this condition's checkpoint protocol."""
        run = study.run()
        frame = analysis.stage_estimates(run.design, context.partition_key, checkpoint_trials,
                                         [analysis.Estimand.declared(run.study, condition)])
        return Output(frame, metadata=_meta(run, frame, protocol=run.study.checkpoint_protocol(condition).protocol_hash()))

    @asset(key_prefix=prefix, name="expected_success", partitions_def=AGENTS,
           ins={"stage_estimates": AssetIn(key=key("stage_estimates"))})
    def expected_success(context: AssetExecutionContext, study: StudyResource,
                         stage_estimates: pd.DataFrame) -> Output[pd.DataFrame]:
        """P_expected(I) per task: this condition's prediction, fixed before any of its natural rollouts."""
        run = study.run()
        frame = analysis.expected_success(run.design, context.partition_key, stage_estimates)
        return Output(frame, metadata=_meta(run, frame, mean_p_expected=float(frame["p_expected"].mean())))

    @asset(key_prefix=prefix, name="natural_trials", partitions_def=agent_task,
           deps=[AssetDep(key("expected_success"), partition_mapping=BY_AGENT)])
    def natural_trials(context: AssetExecutionContext, study: StudyResource) -> Output[pd.DataFrame]:
        """m_0 natural end-to-end rollouts of this condition per task (stages passed, stop stage).

        Runs no rollout before this condition's P_expected for this agent is fixed under the same
        pre-registration (so nothing is observed, or journaled for reuse, ahead of the prediction): it
        then stores an empty table and the blocking check `expected_success_precedes_natural_trials` fails."""
        run = study.run()
        agent, task = _agent_task(context)
        expected = prior_expected_success(context.instance, agent, run.prereg_sha256, condition=condition)
        if expected is None:
            context.log.error(f"no {condition} expected_success for agent {agent!r} under this pre-registration: "
                              "no natural rollout was run")
            frame = records_table([])
            return Output(frame, metadata=_meta(run, frame, refused="expected_success missing"))
        frame = records_table(run.runner.run_natural_trials(agent, task, condition))
        return Output(frame, metadata=_meta(run, frame, passed=int(frame["passed"].sum()),
                                            harness_errors=analysis.harness_errors(frame),
                                            expected_success_timestamp=expected.timestamp))

    @asset(key_prefix=prefix, name="observed_success", partitions_def=AGENTS, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
    })
    def observed_success(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                         natural_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """r̂_i per stage and P̂_observed(I) per task from this condition's natural rollouts."""
        run = study.run()
        frame = analysis.observed_success(run.design, context.partition_key, checkpoint_trials, natural_trials,
                                          [analysis.Estimand.declared(run.study, condition)])
        return Output(frame, metadata=_meta(run, frame))

    @asset(key_prefix=prefix, name="horizon_residuals", partitions_def=AGENTS, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
        "expected_success": AssetIn(key=key("expected_success")),
    }, deps=[key("observed_success")])
    def horizon_residuals(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame, expected_success: pd.DataFrame) -> Output[pd.DataFrame]:
        """Γ_H(I) = ln(P_expected(I) / P_observed(I)) per task, family and overall, from the registered prediction."""
        run = study.run()
        try:
            frame = analysis.horizon_residuals(run.design, context.partition_key, checkpoint_trials, natural_trials,
                                               expected_success, [analysis.Estimand.declared(run.study, condition)])
        except analysis.ExpectedMismatch as exc:
            raise Failure(str(exc)) from exc
        overall = frame[frame["scope"] == "all"].iloc[0]
        return Output(frame, metadata=_meta(run, frame, gamma_all=float(overall["gamma"]),
                                            ci_low=float(overall["ci_low"]), ci_high=float(overall["ci_high"])))

    return [stage_estimates, expected_success, natural_trials, observed_success, horizon_residuals]
