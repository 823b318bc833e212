"""A self-contained HTML report: residuals, intervention contrasts and sensitivity, with their plots inline."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report is written on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
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
                            list(rows["true_gamma"]) if "true_gamma" in rows else [None] * len(rows),
                            "Γ_H = ln(P_expected / P_observed)  [nats]   (× = simulated truth)",
                            list(rows["scope"] == "all"))


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
    if isinstance(value, float):
        return "—" if pd.isna(value) else f"{value:.3f}"
    return html.escape(str(value)) if value is not None else "—"


RESIDUAL_COLUMNS = ["agent", "condition", "scope", "name", "p_expected", "p_observed", "gamma", "ci_low", "ci_high",
                    "trial_ci_low", "trial_ci_high", "se_delta", "ci_method", "zero_rule_applied", "quadrant",
                    "true_gamma"]


def residual_table_html(residuals: pd.DataFrame, wanted: list[str] = RESIDUAL_COLUMNS) -> str:
    columns = [c for c in wanted if c in residuals]
    head = "".join(f"<th>{c}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(getattr(r, c))}</td>" for c in columns) + "</tr>"
        for r in residuals.itertuples()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
<b>ci_low/ci_high</b> (family, all) resample whole tasks then trials (generalizes over tasks like these);
<b>trial_ci</b> keeps the tasks fixed ("these tasks only"). With few tasks the first is wide by design.</p>
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
