"""The asset graph of one study (DESIGN §8), for the product baseline.

Assets are thin: each calls the core (`StudyRun`, `hrbench.analysis`) and returns a
table with metadata. Run assets are partitioned agent x task; aggregates by agent.
"""


import pandas as pd
from dagster import (
    AssetDep, AssetExecutionContext, AssetIn, AssetsDefinition, Failure,
    MaterializeResult, MultiPartitionsDefinition, MultiToSingleDimensionPartitionMapping, Output, asset,
)

from hrbench import analysis
from hrbench.protocol import StudyError
from hrbench.report.html import write_report
from hrbench.report.summary import write_summary
from pipelines.defs.study.evidence import prior_expected_success
from pipelines.defs.study.partitions import AGENTS
from resources.study import StudyResource

BY_AGENT = MultiToSingleDimensionPartitionMapping(partition_dimension_name="agent")


def _agent_task(context: AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys["agent"], keys["task"]


def _meta(run, frame: pd.DataFrame, **extra) -> dict:
    return {"prereg_sha256": run.prereg_sha256, "rows": len(frame), **extra}


def build_study_assets(agent_task: MultiPartitionsDefinition) -> list[AssetsDefinition]:
    """The assets, bound to the study's task partitions."""

    @asset
    def task_catalog(study: StudyResource) -> Output[pd.DataFrame]:
        """Every stage of every task in the study: family, structure, dependencies, work W, depth H_dep."""
        run = study.run()
        frame = run.catalog()
        return Output(frame, metadata=_meta(run, frame, tasks=len(run.tasks)))

    @asset(deps=[task_catalog])
    def verifier_audit(study: StudyResource) -> Output[pd.DataFrame]:
        """Reference = 1, nothing = 0, key step removed = stage fails, for every stage; fails the run otherwise."""
        run = study.run()
        rows = run.audit()
        frame = run.stamp(pd.DataFrame([r.model_dump() for r in rows]))
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
    def checkpoint_trials(context: AssetExecutionContext, study: StudyResource) -> Output[pd.DataFrame]:
        """m_i trials of each stage from its declared checkpoint e_{i-1}, one row per trial."""
        run = study.run()
        agent, task = _agent_task(context)
        frame = run.records_table(run.run_checkpoint_trials(agent, task))
        return Output(frame, metadata=_meta(run, frame, passed=int(frame["passed"].sum()),
                                            harness_errors=analysis.harness_errors(frame)))

    @asset(partitions_def=AGENTS, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT)})
    def stage_estimates(context: AssetExecutionContext, study: StudyResource,
                        checkpoint_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """q̂_i with Wilson intervals per task and stage."""
        run = study.run()
        frame = analysis.stage_estimates(run, context.partition_key, checkpoint_trials)
        return Output(frame, metadata=_meta(run, frame))

    @asset(partitions_def=AGENTS)
    def expected_success(context: AssetExecutionContext, study: StudyResource,
                         stage_estimates: pd.DataFrame) -> Output[pd.DataFrame]:
        """P_expected per task: the pre-registered prediction, fixed before any natural rollout."""
        run = study.run()
        frame = analysis.expected_success(run, context.partition_key, stage_estimates)
        return Output(frame, metadata=_meta(run, frame, mean_p_expected=float(frame["p_expected"].mean())))

    @asset(partitions_def=agent_task, deps=[AssetDep(expected_success, partition_mapping=BY_AGENT)])
    def natural_trials(context: AssetExecutionContext, study: StudyResource) -> Output[pd.DataFrame]:
        """m_0 natural end-to-end rollouts per task, one row per rollout (stages passed, stop stage).

        Runs no rollout before P_expected of this agent is fixed under the same pre-registration (so
        nothing is observed, or journaled for reuse, ahead of the prediction): it then stores an empty
        table and the blocking check `expected_success_precedes_natural_trials` fails the run."""
        run = study.run()
        agent, task = _agent_task(context)
        expected = prior_expected_success(context.instance, agent, run.prereg_sha256)
        if expected is None:
            context.log.error(f"no expected_success for agent {agent!r} under this pre-registration: "
                              "no natural rollout was run")
            frame = run.records_table([])
            return Output(frame, metadata=_meta(run, frame, refused="expected_success missing"))
        frame = run.records_table(run.run_natural_trials(agent, task))
        return Output(frame, metadata=_meta(run, frame, passed=int(frame["passed"].sum()),
                                            harness_errors=analysis.harness_errors(frame),
                                            expected_success_timestamp=expected.timestamp))

    @asset(partitions_def=AGENTS, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(partition_mapping=BY_AGENT),
    })
    def observed_success(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                         natural_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """r̂_i per stage and P̂_observed per task from the natural rollouts."""
        run = study.run()
        frame = analysis.observed_success(run, context.partition_key, checkpoint_trials, natural_trials)
        return Output(frame, metadata=_meta(run, frame))

    @asset(partitions_def=AGENTS, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(partition_mapping=BY_AGENT),
    }, deps=[expected_success, observed_success])
    def horizon_residuals(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame) -> Output[pd.DataFrame]:
        """Γ_H = ln(P_expected / P_observed) per task, family and overall, with bootstrap intervals."""
        run = study.run()
        frame = analysis.horizon_residuals(run, context.partition_key, checkpoint_trials, natural_trials)
        overall = frame[(frame["scope"] == "all") & (frame["condition"] == "baseline")].iloc[0]
        return Output(frame, metadata=_meta(run, frame, gamma_all=float(overall["gamma"]),
                                            ci_low=float(overall["ci_low"]), ci_high=float(overall["ci_high"])))

    @asset(ins={"horizon_residuals": AssetIn()})
    def study_report(study: StudyResource, horizon_residuals: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residual table, forest plot, lineage to the pre-registration."""
        run = study.run()
        residuals = analysis.current_residuals(run, horizon_residuals)
        summary = write_summary(run, residuals, run.out_dir / "summary.json")
        report = write_report(run, residuals, run.out_dir / "report.html")
        return MaterializeResult(metadata={
            "prereg_sha256": run.prereg_sha256, "report": str(report), "summary": str(summary),
            "rows": len(residuals),
        })

    return [task_catalog, verifier_audit, preregistration, checkpoint_trials, stage_estimates,
            expected_success, natural_trials, observed_success, horizon_residuals, study_report]

