"""The report's figures: plain pandas tables in, PNG bytes out (None when a table holds no data for it).

Each function reads only named columns of one or two plain tables (the stored asset tables or
rows built from them), so a figure can be drawn for the HTML report, for Dagster metadata, or in
a notebook from the same frame. Optional columns (`true_gamma`, `condition`, `depth`, ...) are used
when present. Figures use matplotlib's object API (no pyplot state), so they can be drawn from
several threads of one process.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

from hrbench.exits import is_missing
from hrbench.stats.dense import pareto_frontier

BLUE, RED, GREY = "#2b6cb0", "#c53030", "#718096"
_SCOPE_RANK = {"all": 0, "family": 1, "task": 2}


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """A figure as PNG bytes (the figure is not kept: each call builds its own)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def condition_column(frame: pd.DataFrame) -> pd.Series:
    """The `condition` column, or `baseline` for tables written before conditions existed."""
    return frame["condition"] if "condition" in frame else pd.Series("baseline", index=frame.index)


def _ranked(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    frame = frame.assign(_rank=frame["scope"].map(_SCOPE_RANK), _condition=condition_column(frame))
    return frame.sort_values([*keys[:-1], "_rank", keys[-1]], kind="stable")


def _interval_rows(labels: list[str], points: Sequence, lows: Sequence, highs: Sequence, truths: Sequence,
                   bold: Sequence[bool], xlabel: str) -> bytes:
    """One row per label: an interval, its point and (×) the simulated truth."""
    fig = Figure(figsize=(8, 0.28 * len(labels) + 1.2))
    ax = fig.subplots()
    y = np.arange(len(labels))[::-1]
    # One artist per kind and weight, not per row: a study of a few hundred rows draws in a second.
    for strong in (False, True):
        weight = 2.5 if strong else 1.2
        rows = [i for i, b in enumerate(bold) if bool(b) == strong]
        spans = [(y[i], max(lows[i], -1e3), min(highs[i], 1e3)) for i in rows
                 if pd.notna(lows[i]) and pd.notna(highs[i])]
        if spans:
            ys, starts, ends = (np.array(v, dtype=float) for v in zip(*spans))
            ax.hlines(ys, starts, ends, color=BLUE, lw=weight)
            # end ticks keep a zero-width range visible
            ax.plot(np.r_[starts, ends], np.r_[ys, ys], ls="none", color=BLUE, marker="|", ms=8)
        dots = [(points[i], y[i]) for i in rows if points[i] is not None and pd.notna(points[i])]
        if dots:
            ax.plot(*zip(*dots), "o", color=BLUE, ms=4 + weight)
    crosses = [(t, yi) for t, yi in zip(truths, y) if t is not None and pd.notna(t)]
    if crosses:
        ax.plot(*zip(*crosses), "x", color=RED, ms=6, ls="none")
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel(xlabel)
    return png_bytes(fig)


def _truths(frame: pd.DataFrame, column: str) -> list:
    return list(frame[column]) if column in frame else [None] * len(frame)


def _headline_truths(frame: pd.DataFrame, fixed: str, sampled: str) -> list:
    """The truth of each row's plotted interval (ci_*): the tasks-sampled truth where that interval is
    about the population of tasks, the tasks-fixed one otherwise (task rows)."""
    if "ci_estimand" not in frame or sampled not in frame:
        return _truths(frame, fixed)
    return [s if e == "tasks: sampled" else f
            for e, f, s in zip(frame["ci_estimand"], _truths(frame, fixed), frame[sampled])]


# Beyond this many rows a forest plot is taller than a page is useful (and slow to draw: its labels
# are most of the cost), so the task rows are left out and the residual table below it has them.
FOREST_MAX_ROWS = 120


def forest_rows(residuals: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows a forest plot shows (ranked), and how many task rows it leaves out (0 when it fits)."""
    rows = _ranked(residuals, ["agent", "_condition", "name"])
    if len(rows) <= FOREST_MAX_ROWS:
        return rows, 0
    tasks = rows["scope"] == "task"
    return rows[~tasks], int(tasks.sum())


def forest_plot(residuals: pd.DataFrame) -> bytes | None:
    """Γ̂ with its interval per agent, condition and scope (task, family, all); × = simulated truth.
    A study with more than FOREST_MAX_ROWS rows shows its family and overall rows (the label says so)."""
    if not len(residuals):
        return None
    rows, left_out = forest_rows(residuals)
    labels = [f"{a} · {c} · {s}:{n}" for a, c, s, n in zip(rows["agent"], rows["_condition"], rows["scope"],
                                                           rows["name"])]
    xlabel = "Γ_H = ln(P_expected / P_observed)  [nats]   (× = simulated truth of the interval's estimand)"
    if left_out:
        xlabel += f"\n{left_out} task rows left out: the residual table has them"
    return _interval_rows(labels, list(rows["gamma"]), list(rows["ci_low"]), list(rows["ci_high"]),
                          _headline_truths(rows, "true_gamma", "true_gamma_sampled"), list(rows["scope"] == "all"),
                          xlabel)


def contrast_plot(contrasts: pd.DataFrame) -> bytes | None:
    """ΔΓ(I) = Γ(baseline) − Γ(I) per agent and condition (family and overall rows), paired intervals."""
    rows = contrasts[contrasts["scope"] != "task"] if len(contrasts) else contrasts
    if not len(rows):
        return None
    rows = _ranked(rows, ["agent", "_condition", "name"])
    labels = [f"{a} · {c} · {s}:{n}" for a, c, s, n in zip(rows["agent"], rows["_condition"], rows["scope"],
                                                           rows["name"])]
    return _interval_rows(labels, list(rows["delta_gamma"]), list(rows["ci_low"]), list(rows["ci_high"]),
                          _headline_truths(rows, "true_delta_gamma", "true_delta_gamma_sampled"),
                          list(rows["scope"] == "all"),
                          "ΔΓ(I) = Γ(baseline) − Γ(I)  [nats]   (× = simulated truth of the interval's estimand)")


def sensitivity_plot(verdicts: pd.DataFrame) -> bytes | None:
    """The range of Γ over the admissible set per agent (family and overall), verdict in the label."""
    rows = verdicts[verdicts["scope"] != "task"] if len(verdicts) else verdicts
    if not len(rows):
        return None
    rows = _ranked(rows, ["agent", "name"])
    labels = [f"{r.agent} · {r.scope}:{r.name} · {r.verdict} ({r.driver})" for r in rows.itertuples()]
    return _interval_rows(labels, [None] * len(rows), list(rows["gamma_min"]), list(rows["gamma_max"]),
                          _truths(rows, "true_gamma"), list(rows["scope"] == "all"),
                          "range of Γ_H over the admissible set  [nats]")


def stage_term_means(residuals: pd.DataFrame) -> pd.DataFrame:
    """Mean over tasks of the stage term ln(q̂_i / r̂_i) at each stage position, per agent and condition.

    From the task rows' `stage_terms` (JSON lists); undefined terms (a stage never reached) are left
    out of their mean. Columns: agent, condition, stage_index, term, n_tasks.
    """
    if not len(residuals) or "stage_terms" not in residuals:
        return pd.DataFrame(columns=["agent", "condition", "stage_index", "term", "n_tasks"])
    tasks = residuals[(residuals["scope"] == "task") & residuals["stage_terms"].notna()]
    rows = []
    for agent, condition, terms in zip(tasks["agent"], condition_column(tasks), tasks["stage_terms"]):
        values = json.loads(terms) if isinstance(terms, str) else list(terms)
        rows += [{"agent": agent, "condition": condition, "stage_index": i, "term": v}
                 for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not rows:
        return pd.DataFrame(columns=["agent", "condition", "stage_index", "term", "n_tasks"])
    grouped = pd.DataFrame(rows).groupby(["agent", "condition", "stage_index"], sort=False)["term"]
    return grouped.agg(term="mean", n_tasks="size").reset_index()


def _panels(keys: list, width: float = 4.0, height: float = 3.0) -> tuple[Figure, list]:
    cols = min(3, len(keys))
    nrows = math.ceil(len(keys) / cols)
    fig = Figure(figsize=(width * cols, height * nrows))
    axes = np.atleast_1d(fig.subplots(nrows, cols, squeeze=False)).ravel()
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    return fig, list(axes[: len(keys)])


def waterfall_plot(residuals: pd.DataFrame) -> bytes | None:
    """Stage-wise waterfall per agent and condition: each bar adds the mean stage term ln(q̂_i / r̂_i).

    Under the product baseline a task's Γ is the sum of its stage terms, so the bars climb from 0 to
    the mean task-level Γ; a tall bar says at which stage the natural rollout loses against the
    checkpoint prediction.
    """
    terms = stage_term_means(residuals)
    if not len(terms):
        return None
    keys = list(dict.fromkeys(zip(terms["agent"], terms["condition"])))
    fig, axes = _panels(keys, 3.6, 2.6)
    for ax, (agent, condition) in zip(axes, keys):
        mine = terms[(terms["agent"] == agent) & (terms["condition"] == condition)].sort_values("stage_index")
        start = np.concatenate([[0.0], np.cumsum(mine["term"].to_numpy())[:-1]])
        colors = [RED if t > 0 else BLUE for t in mine["term"]]
        ax.bar([f"s{i + 1}" for i in mine["stage_index"]], mine["term"], bottom=start, color=colors)
        total = float(mine["term"].sum())
        ax.axhline(total, color=GREY, lw=0.8, ls=":")
        ax.axhline(0, color="black", lw=0.6)
        ax.set_title(f"{agent} · {condition}  (Σ = {total:.2f})", fontsize=8)
        ax.set_ylabel("cumulative ln(q̂/r̂)", fontsize=7)
        ax.tick_params(labelsize=7)
    return png_bytes(fig)


def q_vs_r_plot(estimates: pd.DataFrame, observed: pd.DataFrame) -> bytes | None:
    """q̂_i (checkpoint) against r̂_i (natural rollout) per stage, one panel per agent, colour = stage position.

    Points under the diagonal are stages where the natural rollout did worse than the checkpoint
    predicted; the diagonal is Γ's stage term = 0.
    """
    if not len(estimates) or not len(observed):
        return None
    est = estimates.assign(condition=condition_column(estimates))
    obs = observed.assign(condition=condition_column(observed))
    both = est.merge(obs[["agent", "condition", "task", "stage_index", "r_hat", "reached"]],
                     on=["agent", "condition", "task", "stage_index"])
    both = both[both["reached"] > 0]
    if not len(both):
        return None
    agents = list(dict.fromkeys(both["agent"]))
    fig, axes = _panels(agents, 3.4, 3.2)
    markers = dict(zip(dict.fromkeys(both["condition"]), "osD^v<>"))
    top = int(both["stage_index"].max())
    for ax, agent in zip(axes, agents):
        mine = both[both["agent"] == agent]
        for condition, group in mine.groupby("condition", sort=False):
            ax.scatter(group["q_hat"], group["r_hat"], c=group["stage_index"], cmap="viridis", vmin=0,
                       vmax=max(1, top), marker=markers.get(condition, "o"), s=18, alpha=0.8, label=condition)
        ax.plot([0, 1], [0, 1], color=GREY, lw=0.8, ls="--")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("q̂ (checkpoint)", fontsize=7)
        ax.set_ylabel("r̂ (natural)", fontsize=7)
        ax.set_title(agent, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower right")
    return png_bytes(fig)


def survival_table(natural: pd.DataFrame, estimates: pd.DataFrame | None = None) -> pd.DataFrame:
    """Share of natural rollouts that passed at least k stages (k = 0..max), per agent and condition.

    `expected` (when stage estimates are given) is the checkpoint prediction of the same share: the
    mean over the rollouts' tasks of Π_{i<k} q̂_i (a task with fewer than k stages contributes 0).
    """
    if not len(natural):
        return pd.DataFrame(columns=["agent", "condition", "k", "observed", "expected", "n"])
    nat = natural[~natural["exit_reason"].map(is_missing).astype(bool)].assign(condition=condition_column(natural))
    cumq: dict[tuple[str, str, str], np.ndarray] = {}
    if estimates is not None and len(estimates):
        est = estimates.assign(condition=condition_column(estimates))
        for (agent, condition, task), group in est.groupby(["agent", "condition", "task"], sort=False):
            q = group.sort_values("stage_index")["q_hat"].to_numpy(dtype=float)
            cumq[(agent, condition, task)] = np.concatenate([[1.0], np.cumprod(q)])
    rows = []
    for (agent, condition), group in nat.groupby(["agent", "condition"], sort=False):
        depth = group["stages_passed"].to_numpy(dtype=int)
        top = int(depth.max()) if depth.size else 0
        tops = [cumq.get((agent, condition, t)) for t in group["task"]]
        top = max([top, *[len(c) - 1 for c in tops if c is not None]])
        for k in range(top + 1):
            expected = (float(np.mean([c[k] if k < len(c) else 0.0 for c in tops]))
                        if all(c is not None for c in tops) and tops else math.nan)
            rows.append({"agent": agent, "condition": condition, "k": k, "observed": float(np.mean(depth >= k)),
                         "expected": expected, "n": int(depth.size)})
    return pd.DataFrame(rows)


def survival_plot(natural: pd.DataFrame, estimates: pd.DataFrame | None = None) -> bytes | None:
    """Survival by stage: observed share of rollouts past k stages (solid) vs the checkpoint prediction (dashed)."""
    table = survival_table(natural, estimates)
    if not len(table):
        return None
    agents = list(dict.fromkeys(table["agent"]))
    fig, axes = _panels(agents, 3.6, 2.8)
    for ax, agent in zip(axes, agents):
        mine = table[table["agent"] == agent]
        for i, (condition, group) in enumerate(mine.groupby("condition", sort=False)):
            color = f"C{i}"
            ax.step(group["k"], group["observed"], where="post", color=color, label=f"{condition} observed")
            if group["expected"].notna().all():
                ax.step(group["k"], group["expected"], where="post", color=color, ls="--", lw=0.9)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("stages passed ≥ k", fontsize=7)
        ax.set_ylabel("share of rollouts", fontsize=7)
        ax.set_title(f"{agent}  (dashed: Π q̂)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    return png_bytes(fig)


def depth_work_plot(structure: pd.DataFrame) -> bytes | None:
    """The depth–work plane: W (solution lines) against D (turn-capped depth) per task.

    Without a measured D (no `depth` column, or no estimate) the dependency depth H_dep is on the
    y axis instead, and the axis says so.
    """
    if not len(structure):
        return None
    has_depth = "depth" in structure and structure["depth"].notna().any()
    y_col, y_label = ("depth", "D (smallest passing turn cap)") if has_depth else \
        ("dependency_depth", "H_dep (dependency depth; D not measured)")
    rows = structure[structure[y_col].notna()] if y_col in structure else structure.iloc[0:0]
    if not len(rows):
        return None
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for i, (family, group) in enumerate(rows.groupby("family", sort=True)):
        # the count in the label: tasks of one family often share a point (same D and W)
        ax.scatter(group["work_lines"], group[y_col], color=f"C{i % 10}", label=f"{family} ({len(group)})", s=24,
                   alpha=0.8)
    # log axes labelled in plain numbers: D at the values it took, W at 1-2-5 steps (the default minor
    # labels overlap: "3×10¹4×10¹")
    if has_depth:
        ax.set_yscale("log", base=2)
        ax.set_yticks(sorted({int(d) for d in rows[y_col]}))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("W (non-blank, non-comment solve.sh lines)")
    ax.set_ylabel(y_label)
    ax.legend(fontsize=6, ncol=2)
    return png_bytes(fig)


def reward_histogram(dense: pd.DataFrame) -> bytes | None:
    """Dense reward R of every natural rollout, per agent (overlaid step histograms on [0, 1])."""
    if not len(dense):
        return None
    fig = Figure(figsize=(6, 3.4))
    ax = fig.subplots()
    bins = np.linspace(0, 1, 21)
    for i, (agent, group) in enumerate(dense.groupby("agent", sort=False)):
        ax.hist(group["reward"], bins=bins, histtype="step", lw=1.6, color=f"C{i}", label=f"{agent} (n={len(group)})")
    for tau in (0.9, 0.95, 1.0):
        ax.axvline(tau, color=GREY, lw=0.6, ls=":")
    ax.set_xlabel("R = Σ w_k r_k / Σ w_k   (dotted: τ = 0.9, 0.95, 1)")
    ax.set_ylabel("rollouts")
    ax.legend(fontsize=7)
    return png_bytes(fig)


def cost_pass_table(dense: pd.DataFrame) -> pd.DataFrame:
    """Per agent and condition: mean cost per run and pass rate (R ≥ 1); on the cost–pass frontier or not.

    Cost is dollars when any run cost money, else tokens, else turns (sim agents spend neither), named
    in the `cost_unit` column.
    """
    if not len(dense):
        return pd.DataFrame(columns=["agent", "condition", "cost", "cost_unit", "pass_rate", "n", "frontier"])
    unit = next((c for c in ("cost_usd", "tokens", "turns") if c in dense and dense[c].sum() > 0), "turns")
    dense = dense.assign(condition=condition_column(dense))
    table = dense.groupby(["agent", "condition"], sort=False).agg(
        cost=(unit, "mean"), pass_rate=("reward", lambda r: float(np.mean(r >= 1 - 1e-9))), n=("reward", "size"),
    ).reset_index()
    table["cost_unit"] = unit
    frontier = set(pareto_frontier(table["cost"], table["pass_rate"]))
    table["frontier"] = [i in frontier for i in range(len(table))]
    return table


def cost_pass_plot(dense: pd.DataFrame) -> bytes | None:
    """Cost–pass plane per agent and condition, with the Pareto frontier."""
    table = cost_pass_table(dense)
    if not len(table):
        return None
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    ax.scatter(table["cost"], table["pass_rate"], color=BLUE, s=28)
    for r in table.itertuples():
        ax.annotate(f"{r.agent}·{r.condition}", (r.cost, r.pass_rate), fontsize=6, xytext=(3, 3),
                    textcoords="offset points")
    front = table[table["frontier"]].sort_values("cost")
    ax.plot(front["cost"], front["pass_rate"], color=RED, lw=1.2, marker="o", mfc="none", ms=10,
            label="Pareto frontier")
    ax.set_xlabel(f"mean {table['cost_unit'].iloc[0]} per run")
    ax.set_ylabel("pass rate (R = 1)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7)
    return png_bytes(fig)


def position_plot(positions: pd.DataFrame) -> bytes | None:
    """Accuracy by relative output position (bins of i/n) per agent, with Wilson intervals per bin."""
    if not len(positions):
        return None
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    for i, (agent, group) in enumerate(positions.groupby("agent", sort=False)):
        group = group[group["n"] > 0].sort_values("bin_low")
        mid = (group["bin_low"] + group["bin_high"]) / 2
        ax.plot(mid, group["accuracy"], "o-", color=f"C{i}", label=agent, ms=4)
        ax.fill_between(mid, group["ci_low"], group["ci_high"], color=f"C{i}", alpha=0.15)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    unit = positions["unit"].iloc[0] if "unit" in positions else "record"
    ax.set_xlabel(f"relative output position ({unit})")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7)
    return png_bytes(fig)
