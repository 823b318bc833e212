"""summary.json: confirmatory claims, residuals (per condition), intervention contrasts and sensitivity verdicts.

`claims` lists the study's confirmatory claims (docs/statistics.md §13) with their unadjusted and
adjusted intervals side by side, adjusted p-values and verdicts; every residual and contrast row
says whether it is one of them (`confirmatory`) — every other interval is exploratory.

Every interval is named by its estimand (`ci_estimand` for the headline `ci_low`/`ci_high`;
`trial_ci_*` is always "tasks: fixed") and sits beside the truth it targets for sim agents
(`true_gamma_sampled` / `true_gamma`). `m_planned`, `m_used` and `m_missing` count the row's trials
(checkpoint and natural) as pre-registered, with a result, and missing (no result after their
attempts; left out of the estimate). Infinite interval ends (one-sided intervals) are the
strings "Infinity" / "-Infinity"; `null` means undefined (docs/statistics.md §3).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from hrbench.analysis import ReportTables
from hrbench.claims import CLAIMS_FIELDS
from hrbench.design import StudyDesign

SUMMARY_FIELDS = [
    "agent", "condition", "scope", "name", "n_tasks", "p_expected", "p_observed", "gamma", "rule_note",
    "ci_estimand", "ci_low", "ci_high", "ci_method", "df", "true_gamma_sampled",
    "trial_ci_low", "trial_ci_high", "trial_ci_method", "true_gamma",
    "se_delta", "zero_rule", "zero_rule_applied", "flags", "bound", "bound_value", "quadrant", "n_excluded",
    "m_planned", "m_used", "m_missing",
    "families_ci_low", "families_ci_high", "families_df", "confirmatory", "adj_ci_low", "adj_ci_high", "p_value",
]


def _clean(value: object) -> object:
    if hasattr(value, "item") and not isinstance(value, np.ndarray):  # numpy scalars
        return _clean(value.item())
    if isinstance(value, np.ndarray):  # list columns (flags) come back from parquet as arrays
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        if math.isnan(value):
            return None  # undefined
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"  # the open end of a one-sided interval
    if value is pd.NA or value is pd.NaT:
        return None
    return value


CONTRAST_FIELDS = ["agent", "condition", "scope", "name", "delta_gamma", "ci_estimand", "ci_low", "ci_high", "ci_method",
                   "df", "true_delta_gamma_sampled", "trial_ci_low", "trial_ci_high", "trial_ci_method",
                   "true_delta_gamma", "flags", "n_tasks", "shared_checkpoint", "confirmatory", "adj_ci_low",
                   "adj_ci_high", "p_value"]
SENSITIVITY_FIELDS = ["agent", "scope", "name", "gamma_min", "gamma_max", "verdict", "direction", "driver",
                      "n_choices", "true_gamma"]


def summary_rows(frame: pd.DataFrame, fields: list[str] = SUMMARY_FIELDS) -> list[dict]:
    rows = []
    for record in frame.to_dict(orient="records"):
        rows.append({f: _clean(record.get(f)) for f in fields})
    return rows


def write_summary(design: StudyDesign, tables: ReportTables, path: Path) -> Path:
    """Rows in the study's agent order (stable), whatever order the partitions were loaded in."""
    order = {a.id: i for i, a in enumerate(design.study.agents)}

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        if not len(frame):
            return frame
        return frame.sort_values("agent", key=lambda agents: agents.map(order), kind="stable")

    study = design.study
    body = {"study": study.name, "prereg_sha256": design.prereg_sha256, "level": study.bootstrap.level,
            "error_rate": study.claims.error_rate, "alpha": study.claims_alpha, "n_claims": study.n_claims,
            "equivalence_margin": study.claims.equivalence_margin,
            "design_warnings": design.preregistration.design_warnings,
            "claims": summary_rows(ordered(tables.claims), CLAIMS_FIELDS),
            "residuals": summary_rows(ordered(tables.residuals)),
            "contrasts": summary_rows(ordered(tables.contrasts), CONTRAST_FIELDS),
            "sensitivity": summary_rows(ordered(tables.sensitivity), SENSITIVITY_FIELDS)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2, allow_nan=False) + "\n")
    return path
