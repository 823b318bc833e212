"""The report's inputs (plain tables) and the template context built from them.

`ReportInputs` holds the stored asset tables a report is drawn from; `ReportHeader` what the
report states about the study (pre-registration hash, protocol, zero rule, trial counts).
`report_context` turns both into what `templates/report.html.j2` renders: figures as data URIs,
tables as rows of formatted cells, and the statements of raw counts and estimands.
`figure_metadata` gives the same figures as markdown for Dagster metadata (the core never imports
Dagster: an asset wraps each value in `MetadataValue.md`).

Every table but the residuals is optional, and optional columns (the stats engineer's `estimand`,
`zero_rule_applied`, truth columns ...) are shown when present, so the report follows the tables
rather than the other way round.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from hrbench.exits import is_missing
from hrbench.report import figures
from hrbench.stats.dense import (
    PASS_THRESHOLDS,
    failure_summary,
    mean_reward,
    pass_at_1_table,
)
from hrbench.stats.intervals import wilson_interval
from hrbench.stats.rank import rank_partial_correlation

TRANSDUCTION_FAMILY_PREFIX = "transduction-"  # `[metadata.hrbench] family` of transduction packages

# Shown first, in this order, when present; any other column of the residual rows follows them, so
# a column added upstream (estimand labels, truth, flags) appears without a change here.
RESIDUAL_COLUMNS = ["agent", "condition", "scope", "name", "n_tasks", "n_excluded", "p_expected", "p_observed",
                    "gamma", "rule_note", "ci_low", "ci_high", "trial_ci_low", "trial_ci_high", "se_delta", "ci_method",
                    "estimand", "zero_rule", "zero_rule_applied", "bound", "bound_value", "quadrant", "true_gamma"]
_HIDDEN = {"prereg_sha256", "hrbench_version", "stage_terms", "stage_term_ci", "family", "level", "n_boot",
           "code_version", "study", "study_version",
           "claim_df", "claim_terms"}  # the max-|t| band's inputs (hrbench.claims): per-task terms, not for reading


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass(frozen=True)
class ReportInputs:
    """The plain tables one report is drawn from (all but `residuals` may be empty).

    residuals: horizon_residuals rows of every condition; contrasts: intervention_contrasts;
    sensitivity: sensitivity verdicts (`analysis.sensitivity_verdicts`); claims: the confirmatory claims
    (`hrbench.claims.claims_table`); stage_estimates,
    observed: the per-condition q̂ and r̂ tables; natural: natural trial rows; catalog: task_catalog
    (one row per stage); depth: one row per task with `task`, `depth`, `depth_status`, `n_turns`
    (a task_depth table); dense: `structure.tables.dense_table` rows; positions: accuracy by
    output position (`agent, bin_low, bin_high, k, n, accuracy, ci_low, ci_high[, unit]`).
    """

    residuals: pd.DataFrame
    contrasts: pd.DataFrame = field(default_factory=_empty)
    sensitivity: pd.DataFrame = field(default_factory=_empty)
    claims: pd.DataFrame = field(default_factory=_empty)
    stage_estimates: pd.DataFrame = field(default_factory=_empty)
    observed: pd.DataFrame = field(default_factory=_empty)
    natural: pd.DataFrame = field(default_factory=_empty)
    catalog: pd.DataFrame = field(default_factory=_empty)
    depth: pd.DataFrame = field(default_factory=_empty)
    dense: pd.DataFrame = field(default_factory=_empty)
    positions: pd.DataFrame = field(default_factory=_empty)


class ReportHeader(BaseModel):
    """What the report states about the study, before any number."""

    model_config = ConfigDict(frozen=True)
    study: str
    description: str = ""
    prereg_sha256: str
    zero_rule: str
    baseline_model: str
    checkpoint_trials: int  # m_i per stage
    natural_trials: int  # m_0 per task
    n_boot: int
    bootstrap_seed: int
    level: float
    protocol: dict[str, object]  # the declared checkpoint protocol
    conditions: list[dict[str, str]]  # name, history, state, protocol hash, sharing note
    imports: list[str] = []  # what was imported from Harbor jobs and when it was recorded (harbor_io.imports)
    error_rate: str = "holm"  # the claims' error-rate control (Study.claims)
    alpha: float | None = None
    n_claims: int = 0
    equivalence_margin: float | None = None


class Figure(BaseModel):
    model_config = ConfigDict(frozen=True)
    key: str
    title: str
    caption: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode()


# -- derived plain tables -------------------------------------------------------------------------


def structure_table(catalog: pd.DataFrame, depth: pd.DataFrame) -> pd.DataFrame:
    """One row per task: family, W (lines), stages, H_dep, and D / N / status when a depth table is given."""
    if not len(catalog):
        return pd.DataFrame()
    tasks = catalog.groupby("task", sort=False).agg(
        family=("family", "first"), work_lines=("work_lines", "first"), n_stages=("n_stages", "first"),
        dependency_depth=("dependency_depth", "first")).reset_index()
    if len(depth):
        keep = [c for c in ("task", "depth", "depth_status", "n_turns", "work_chars", "work_tokens") if c in depth]
        tasks = tasks.merge(depth[keep].drop_duplicates("task"), on="task", how="left")
    return tasks


def is_transduction(family: object) -> bool:
    return isinstance(family, str) and family.startswith(TRANSDUCTION_FAMILY_PREFIX)


def chunk_positions(estimates: pd.DataFrame, bins: int = 4, level: float = 0.95) -> pd.DataFrame:
    """Accuracy by output position at chunk resolution, from checkpoint trials of transduction tasks.

    Chunk j of an n-chunk document is a stage that a checkpoint trial starts from the reference
    output of earlier chunks in a clean context, so its pass rate is the accuracy of that part of
    the output alone; chunks are pooled by the relative position of their middle, (j + ½) / n, with a
    Wilson interval per bin. Records inside a chunk are not resolved: the per-record table of
    `ReportInputs.positions` (from the verifiers' per-line sub-rewards) is drawn instead when present.
    """
    if not len(estimates) or "family" not in estimates:
        return pd.DataFrame()
    est = estimates[estimates["family"].map(is_transduction)]
    if "condition" in est and len(est):  # conditions sharing a protocol repeat the same trials
        est = est.drop_duplicates(["agent", "protocol", "task", "stage_index"]) if "protocol" in est else est
        est = est[est["condition"] == ("baseline" if (est["condition"] == "baseline").any() else est["condition"].iloc[0])]
    if not len(est):
        return pd.DataFrame()
    n_chunks = est.groupby(["agent", "task"])["stage_index"].transform("max") + 1
    position = (est["stage_index"] + 0.5) / n_chunks
    est = est.assign(_bin=np.minimum((position * bins).astype(int), bins - 1))
    rows = []
    for (agent, b), group in est.groupby(["agent", "_bin"], sort=True):
        k, n = int(group["k"].sum()), int(group["m"].sum())
        low, high = wilson_interval(k, n, level)
        rows.append({"agent": agent, "bin_low": b / bins, "bin_high": (b + 1) / bins, "k": k, "n": n,
                     "accuracy": k / n if n else math.nan, "ci_low": low, "ci_high": high, "unit": "chunk"})
    return pd.DataFrame(rows)


def dense_summary(dense: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per agent and condition: R̄ with its interval, pass@1(τ) with Wilson intervals, failure types, resources."""
    if not len(dense):
        return pd.DataFrame()
    dense = dense.assign(condition=figures.condition_column(dense))
    rows = []
    for (agent, condition), every in dense.groupby(["agent", "condition"], sort=False):
        g = every[~every["exit_reason"].map(is_missing).astype(bool)]  # missing runs have no R to average
        R = g["reward"].to_numpy(dtype=float)
        mean = mean_reward(R, level)
        row: dict[str, object] = {"agent": agent, "condition": condition, "runs": mean.n,
                                  "missing": len(every) - len(g), "mean_R": mean.mean,
                                  "mean_R_ci": f"[{mean.ci_low:.3f}, {mean.ci_high:.3f}]"}
        for p in pass_at_1_table(R, PASS_THRESHOLDS, level):
            row[f"pass@1(τ={p.tau:g})"] = f"{p.k}/{p.n} = {p.rate:.3f} [{p.ci_low:.3f}, {p.ci_high:.3f}]"
        failures = failure_summary(list(every["exit_reason"]), every["reward"].to_numpy(dtype=float))
        row.update({f"n_{t}": c for t, c in failures.counts.items()})
        row["false_finishes"] = failures.false_finishes
        for column in ("tokens", "turns", "wall_s", "cost_usd"):
            if column in g:
                row[f"mean_{column}"] = float(g[column].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def depth_correlation(structure: pd.DataFrame, natural: pd.DataFrame, level: float = 0.95) -> dict | None:
    """Rank partial correlation of the per-task pass rate with D controlling for W (when D is known)."""
    if not len(structure) or "depth" not in structure or not len(natural):
        return None
    rates = natural[~natural["exit_reason"].map(is_missing).astype(bool)].groupby("task")["passed"].mean()
    rows = structure[structure["depth"].notna()].assign(pass_rate=lambda f: f["task"].map(rates)).dropna(
        subset=["pass_rate"])
    if len(rows) < 5:  # Fisher z needs n − 3 − k > 0 and a handful of tasks to mean anything
        return None
    try:
        r = rank_partial_correlation(rows["pass_rate"], rows["depth"], rows["work_lines"], level=level)
    except ValueError as exc:  # constant pass rate or D fully explained by W: say why there is no number
        return {"n": len(rows), "undefined": str(exc)}
    return {"n": len(rows), "undefined": None, **r.model_dump()}  # the template reads `undefined` either way


def raw_counts(stage_estimates: pd.DataFrame, observed: pd.DataFrame, natural: pd.DataFrame) -> pd.DataFrame:
    """Raw counts per agent, condition and task: checkpoint k/m per stage (m: trials with a result), natural
    k0/m0, and the missing trials (no result after their attempts) of each."""
    if not len(observed):
        return pd.DataFrame()
    obs = observed.assign(condition=figures.condition_column(observed))
    tasks = obs.groupby(["agent", "condition", "task"], sort=False).agg(m0=("m0", "first"), k0=("k0", "first"))
    tasks = tasks.reset_index()
    if len(stage_estimates):
        est = stage_estimates.assign(condition=figures.condition_column(stage_estimates)).sort_values("stage_index")
        ck = est.groupby(["agent", "condition", "task"], sort=False).apply(
            lambda g: " ".join(f"{k}/{m}" for k, m in zip(g["k"], g["m"])), include_groups=False)
        tasks["checkpoint k/m per stage"] = [ck.get((a, c, t)) for a, c, t in
                                             zip(tasks["agent"], tasks["condition"], tasks["task"])]
    if len(natural) and "condition" in natural:
        missing = natural[natural["exit_reason"].map(is_missing).astype(bool)]
        errors = missing.groupby(["agent", "condition", "task"]).size()
        tasks["natural missing"] = [int(errors.get((a, c, t), 0)) for a, c, t in
                                    zip(tasks["agent"], tasks["condition"], tasks["task"])]
    return tasks


# -- the context ------------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | np.ndarray):  # flags: words, not a Python list's text
        return ", ".join(str(v) for v in value) or "—"
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:.3f}"
    return str(value)


def table_rows(frame: pd.DataFrame, first: list[str] | None = None, hidden: set[str] = frozenset()) -> dict:
    """A frame as {'columns': [...], 'rows': [[cell, ...]]}: `first` columns in order, then the rest not hidden."""
    if not len(frame):
        return {"columns": [], "rows": []}
    lead = [c for c in (first or []) if c in frame]
    columns = lead + [c for c in frame.columns if c not in lead and c not in hidden and not c.startswith("_")]
    return {"columns": columns, "rows": [[_cell(v) for v in row] for row in frame[columns].itertuples(index=False)]}


def _estimand_notes(residuals: pd.DataFrame) -> list[str]:
    """What each interval of the residual rows estimates, from the rows' own labels where they carry them."""
    notes = []
    if "estimand" in residuals:
        for (method, estimand), g in residuals.groupby(
                [residuals.get("ci_method", pd.Series("", index=residuals.index)), residuals["estimand"]], sort=False):
            notes.append(f"{estimand}: {method} ({len(g)} rows)")
    elif "ci_method" in residuals:
        for method, g in residuals.groupby("ci_method", sort=False):
            notes.append(f"ci_method {method}: {len(g)} rows")
    return notes


@dataclass(frozen=True)
class _FigureSpec:
    key: str
    title: str
    caption: str
    draw: Callable[[ReportInputs, pd.DataFrame], bytes | None]  # (inputs, structure table) -> PNG


def positions_of(inputs: ReportInputs) -> pd.DataFrame:
    """The per-record position table when given, else the chunk-level one from checkpoint trials."""
    return inputs.positions if len(inputs.positions) else chunk_positions(inputs.stage_estimates)


_FIGURES = [
    _FigureSpec("forest", "Forest plot of Γ_H", "Γ̂ with its interval per agent, condition and scope (bold: all "
                "tasks); × marks the simulated truth where the agent is simulated. A large study shows its family "
                "and overall rows only; the residual table has every row.",
                lambda i, s: figures.forest_plot(i.residuals)),
    _FigureSpec("waterfall", "Stage-wise waterfall", "Mean stage term ln(q̂_i / r̂_i) over tasks, cumulated by "
                "stage: where the natural rollout falls behind the checkpoint prediction.",
                lambda i, s: figures.waterfall_plot(i.residuals)),
    _FigureSpec("q_vs_r", "q̂ vs r̂ by stage", "Checkpoint pass rate against natural conditional pass rate per "
                "stage (colour: stage position); below the diagonal the rollout did worse than its checkpoint.",
                lambda i, s: figures.q_vs_r_plot(i.stage_estimates, i.observed)),
    _FigureSpec("survival", "Survival by stage", "Share of natural rollouts that passed at least k stages "
                "(solid) and the checkpoint prediction Π q̂ (dashed).",
                lambda i, s: figures.survival_plot(i.natural, i.stage_estimates)),
    _FigureSpec("contrasts", "Intervention contrasts ΔΓ(I)", "Γ(baseline) − Γ(I), paired over tasks; each side "
                "keeps its own P_expected and P_observed.", lambda i, s: figures.contrast_plot(i.contrasts)),
    _FigureSpec("sensitivity", "Sensitivity ranges", "Range of Γ of the baseline over every admissible protocol, "
                "baseline model, zero rule and decomposition; 'different' only when every interval excludes 0 on one "
                "side, 'equivalent' only when every interval lies inside the declared margin.",
                lambda i, s: figures.sensitivity_plot(i.sensitivity)),
    _FigureSpec("depth_work", "Depth–work plane", "W (solution lines) against D (smallest turn cap some model "
                "passes under), per task; H_dep stands in when D was not measured.",
                lambda i, s: figures.depth_work_plot(s)),
    _FigureSpec("reward_histogram", "Dense reward R", "R = Σ w_k r_k / Σ w_k of every natural rollout (stage "
                "verifiers' rewards, stage weights of task.toml; unreached stages score 0).",
                lambda i, s: figures.reward_histogram(i.dense)),
    _FigureSpec("cost_pass", "Cost–pass Pareto", "Mean cost per run against pass rate, per agent and condition; "
                "the red line joins the points no other beats on both.", lambda i, s: figures.cost_pass_plot(i.dense)),
    _FigureSpec("position", "Accuracy by output position (transduction)", "Accuracy by relative output position "
                "with Wilson intervals per bin; a flat curve means the model does not degrade along the document. "
                "Unit record: the stage verifiers' per-line scores (reward.json) of the baseline natural rollouts, "
                "lines of stages a rollout never reached left out; unit chunk: checkpoint pass rates per chunk.",
                lambda i, s: figures.position_plot(positions_of(i))),
]


def report_figures(inputs: ReportInputs) -> list[Figure]:
    """Every figure the inputs have data for, in report order."""
    structure = structure_table(inputs.catalog, inputs.depth)
    out = []
    for spec in _FIGURES:
        png = spec.draw(inputs, structure)
        if png is not None:
            out.append(Figure(key=spec.key, title=spec.title, caption=spec.caption, png=png))
    return out


def figure_metadata(figs: list[Figure]) -> dict[str, str]:
    """{figure key: markdown with the figure inline}, for `MetadataValue.md` on a Dagster asset."""
    return {f"figure_{f.key}": f"**{f.title}**\n\n![{f.title}]({f.data_uri})\n\n{f.caption}" for f in figs}


def depth_metadata(depth: pd.DataFrame) -> dict[str, str]:
    """A task_depth table as markdown for Dagster metadata: D, N and W per task, and the depth–work plane."""
    shown = {"above_largest_cap": "> largest cap", "no_estimate": "none"}
    lines = ["| task | family | D | N | W lines | W chars | runs |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in depth.itertuples():
        d = shown.get(r.depth_status, "—" if pd.isna(r.depth) else str(int(r.depth)))
        n = "—" if pd.isna(r.n_turns) else str(int(r.n_turns))
        lines.append(f"| {r.task} | {r.family} | {d} | {n} | {r.work_lines} | {r.work_chars} | {r.n_runs} |")
    meta = {"depth_table": "\n".join(lines)}
    png = figures.depth_work_plot(depth) if len(depth) else None
    if png is not None:
        spec = next(f for f in _FIGURES if f.key == "depth_work")
        meta["figure_depth_work"] = figure_metadata([Figure(key=spec.key, title=spec.title, caption=spec.caption,
                                                            png=png)])["figure_depth_work"]
    return meta


def too_small_notes(residuals: pd.DataFrame) -> list[str]:
    """One sentence per family/all row whose tasks are too few for a (narrow) population interval."""
    if not len(residuals) or "ci_method" not in residuals:
        return []
    notes = []
    rows = residuals[residuals["scope"] != "task"].drop_duplicates(["scope", "name"])
    for r in rows.itertuples():
        flags = getattr(r, "flags", None)
        flags = [] if flags is None else list(flags)  # a numpy array after parquet: `or []` is ambiguous
        n = getattr(r, "n_tasks", None)
        if r.ci_method == "too-few-tasks":
            notes.append(f"{r.scope} {r.name} ({n} task{'s' if n != 1 else ''}): too few tasks for a population "
                         "(tasks: sampled) interval; only the tasks-fixed interval is shown.")
        elif "few-tasks" in flags:
            notes.append(f"{r.scope} {r.name} ({n} tasks): the tasks-sampled interval rests on fewer than 4 degrees "
                         "of freedom — Student-t, wide and conservative.")
    return notes


def rule_notes(residuals: pd.DataFrame) -> dict:
    """Where the zero rule moved a shown estimate off the raw ratio (a count at 0 or m; `rule_note` of the
    rows): how many rows, the notes of family/overall rows (the rows a reader quotes) and one task row's as an
    example (the residual table has every row's)."""
    if not len(residuals) or "rule_note" not in residuals:
        return {"n": 0, "rows": [], "example": None}
    moved = residuals[residuals["rule_note"].notna()]
    label = [f"{a} · {c or 'baseline'} · {s} {n}" for a, c, s, n in
             zip(moved["agent"], moved.get("condition", pd.Series(None, index=moved.index)), moved["scope"],
                 moved["name"])]
    task = moved["scope"] == "task"
    return {"n": len(moved), "rows": [f"{lab}: {note}" for lab, note, t in zip(label, moved["rule_note"], task) if not t],
            "example": next((f"{lab}: {note}" for lab, note, t in zip(label, moved["rule_note"], task) if t), None)}


#: Flags that change how a claim reads, in words (the legend shows only those that occur). `boundary`
#: (some count at m) is left out: in a study of capable agents it is on nearly every row and says nothing.
FLAG_WORDS = {
    "zero-rule": "a raw count of 0 entered a log",
    "one-sided": "only a one-sided bound exists (a raw count of 0)",
    "no-estimate": "no estimate: no success on either side",
    "few-tasks": "few tasks: the population interval rests on < 4 degrees of freedom or families of 2–4 tasks "
                 "(wide, conservative)",
    "too-few-tasks": "too few tasks for a population interval: the tasks-fixed interval is shown",
    "excluded": "tasks dropped by the exclude rule",
    "few-families": "fewer than 10 families: the family mix is held fixed (families are not resampled)",
}


def _num(value: object) -> str:
    return _cell(None if value is None or (isinstance(value, float) and math.isnan(value)) else value)


def claim_sentences(claims: pd.DataFrame) -> list[dict]:
    """Per agent, one sentence per confirmatory claim (estimate, adjusted interval, verdict, truth), and
    the flags that change its reading."""
    out: dict[str, list[dict]] = {}
    for c in claims.to_dict(orient="records") if len(claims) else []:
        what = f"Γ under {c['condition']}" if c["kind"] == "residual" else f"ΔΓ({c['condition']}) = Γ(baseline) − Γ({c['condition']})"
        scope = "" if c["name"] == "all" else f" in family {c['name']}"
        flags = [f for f in (c.get("flags") if c.get("flags") is not None else []) if f in FLAG_WORDS]
        truth = "" if c.get("truth") is None or (isinstance(c["truth"], float) and math.isnan(c["truth"])) \
            else f"; truth {_num(c['truth'])}"
        text = (f"{what}{scope}: {_num(c['estimate'])}, adjusted interval [{_num(c['adj_ci_low'])}, "
                f"{_num(c['adj_ci_high'])}] (unadjusted [{_num(c['ci_low'])}, {_num(c['ci_high'])}], "
                f"{c['claim_estimand']}){truth}")
        out.setdefault(c["agent"], []).append({"text": text, "verdict": c["verdict"], "flags": flags})
    return [{"agent": a, "claims": cs} for a, cs in out.items()]


def flag_legend(claims: pd.DataFrame) -> list[dict]:
    """The words of the flags the claims carry (only those: a legend of flags nobody sees is noise)."""
    seen = {f for fl in (claims["flags"] if len(claims) and "flags" in claims else []) for f in (fl if fl is not None else [])}
    return [{"flag": f, "meaning": w} for f, w in FLAG_WORDS.items() if f in seen]


def report_context(header: ReportHeader, inputs: ReportInputs, figs: list[Figure] | None = None) -> dict:
    """Everything the template renders: header, figures, tables, statements of counts and estimands."""
    figs = report_figures(inputs) if figs is None else figs
    residuals = inputs.residuals
    structure = structure_table(inputs.catalog, inputs.depth)
    overall_contrasts = inputs.contrasts[inputs.contrasts["scope"] != "task"] if len(inputs.contrasts) else inputs.contrasts
    sensitivity = inputs.sensitivity[inputs.sensitivity["scope"] != "task"] if len(inputs.sensitivity) else inputs.sensitivity
    applied = int(residuals["zero_rule_applied"].fillna(False).astype(bool).sum()) if "zero_rule_applied" in residuals else None
    positions = positions_of(inputs)
    return {
        "header": header.model_dump(),
        "claims": claim_sentences(inputs.claims),
        "flag_legend": flag_legend(inputs.claims),
        "figures": [{"key": f.key, "title": f.title, "caption": f.caption, "src": f.data_uri} for f in figs],
        "residuals": table_rows(residuals, RESIDUAL_COLUMNS, _HIDDEN),
        "estimand_notes": _estimand_notes(residuals),
        "too_small": too_small_notes(residuals),
        "zero_rule_applied": applied,
        "rule_notes": rule_notes(residuals),
        "n_residual_rows": len(residuals),
        "raw_counts": table_rows(raw_counts(inputs.stage_estimates, inputs.observed, inputs.natural)),
        "contrasts": table_rows(overall_contrasts, ["agent", "condition", "scope", "name", "delta_gamma",
                                                    "ci_estimand", "ci_low", "ci_high", "ci_method",
                                                    "true_delta_gamma_sampled", "trial_ci_low", "trial_ci_high",
                                                    "true_delta_gamma", "flags"], _HIDDEN | {"delta_stage_terms"}),
        "sensitivity": table_rows(sensitivity, ["agent", "scope", "name", "gamma_min", "gamma_max", "verdict",
                                                "direction", "driver", "n_choices", "true_gamma"], _HIDDEN),
        "dense": table_rows(dense_summary(inputs.dense, header.level)),
        "structure": table_rows(structure, ["task", "family", "depth", "depth_status", "n_turns", "work_lines"]),
        "depth_measured": bool(len(structure) and "depth" in structure and structure["depth"].notna().any()),
        "depth_correlation": depth_correlation(structure, inputs.natural, header.level),
        "positions": table_rows(positions, ["agent", "bin_low", "bin_high", "k", "n", "accuracy", "ci_low", "ci_high"]),
    }
