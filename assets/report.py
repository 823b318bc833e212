"""The report asset: report.html and summary.json from every table they show."""

import pandas as pd
from dagster import AssetIn, AssetKey, AssetsDefinition, MaterializeResult, MetadataValue, asset

from assets.common import REPORT, STALE, residual_markdown
from hrbench import analysis
from hrbench.report.context import figure_metadata
from hrbench.report.html import study_report as write_study_report
from hrbench.report.summary import write_summary
from resources.study import StudyResource


def report_asset(conditions: list[str], version: str, with_depth: bool) -> AssetsDefinition:
    """study_report, from every condition's residuals, the aggregates and (declared) task_depth."""
    # A study of the baseline alone has no intervention to contrast: no contrasts asset.
    interventions = len(conditions) > 1
    report_ins = {f"residuals_{c}": AssetIn(key=AssetKey([c, "horizon_residuals"])) for c in conditions}
    report_ins["sensitivity_sweep"] = AssetIn()
    report_ins["resource_accounting"] = AssetIn()
    if interventions:
        report_ins["intervention_contrasts"] = AssetIn()

    @asset(ins=report_ins, deps=["task_depth"] if with_depth else [], group_name=REPORT, code_version=version,
           automation_condition=STALE)
    def study_report(study: StudyResource, sensitivity_sweep: pd.DataFrame, resource_accounting: pd.DataFrame,
                     **tables_in: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residuals per condition, contrasts, sensitivity, lineage, and
        (from the stores) dense rewards, task_depth and the transduction verifiers' per-record scores."""
        run = study.run()
        contrasts = tables_in.pop("intervention_contrasts", pd.DataFrame())
        tables = analysis.current_tables(run.design, pd.concat(tables_in.values(), ignore_index=True),
                                         contrasts, sensitivity_sweep, resource_accounting)
        summary = write_summary(run.design, tables, run.stores.summary_path)
        report = write_study_report(run.design, tables, run.stores.report_path, run.stores)
        run.stores.publish(summary)
        run.stores.publish(report.path)
        residuals = tables.residuals
        return MaterializeResult(metadata={
            "prereg_sha256": run.prereg_sha256, "code_version": version,
            "report": str(report.path.relative_to(run.out_dir)), "summary": str(summary.relative_to(run.out_dir)),
            "rows": len(residuals), "agents": len(set(residuals["agent"])),
            "residuals": MetadataValue.md(residual_markdown(residuals[residuals["scope"] != "task"])),
            # the report's own figures (figure_forest among them): drawn once, not again for the metadata
            **{k: MetadataValue.md(v) for k, v in figure_metadata(report.figures).items()},
        })

    return study_report
