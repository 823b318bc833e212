"""summary.json: residuals (per condition), intervention contrasts and sensitivity verdicts, machine-readable."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from hrbench.analysis import ReportTables
from hrbench.design import StudyDesign

SUMMARY_FIELDS = [
    "agent", "condition", "scope", "name", "p_expected", "p_observed", "gamma", "ci_low", "ci_high",
    "trial_ci_low", "trial_ci_high", "se_delta", "ci_method", "zero_rule", "zero_rule_applied", "bound", "bound_value", "quadrant", "n_tasks",
    "n_excluded", "true_gamma",
]


def _clean(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN, or the open end of a one-sided interval (see `bound`): strict JSON has neither
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


CONTRAST_FIELDS = ["agent", "condition", "scope", "name", "delta_gamma", "ci_low", "ci_high", "trial_ci_low",
                   "trial_ci_high", "ci_method", "n_tasks", "true_delta_gamma"]
SENSITIVITY_FIELDS = ["agent", "scope", "name", "gamma_min", "gamma_max", "verdict", "driver", "n_choices",
                      "true_gamma"]


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

    body = {"study": design.study.name, "prereg_sha256": design.prereg_sha256,
            "residuals": summary_rows(ordered(tables.residuals)),
            "contrasts": summary_rows(ordered(tables.contrasts), CONTRAST_FIELDS),
            "sensitivity": summary_rows(ordered(tables.sensitivity), SENSITIVITY_FIELDS)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path
