"""summary.json: the residual table in a stable, machine-readable form.

Every interval is named by its estimand (`ci_estimand` for the headline `ci_low`/`ci_high`;
`trial_ci_*` is always "tasks: fixed") and sits beside the truth it targets for sim agents
(`true_gamma_sampled` / `true_gamma`). Infinite interval ends (one-sided intervals) are the
strings "Infinity" / "-Infinity"; `null` means undefined (docs/statistics.md §3).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from hrbench.study_run import StudyRun

SUMMARY_FIELDS = [
    "agent", "condition", "scope", "name", "n_tasks", "p_expected", "p_observed", "gamma",
    "ci_estimand", "ci_low", "ci_high", "ci_method", "df", "true_gamma_sampled",
    "trial_ci_low", "trial_ci_high", "trial_ci_method", "true_gamma",
    "se_delta", "zero_rule", "zero_rule_applied", "flags", "bound", "bound_value", "quadrant", "n_excluded",
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


def summary_rows(residuals: pd.DataFrame) -> list[dict]:
    rows = []
    for record in residuals.to_dict(orient="records"):
        rows.append({f: _clean(record.get(f)) for f in SUMMARY_FIELDS})
    return rows


def write_summary(run: StudyRun, residuals: pd.DataFrame, path: Path) -> Path:
    """Rows in the study's agent order (stable), whatever order the partitions were loaded in."""
    order = {a.id: i for i, a in enumerate(run.study.agents)}
    ordered = residuals.sort_values("agent", key=lambda agents: agents.map(order), kind="stable")
    body = {"study": run.study.name, "prereg_sha256": run.prereg_sha256, "residuals": summary_rows(ordered)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2, allow_nan=False) + "\n")
    return path
