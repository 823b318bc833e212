"""A self-contained HTML report: the residual table and a forest plot (figures inline)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report is written on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from hrbench.design import StudyDesign  # noqa: E402


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
        if pd.notna(r.gamma):
            ax.plot(r.gamma, yi, "o", color="#2b6cb0", ms=4 + weight)
        if "true_gamma" in rows and pd.notna(r.true_gamma):
            ax.plot(r.true_gamma, yi, "x", color="#c53030", ms=6)
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("Γ_H = ln(P_expected / P_observed)  [nats]   (× = simulated truth)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "—" if pd.isna(value) else f"{value:.3f}"
    return html.escape(str(value)) if value is not None else "—"


def residual_table_html(residuals: pd.DataFrame) -> str:
    columns = [c for c in ["agent", "condition", "scope", "name", "p_expected", "p_observed", "gamma",
                           "ci_low", "ci_high", "trial_ci_low", "trial_ci_high", "se_delta", "ci_method",
                           "zero_rule_applied", "quadrant",
                           "true_gamma"] if c in residuals]
    head = "".join(f"<th>{c}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(getattr(r, c))}</td>" for c in columns) + "</tr>"
        for r in residuals.itertuples()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_report(design: StudyDesign, residuals: pd.DataFrame, path: Path) -> Path:
    study = design.study
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
<h2>Forest plot</h2><img alt="forest plot" src="{forest_plot(residuals)}">
<h2>Residual table</h2>{residual_table_html(residuals)}
</body></html>"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
