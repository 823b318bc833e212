"""A self-contained HTML report: residuals, intervention contrasts and sensitivity, with their plots inline."""

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

from hrbench.analysis import ReportTables  # noqa: E402
from hrbench.design import StudyDesign  # noqa: E402


def _interval_figure(labels: list[str], points: list, lows: list, highs: list, truths: list, xlabel: str,
                     bold: list[bool]) -> str:
    """One row per label: an interval, its point and (×) the sim truth. Returns a data URI."""
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.2))
    y = list(range(len(labels)))[::-1]
    for yi, point, low, high, truth, strong in zip(y, points, lows, highs, truths, bold):
        weight = 2.5 if strong else 1.2
        if pd.notna(low) and pd.notna(high):
            ax.plot([low, high], [yi, yi], color="#2b6cb0", lw=weight)
        if pd.notna(point):
            ax.plot(point, yi, "o", color="#2b6cb0", ms=4 + weight)
        if truth is not None and pd.notna(truth):
            ax.plot(truth, yi, "x", color="#c53030", ms=6)
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _ranked(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rank = frame["scope"].map({"all": 0, "family": 1, "task": 2})
    return frame.assign(_rank=rank).sort_values(keys[:-1] + ["_rank", keys[-1]])


def forest_plot(residuals: pd.DataFrame) -> str:
    """Γ̂ with its interval per agent, condition and scope; sim truth as a cross."""
    rows = _ranked(residuals, ["agent", "condition", "name"])
    return _interval_figure([f"{r.agent} · {r.condition} · {r.scope}:{r.name}" for r in rows.itertuples()],
                            list(rows["gamma"]), list(rows["ci_low"]), list(rows["ci_high"]),
                            _drawn_truths(rows),
                            "Γ_H = ln(P_expected / P_observed)  [nats]   (× = simulated truth of the interval's "
                            "estimand: tasks sampled for family/all rows, tasks fixed for task rows)",
                            list(rows["scope"] == "all"))


def _drawn_truths(rows: pd.DataFrame) -> list:
    """The truth each drawn interval targets: the population truth for a family/all row's tasks-sampled
    interval, the fixed-task truth for task rows."""
    if "true_gamma" not in rows:
        return [None] * len(rows)
    if "true_gamma_sampled" not in rows:
        return list(rows["true_gamma"])
    return [r.true_gamma_sampled if r.scope != "task" else r.true_gamma for r in rows.itertuples()]


def contrast_plot(contrasts: pd.DataFrame) -> str:
    """ΔΓ(I) = Γ(baseline) − Γ(I) per agent and condition (family and overall rows), paired intervals."""
    rows = _ranked(contrasts[contrasts["scope"] != "task"], ["agent", "condition", "name"])
    return _interval_figure([f"{r.agent} · {r.condition} · {r.scope}:{r.name}" for r in rows.itertuples()],
                            list(rows["delta_gamma"]), list(rows["ci_low"]), list(rows["ci_high"]),
                            list(rows["true_delta_gamma"]), "ΔΓ(I) = Γ(baseline) − Γ(I)  [nats]   (× = simulated truth)",
                            list(rows["scope"] == "all"))


def sensitivity_plot(sensitivity: pd.DataFrame) -> str:
    """The range of Γ over the admissible set per agent (family and overall), with the verdict in the label."""
    rows = _ranked(sensitivity[sensitivity["scope"] != "task"], ["agent", "name"])
    return _interval_figure([f"{r.agent} · {r.scope}:{r.name} · {r.verdict} ({r.driver})" for r in rows.itertuples()],
                            [None] * len(rows), list(rows["gamma_min"]), list(rows["gamma_max"]),
                            list(rows["true_gamma"]), "range of Γ_H over the admissible set  [nats]",
                            list(rows["scope"] == "all"))


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


def residual_table_html(frame: pd.DataFrame, wanted: list[str] | None = None) -> str:
    """A table of the given columns (default: the residual columns, headed by their estimands)."""
    columns = [c for c in (wanted or list(_COLUMNS)) if c in frame]
    head = "".join(f"<th>{_COLUMNS.get(c, c)}</th>" for c in columns)
    # A residual task row's interval is about that task (tasks: fixed): it shows in those columns only.
    sampled_only = {"ci_low", "ci_high", "ci_method", "df", "true_gamma_sampled"} if wanted is None else set()
    body = "".join(
        "<tr>" + "".join(f"<td>{'—' if getattr(r, 'scope', None) == 'task' and c in sampled_only else _fmt(getattr(r, c))}</td>"
                         for c in columns) + "</tr>"
        for r in frame.itertuples()
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


def write_report(design: StudyDesign, tables: ReportTables, path: Path) -> Path:
    study = design.study
    residuals = tables.residuals
    shared: dict[str, list[str]] = {}
    for c in study.condition_names:
        shared.setdefault(study.checkpoint_protocol(c).protocol_hash(), []).append(c)
    sharing = "; ".join(f"<code>{h}</code>: {', '.join(cs)}" + (" (shared: run once)" if len(cs) > 1 else "")
                        for h, cs in shared.items())
    extra = ""
    if len(tables.contrasts):
        overall = tables.contrasts[tables.contrasts["scope"] == "all"]
        extra += (f"<h2>Interventions: ΔΓ(I)</h2><p>Γ(baseline) − Γ(I), paired over tasks; each side keeps its "
                  f"own P_expected and P_observed.</p><img alt=\"contrast plot\" src=\"{contrast_plot(tables.contrasts)}\">"
                  + residual_table_html(overall, ["agent", "condition", "delta_gamma", "ci_low", "ci_high",
                                                  "ci_method", "true_delta_gamma"]))
    if len(tables.sensitivity):
        extra += (f"<h2>Sensitivity</h2><p>Γ of the baseline under every admissible protocol, baseline model, "
                  f"zero rule and decomposition; robust only if every interval agrees.</p>"
                  f"<img alt=\"sensitivity plot\" src=\"{sensitivity_plot(tables.sensitivity)}\">"
                  + residual_table_html(tables.sensitivity[tables.sensitivity["scope"] != "task"],
                                        ["agent", "scope", "name", "gamma_min", "gamma_max", "verdict", "driver",
                                         "n_choices"]))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>hrbench · {html.escape(study.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ddd;padding:3px 6px;text-align:right}}
th{{background:#f4f4f4}}code{{background:#f4f4f4;padding:1px 4px}}</style></head><body>
<h1>Horizon residuals · {html.escape(study.name)}</h1>
<p>{html.escape(study.description)}</p>
<p>Pre-registration <code>{design.prereg_sha256}</code> · zero rule <code>{study.zero_rule}</code> ·
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
<p>Checkpoint protocols and the conditions whose predictions use their trials: {sharing}.</p>
<h2>Forest plot</h2><img alt="forest plot" src="{forest_plot(residuals)}">
<h2>Residual table</h2>{residual_table_html(residuals)}
{extra}
<h2>Resources per condition</h2>{residual_table_html(tables.resources, ["agent", "condition", "kind", "trials", "turns",
                                                                     "tokens_in", "tokens_out", "wall_s", "cost_usd",
                                                                     "harness_errors", "shared_protocol"])}
</body></html>"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
