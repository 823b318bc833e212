"""The study report: one self-contained HTML file (figures as data: URIs, nothing fetched), from plain tables.

`render_report(header, inputs)` renders `templates/report.html.j2` from a `ReportHeader` and
`ReportInputs` (plain tables, see `hrbench.report.context`), so a report can be drawn from any set
of stored tables. `study_report` gathers those tables for one study version: the residuals,
contrasts and sweep it is given, and from the output directory's stores the stage estimates,
observed success, natural trials (hence the dense rewards) and, when stored, `task_depth`.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pandas as pd
from pydantic import BaseModel, ConfigDict

from hrbench.analysis import ReportTables
from hrbench.design import StudyDesign
from hrbench.harbor_io.imports import import_statements
from hrbench.harness.records import TrialRecord
from hrbench.report.context import (
    Figure,
    ReportHeader,
    ReportInputs,
    report_context,
    report_figures,
)
from hrbench.catalogue import NATURAL_TRIALS, OBSERVED_SUCCESS, STAGE_ESTIMATES, TASK_DEPTH, Table
from hrbench.stores import StudyStores
from hrbench.structure.tables import dense_table
from hrbench.transduction.positions import position_table, record_scores

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("hrbench.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)


def report_header(design: StudyDesign, frozen_at: str | None = None) -> ReportHeader:
    """What the report states about a study version: hash, protocol, zero rule, trial counts, conditions."""
    study = design.study
    shared: dict[str, list[str]] = {}
    for c in study.condition_names:
        shared.setdefault(study.checkpoint_protocol(c).protocol_hash(), []).append(c)
    conditions = []
    for c in study.conditions:
        phash = study.checkpoint_protocol(c.name).protocol_hash()
        others = [o for o in shared[phash] if o != c.name]
        conditions.append({"name": c.name, "history": str(getattr(c.history, "value", c.history)),
                           "state": str(getattr(c.state, "value", c.state)), "protocol": phash,
                           "sharing": f"shared with {', '.join(others)} (run once)" if others else "own"})
    protocol = {k: v for k, v in study.checkpoint.model_dump(mode="json").items() if k != "budget"}
    protocol["budget"] = json.dumps(study.checkpoint.budget.model_dump(mode="json", exclude_none=True))
    return ReportHeader(study=study.name, description=study.description, prereg_sha256=design.prereg_sha256,
                        zero_rule=study.zero_rule, baseline_model=study.baseline_model,
                        checkpoint_trials=study.trials.checkpoint, natural_trials=study.trials.natural,
                        n_boot=study.bootstrap.n_boot, bootstrap_seed=study.bootstrap.seed,
                        level=study.bootstrap.level, protocol=protocol, conditions=conditions,
                        imports=import_statements(design.study, design.imported, frozen_at) if study.imports else [],
                        error_rate=study.claims.error_rate, alpha=study.claims_alpha, n_claims=study.n_claims,
                        equivalence_margin=study.claims.equivalence_margin)


def _mine(design: StudyDesign, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of this pre-registration and its declared agents (a store may hold other versions)."""
    if not len(frame):
        return frame
    if "prereg_sha256" in frame:
        frame = frame[frame["prereg_sha256"] == design.prereg_sha256]
    return frame[frame["agent"].isin([a.id for a in design.study.agents])] if "agent" in frame else frame


def _records(frame: pd.DataFrame) -> list[TrialRecord]:
    clean = frame.astype(object).where(frame.notna(), None)
    return [TrialRecord.model_validate(row) for row in clean.to_dict(orient="records")]


def study_inputs(design: StudyDesign, tables: ReportTables, stores: StudyStores | None = None) -> ReportInputs:
    """The plain tables of one study version: the given residual tables, plus the catalogue's other tables the
    report reads (`report_reads`: natural trials, stage estimates, observed success, task depth) from `stores`.
    The report asset declares them all upstream (assets/report.py)."""
    def stored(table: Table) -> pd.DataFrame:
        if stores is None:
            return pd.DataFrame()
        names = table.keys(design.study.condition_names)
        frames = [f for f in (_mine(design, stores.read_all(n)) for n in names) if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    natural = stored(NATURAL_TRIALS)
    dense = pd.DataFrame([r.model_dump() for r in dense_table(_records(natural), design.tasks)]) if len(natural) \
        else pd.DataFrame()
    # per-record scores the transduction verifiers kept, from the baseline's natural rollouts (one history
    # over the whole document: where a model degrades along its output)
    baseline = natural[natural["condition"] == "baseline"] if len(natural) else natural
    positions = position_table(record_scores(baseline, design.tasks), level=design.study.bootstrap.level)
    return ReportInputs(residuals=tables.residuals, contrasts=tables.contrasts, sensitivity=tables.sensitivity,
                        claims=tables.claims,
                        stage_estimates=stored(STAGE_ESTIMATES), observed=stored(OBSERVED_SUCCESS),
                        natural=natural, catalog=design.catalog(), depth=stored(TASK_DEPTH),
                        dense=dense, positions=positions)


def render_report(header: ReportHeader, inputs: ReportInputs, figs: list[Figure] | None = None) -> str:
    """The report's HTML text (self-contained: no URL of any kind is fetched)."""
    return _ENV.get_template("report.html.j2").render(**report_context(header, inputs, figs))


class WrittenReport(BaseModel):
    """A report on disk and the figures in it (for Dagster metadata: `context.figure_metadata`)."""

    model_config = ConfigDict(frozen=True)
    path: Path
    figures: list[Figure]


def study_report(design: StudyDesign, tables: ReportTables, path: Path,
                 stores: StudyStores | None = None) -> WrittenReport:
    """Write the report of one study version to `path`; returns it with its figures."""
    inputs = study_inputs(design, tables, stores)
    figs = report_figures(inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    frozen_at = stores.frozen_at() if stores is not None else None
    path.write_text(render_report(report_header(design, frozen_at), inputs, figs))
    return WrittenReport(path=path, figures=figs)


def write_report(design: StudyDesign, tables: ReportTables, path: Path, stores: StudyStores | None = None) -> Path:
    """Write the report (see `study_report`) and return its path."""
    return study_report(design, tables, path, stores).path
