"""The report asset: report.html and summary.json from every table they show."""

import pandas as pd
from dagster import AssetIn, AssetKey, AssetsDefinition, MaterializeResult, MetadataValue, asset

from assets.common import REPORT, STALE, gated, residual_markdown
from hrbench import analysis
from hrbench.catalogue import (
    REPORT_ASSET, HORIZON_RESIDUALS, INTERVENTION_CONTRASTS, RESOURCE_ACCOUNTING, SENSITIVITY_SWEEP, TABLES, TASK_DEPTH,
)
from hrbench.report.context import figure_metadata
from hrbench.report.html import study_report as write_study_report
from hrbench.report.summary import write_summary
from resources.study import StudyResource


def report_asset(conditions: list[str], version: str, with_depth: bool) -> AssetsDefinition:
    """study_report, from every condition's residuals, the aggregates and (declared) task_depth."""
    # A study of the baseline alone has no intervention to contrast: no contrasts asset.
    interventions = len(conditions) > 1
    report_ins = {f"residuals_{c}": AssetIn(key=AssetKey.from_user_string(HORIZON_RESIDUALS.key(c)))
                  for c in conditions}
    report_ins[SENSITIVITY_SWEEP.name] = AssetIn()
    report_ins[RESOURCE_ACCOUNTING.name] = AssetIn()
    if interventions:
        report_ins[INTERVENTION_CONTRASTS.name] = AssetIn()
    # The other tables the report reads (catalogue: `report_reads`) it takes from the stores, filtered to this
    # pre-registration (hrbench/report/html.py `study_inputs`); declared here so the asset graph, the UI and
    # `hrbench lineage` show the report's whole provenance.
    loaded = {t.name for t in (HORIZON_RESIDUALS, SENSITIVITY_SWEEP, RESOURCE_ACCOUNTING, INTERVENTION_CONTRASTS)}
    read = [AssetKey.from_user_string(key) for t in TABLES if t.report_reads and t.name not in loaded
            and (t is not TASK_DEPTH or with_depth) for key in t.keys(conditions)]

    @asset(ins=report_ins, deps=read, group_name=REPORT, code_version=version, automation_condition=STALE)
    def study_report(study: StudyResource, sensitivity_sweep: pd.DataFrame, resource_accounting: pd.DataFrame,
                     **tables_in: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residuals per condition, contrasts, sensitivity, lineage, and
        (read from the stores: natural trials, stage estimates, observed success, task_depth) dense rewards, depth
        and the transduction verifiers' per-record scores."""
        run = study.run()
        gated(run, REPORT_ASSET, [a.id for a in run.study.agents])
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
