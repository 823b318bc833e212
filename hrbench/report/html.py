"""A self-contained HTML report: the residual table and a forest plot (figures inline)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report is written on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hrbench.study_run import StudyRun  # noqa: E402


def forest_plot(residuals: pd.DataFrame) -> str:
    """Γ̂ with its interval per agent and scope; sim truth as a cross. Returns a data URI."""
    rank = residuals["scope"].map({"all": 0, "family": 1, "task": 2})
    rows = residuals.assign(_rank=rank).sort_values(["agent", "condition", "_rank", "name"])
    labels = [f"{r.agent} · {r.condition} · {r.scope}:{r.name}" for r in rows.itertuples()]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows.itertuples()):
        weight = 2.5 if r.scope == "all" else 1.2
        if pd.notna(r.ci_low) and pd.notna(r.ci_high):
            ax.plot([r.ci_low, r.ci_high], [yi, yi], color="#2b6cb0", lw=weight)
        elif pd.notna(r.trial_ci_low) and pd.notna(r.trial_ci_high):  # no tasks-sampled interval: tasks fixed, dashed
            ax.plot([r.trial_ci_low, r.trial_ci_high], [yi, yi], color="#2b6cb0", lw=weight, ls="--")
        if pd.notna(r.gamma):
            ax.plot(r.gamma, yi, "o", color="#2b6cb0", ms=4 + weight)
        # The cross is the truth of the estimand the drawn interval is about.
        sampled = r.scope != "task" and pd.notna(r.ci_low) and "true_gamma_sampled" in rows
        truth = getattr(r, "true_gamma_sampled" if sampled else "true_gamma", None) if "true_gamma" in rows else None
        if truth is not None and pd.notna(truth):
            ax.plot(truth, yi, "x", color="#c53030", ms=6)
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("Γ_H = ln(P_expected / P_observed)  [nats]   (solid: tasks sampled; dashed: tasks fixed; "
                  "× = simulated truth of that estimand)", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _fmt(value: object) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):  # flags (parquet gives arrays)
        return html.escape(", ".join(str(v) for v in list(value))) or "—"
    if isinstance(value, float):
        if pd.isna(value):
            return "—"
        return ("∞" if value > 0 else "−∞") if abs(value) == float("inf") else f"{value:.3f}"
    return html.escape(str(value)) if value is not None else "—"


#: Column → header; headers name the estimand each interval and truth is about.
_COLUMNS = {
    "agent": "agent", "condition": "condition", "scope": "scope", "name": "name", "n_tasks": "tasks",
    "p_expected": "P_exp", "p_observed": "P_obs", "gamma": "Γ",
    "ci_low": "CI low (tasks: sampled)", "ci_high": "CI high (tasks: sampled)", "ci_method": "method",
    "df": "df", "true_gamma_sampled": "true Γ (tasks: sampled)",
    "trial_ci_low": "CI low (tasks: fixed)", "trial_ci_high": "CI high (tasks: fixed)",
    "trial_ci_method": "method (tasks: fixed)", "true_gamma": "true Γ (tasks: fixed)",
    "se_delta": "se_delta", "flags": "flags", "bound": "bound", "quadrant": "quadrant",
}


def residual_table_html(residuals: pd.DataFrame) -> str:
    columns = [c for c in _COLUMNS if c in residuals]
    head = "".join(f"<th>{_COLUMNS[c]}</th>" for c in columns)
    # A task row's interval is about that task (tasks: fixed): it shows in those columns only.
    sampled_only = {"ci_low", "ci_high", "ci_method", "df", "true_gamma_sampled"}
    body = "".join(
        "<tr>" + "".join(f"<td>{'—' if r.scope == 'task' and c in sampled_only else _fmt(getattr(r, c))}</td>"
                         for c in columns) + "</tr>"
        for r in residuals.itertuples()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def too_small_note(residuals: pd.DataFrame) -> str:
    """One sentence per family/all row whose tasks are too few for a (narrow) population interval."""
    notes = []
    for r in residuals[residuals["scope"] != "task"].drop_duplicates(["scope", "name", "n_tasks", "ci_method"]).itertuples():
        flags = list(r.flags) if "flags" in residuals else []
        if r.ci_method == "too-few-tasks":
            notes.append(f"<li><b>{html.escape(r.name)}</b> ({r.n_tasks} task{'s' if r.n_tasks != 1 else ''}): too few "
                         "tasks for a population (tasks: sampled) interval; only the tasks-fixed interval is shown.</li>")
        elif "few-tasks" in flags:
            notes.append(f"<li><b>{html.escape(r.name)}</b> ({r.n_tasks} tasks): the tasks-sampled interval rests on "
                         "fewer than 4 degrees of freedom — Student-t, wide and conservative.</li>")
    return f"<ul>{''.join(notes)}</ul>" if notes else "<p>Every family has enough tasks for its population interval.</p>"


def write_report(run: StudyRun, residuals: pd.DataFrame, path: Path) -> Path:
    study = run.study
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>hrbench · {html.escape(study.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ddd;padding:3px 6px;text-align:right}}
th{{background:#f4f4f4}}code{{background:#f4f4f4;padding:1px 4px}}</style></head><body>
<h1>Horizon residuals · {html.escape(study.name)}</h1>
<p>{html.escape(study.description)}</p>
<p>Pre-registration <code>{run.prereg_sha256}</code> · zero rule <code>{study.zero_rule}</code> ·
baseline <code>{study.baseline_model}</code> · checkpoint trials per stage m<sub>i</sub>={study.trials.checkpoint} ·
natural rollouts m<sub>0</sub>={study.trials.natural} · bootstrap {study.bootstrap.n_boot} resamples (seed {study.bootstrap.seed}).</p>
<p>Γ<sub>H</sub> &gt; 0: the natural rollout succeeds less often than the checkpoint prediction.
Every interval names its estimand. <b>tasks: sampled</b> (family and all rows; cluster-t: CR2 variance over the
family's tasks with Bell–McCaffrey degrees of freedom) is about the population of tasks the row's tasks stand for,
and is compared with the population truth; <b>tasks: fixed</b> (task rows: MOVER–Jeffreys; family and all rows:
trial bootstrap) is about these tasks only, and is compared with their truth. With few tasks the first is wide by
design. Flags: <code>zero-rule</code> a raw count of 0 entered a log (Γ is then a bound or undefined, never a
smoothed point), <code>one-sided</code>, <code>no-estimate</code>, <code>boundary</code> (a count at m),
<code>few-tasks</code>, <code>too-few-tasks</code> (docs/statistics.md §7).</p>
<h2>Families too small for a population interval</h2>{too_small_note(residuals)}
<h2>Forest plot</h2><img alt="forest plot" src="{forest_plot(residuals)}">
<h2>Residual table</h2>{residual_table_html(residuals)}
</body></html>"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
