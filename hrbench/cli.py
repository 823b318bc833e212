"""The core's commands of the `hrbench` command line (tasks, agents, plan, report, depth, lineage, verify).

The Dagster-facing commands (demo, run, ui) live in `pipelines/cli.py`, which adds them to this `app`:
the `hrbench` console script is `pipelines.cli:app`, and the core never imports anything above it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Callable

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hrbench.envs.base import SandboxError
from hrbench.envs.registry import BackendOptions, TaskBackends, backend_choices
from hrbench.harness.journal import JournalError, check_journal_tree
from hrbench.locking import OutDirBusy, OutDirLock
from hrbench.storage import StorageError
from hrbench.protocol import BUILTIN_REGISTRY, StudyError, load_study
from hrbench.steps import StudyFailed
from hrbench.stores import PREREGISTRATION_KEY, StudyStores
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_paths, load_registry, load_task
from hrbench.tasks.model import TaskError

app = typer.Typer(help="hrbench: horizon residuals of agents on long tasks.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task packages: list and audit.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
agents_app = typer.Typer(help="Agent configuration files: validate and ping.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
import_app = typer.Typer(help="Trials recorded elsewhere, taken into a study.", no_args_is_help=True)
app.add_typer(import_app, name="import")
export_app = typer.Typer(help="A study's trials as tasks for other harnesses.", no_args_is_help=True)
app.add_typer(export_app, name="export")
# Redirected to a file (CI logs), rich would cut tables at 80 columns; names must survive verbatim.
console = Console(width=None if sys.stdout.isatty() else 4096)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 4096)


def _fail(exc: BaseException | str, label: str = "error:", style: str = "red", hint: str = "") -> typer.Exit:
    """Print a user-facing error verbatim (its `[task]`, `[[steps]]`, `[]` are text, not markup); the
    caller raises the returned Exit."""
    err.print(Text.assemble((label, style), " ", str(exc), hint), soft_wrap=True)
    return typer.Exit(1)


def run_into(study: Path, out: Path, run_study: Callable[[Path, Path, Console, bool], Path]) -> None:
    """Run a study into OUT with `run_study(study, out, console, progress)` (it returns OUT), holding OUT's lock;
    then print the residuals, contrasts and sensitivity of its summary.json."""
    try:
        load_study(study)  # a bad study file is reported before OUT is created or Dagster is imported
    except (StudyError, TaskError) as exc:
        raise _fail(exc) from exc
    try:
        lock = OutDirLock(out, command=shlex.join(["hrbench", *sys.argv[1:]])).acquire()
    except OutDirBusy as exc:
        raise _fail(exc) from exc
    try:
        check_journal_tree(StudyStores(out).journal_root)
    except JournalError as exc:
        lock.release()
        raise _fail(exc) from exc
    if lock.took_over is not None:
        err.print(Text(f"note: took over the lock of a run that ended without releasing it "
                       f"({lock.took_over.describe()})"), soft_wrap=True)
    try:
        try:
            # progress bars only on a terminal: in a redirected log they are thousands of lines
            stores = StudyStores(run_study(study, out, err, sys.stderr.isatty()))
        except (StudyFailed, StudyError, TaskError, StorageError, SandboxError) as exc:
            raise _fail(exc) from exc
    finally:
        lock.release()
    summary = json.loads(stores.summary_path.read_text())
    # Thirteen columns: never squeeze them into a pipe's default 80 (a narrower terminal wraps instead).
    wide = Console(width=max(console.width, 180))
    for line in claim_sentences(summary):  # the claims first: what the study stands behind
        console.print(line, markup=False, soft_wrap=True)
    for warning in summary.get("design_warnings") or []:  # recorded in the pre-registration before any trial
        console.print(f"warning: below the calibrated range: {warning}", markup=False, soft_wrap=True)
    wide.print(_residual_table(summary))
    console.print("Exploratory (every row but the claims above). tasks: sampled — interval for the population of "
                  "tasks the row's tasks stand for (none for a row without a family of ≥ 2 tasks); tasks: fixed — "
                  "these tasks only. Truth: simulated agents only. Flags: docs/statistics.md §3.")
    for line in rule_note_lines(summary):
        console.print(line, markup=False, soft_wrap=True)
    for line in _missing_lines(summary):
        console.print(line, markup=False, style="yellow")
    if summary["contrasts"]:
        table = Table(title="Interventions: ΔΓ(I) = Γ(baseline) − Γ(I), overall, paired over tasks")
        pct = level_label(summary)
        for column in ("agent", "condition", "ΔΓ", f"{pct} CI (tasks: sampled)", "true", f"{pct} CI (tasks: fixed)",
                       "true"):
            table.add_column(column)
        for r in summary["contrasts"]:
            if r["scope"] == "all":
                table.add_row(r["agent"], r["condition"], _fmt(r["delta_gamma"]),
                              _interval(r["ci_low"], r["ci_high"]), _fmt(r.get("true_delta_gamma_sampled")),
                              _interval(r["trial_ci_low"], r["trial_ci_high"]), _fmt(r["true_delta_gamma"]))
        wide.print(table)
    for r in summary["sensitivity"]:
        if r["scope"] == "all":
            console.print(f"sensitivity {r['agent']}: {r['verdict']}, Γ in [{_fmt(r['gamma_min'])}, "
                          f"{_fmt(r['gamma_max'])}] over {r['n_choices']} choices (driver: {r['driver']})",
                          markup=False)
    console.print(f"report: {stores.report_path}", markup=False)
    console.print(f"summary: {stores.summary_path}", markup=False)


def _fmt(value: object) -> str:
    """A number of summary.json: None = undefined, "±Infinity" = an open interval end."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return {"Infinity": "∞", "-Infinity": "−∞"}.get(value, value)
    return f"{value:.3f}"


def _interval(low: object, high: object) -> str:
    return "—" if low is None and high is None else f"[{_fmt(low)}, {_fmt(high)}]"


def level_label(summary: dict) -> str:
    """The study's interval level as a percentage ("99.5%"), from summary.json."""
    return f"{100 * summary['level']:g}%"


def claim_sentences(summary: dict) -> list[str]:
    """One sentence per confirmatory claim: estimate, adjusted interval, verdict, truth where known."""
    claims = summary.get("claims") or []
    if not claims:
        return []
    rule = {"holm": "family-wise error (Holm)", "maxt": "family-wise error (max-|t| simultaneous band)",
            "by": "false discovery rate (Benjamini–Yekutieli)"}
    # one level for every claim, but with the max-|t| band a claim with no t interval keeps Bonferroni's
    levels = sorted({f"{100 * c['adj_level']:.4g}%" for c in claims if c.get("adj_level") is not None})
    lines = [f"Confirmatory claims ({summary['n_claims']}; {rule[summary['error_rate']]} at α = {summary['alpha']:g}; "
             f"adjusted intervals at {' / '.join(levels) or '—'}; equivalence margin "
             f"{'none: nothing is called equivalent' if summary['equivalence_margin'] is None else summary['equivalence_margin']}):"]
    for c in claims:
        what = f"Γ under {c['condition']}" if c["kind"] == "residual" else f"ΔΓ({c['condition']})"
        scope = "" if c["name"] == "all" else f" ({c['name']})"
        truth = "" if c["truth"] is None else f"; truth {_fmt(c['truth'])}"
        lines.append(f"  {c['agent']}: {what}{scope} = {_fmt(c['estimate'])}, adjusted "
                     f"{_interval(c['adj_ci_low'], c['adj_ci_high'])} (unadjusted {_interval(c['ci_low'], c['ci_high'])}, "
                     f"{c['claim_estimand']}) — {c['verdict']}{truth}")
    return lines


def _residual_table(summary: dict) -> Table:
    """Family and overall rows: each interval beside the truth of its own estimand, and the row's flags."""
    table = Table(title=f"Horizon residuals · {summary['study']} · prereg {summary['prereg_sha256'][:12]}")
    pct = level_label(summary)  # the study's level, never a constant: a 99.5 % study once printed "95% CI"
    columns = ("agent", "condition", "scope", "name", "tasks", "P_exp", "P_obs", "Γ", f"{pct} CI tasks: sampled",
               "true Γ sampled", f"{pct} CI tasks: fixed", "true Γ fixed", "flags")  # each interval, then its truth
    for column in columns:
        table.add_column(column, justify="left" if column in ("agent", "condition", "scope", "name", "flags")
                         else "right")
    for r in summary["residuals"]:
        if r["scope"] == "task":
            continue
        gamma = _fmt(r["gamma"]) if r["gamma"] is not None or r["bound"] is None else f"{r['bound']} bound"
        sampled = _interval(r["ci_low"], r["ci_high"]) if r["ci_method"] != "too-few-tasks" else "too few tasks"
        table.add_row(r["agent"], r.get("condition") or "baseline", r["scope"], escape(r["name"]), str(r["n_tasks"]),
                      _fmt(r["p_expected"]), _fmt(r["p_observed"]), gamma, sampled, _fmt(r.get("true_gamma_sampled")),
                      _interval(r["trial_ci_low"], r["trial_ci_high"]), _fmt(r["true_gamma"]),
                      escape(", ".join(r.get("flags") or []) or "—"))
    return table


def rule_note_lines(summary: dict) -> list[str]:
    """Where the zero rule moved an estimate off the raw ratio (a count at 0 or m): one line per row the table
    above shows, then how many task rows (not shown) it moved, with where their notes are."""
    moved = [r for r in summary["residuals"] if r.get("rule_note")]
    lines = [f"{r['agent']} {r.get('condition') or 'baseline'} {r['scope']} {r['name']}: {r['rule_note']}"
             for r in moved if r["scope"] != "task"]
    tasks = sum(r["scope"] == "task" for r in moved)
    if tasks:
        rule = next(r["zero_rule"] for r in moved)
        lines.append(f"task rows: the {rule} rule moved {tasks} task rows' P_exp, P_obs and Γ off the raw ratio at a "
                     "count of 0 or m (each row's rule_note: summary.json, report's residual table); family and overall "
                     "rows sum the raw ratios")
    return lines


def _missing_lines(summary: dict) -> list[str]:
    """One line per agent and condition with missing trials (no result after their attempts): how many of the
    planned, and the tasks they are in; none when every trial has a result."""
    lines = []
    for r in summary["residuals"]:
        if r["scope"] == "all" and r.get("m_missing"):
            tasks = [t["name"] for t in summary["residuals"] if t["scope"] == "task" and t.get("m_missing")
                     and t["agent"] == r["agent"] and t.get("condition") == r.get("condition")]
            lines.append(f"missing trials {r['agent']} {r.get('condition') or 'baseline'}: {r['m_missing']} of "
                         f"{r['m_planned']} (no result after their attempts; left out of every estimate) in "
                         f"{', '.join(tasks)}; re-run the same command to retry them")
    return lines


@app.command()
def report(study: Path = typer.Argument(..., help="study YAML file"),
           out: Path = typer.Option(Path("out"), help="output directory of that study's run")) -> None:
    """Re-render report.html and summary.json from the stored residual tables (no trials run)."""
    import pandas as pd

    from hrbench.analysis import MissingTrials, current_tables
    from hrbench.catalogue import HORIZON_RESIDUALS, INTERVENTION_CONTRASTS, RESOURCE_ACCOUNTING, SENSITIVITY_SWEEP
    from hrbench.report.html import write_report
    from hrbench.report.summary import write_summary
    from hrbench.study_run import StudyRun

    try:
        run = StudyRun.from_file(study, out, progress=False)
        stores = run.stores
        tables = current_tables(
            run.design,
            pd.concat([stores.read_all(k) for k in HORIZON_RESIDUALS.keys(run.study.condition_names)]),
            stores.read_all(INTERVENTION_CONTRASTS.key()), stores.read_all(SENSITIVITY_SWEEP.key()),
            stores.read_all(RESOURCE_ACCOUNTING.key()))
    except (StudyError, TaskError, MissingTrials, StorageError) as exc:
        raise _fail(exc, hint=f"; run `hrbench run {study} --out {out}` first") from exc
    for path in (write_report(run.design, tables, stores.report_path, stores),
                 write_summary(run.design, tables, stores.summary_path)):
        stores.publish(path)
        console.print(f"{path.stem.replace('.', '')}: {path}", markup=False)


@app.command()
def plan(study: Path = typer.Argument(..., help="study YAML file"),
         half_width: float = typer.Option(0.25, help="target half-width of the interval on Γ per task (nats)"),
         pilot: Path = typer.Option(None, help="output directory of a pilot run to take q_i and P_obs from"),
         q: str = typer.Option(None, help="anticipated q_i, comma-separated (one value = every stage)"),
         p_obs: float = typer.Option(None, help="anticipated P_observed"),
         sims: int = typer.Option(4000, help="simulated studies per plan"),
         claim_sims: int = typer.Option(100, help="simulated studies per confirmatory claim (headline, contrasts)"),
         ) -> None:
    """Trials m_i, m_0 for a target interval on Γ (delta method), checked by simulation; the smallest |Γ| the
    declared trials detect at 80% power; and every confirmatory claim at the declared design: its
    tasks-sampled half-width predicted and simulated, its power, and what the target would need."""
    from hrbench.design import StudyDesign
    from hrbench.plan import anticipated, design_warnings, plan_claims, plan_study

    try:
        run = StudyDesign.from_file(study)  # planning needs the design only: no output, no trial
        inputs = anticipated(run, pilot, [float(v) for v in q.split(",")] if q else None, p_obs)
        rows = plan_study(run, half_width, inputs, n_sims=sims, seed=run.study.bootstrap.seed)
        claims = plan_claims(run, inputs, half_width, n_sims=claim_sims, seed=run.study.bootstrap.seed)
    except (StudyError, TaskError, ValueError) as exc:
        raise _fail(exc) from exc
    level = run.study.bootstrap.level
    _print_claim_plan(run, claims, half_width, claim_sims)
    table = Table(title=f"Plan · {run.study.name} · target ±{half_width:g} nats at {100 * level:g}% per task")
    for column in ("agent", "task", "P_exp", "P_obs", "m_i", "m_0", "±delta", "±sim", "sim/δ", "min|Γ|"):
        table.add_column(column, justify="left" if column in ("agent", "task") else "right")
    for r in rows:
        table.add_row(r.agent, r.task, f"{r.p_expected:.3f}", f"{r.p_obs:.3f}", str(r.m_stage), str(r.m0),
                      f"{r.half_width_delta:.3f}", f"{r.half_width_simulated:.3f}", f"{r.simulated_over_delta:.2f}",
                      f"{r.min_detectable_gamma:.3f}")
    console.print(table)
    console.print(f"inputs: {', '.join(sorted({r.source for r in rows}))}. ±delta: delta-method half-width at the "
                  f"planned m_i, m_0; ±sim: half-width of Γ̂ over {sims} simulated studies; min|Γ|: smallest "
                  f"residual detected with 80% power at the declared m_i={run.study.trials.checkpoint}, "
                  f"m_0={run.study.trials.natural}.")
    worst = max(rows, key=lambda r: r.m_stage)
    console.print(f"every task within ±{half_width:g}: m_i = {worst.m_stage}, m_0 = {worst.m0} "
                  f"(driven by {worst.agent}/{worst.task}); simulated/delta half-width ratio "
                  f"{min(r.simulated_over_delta for r in rows):.2f}–{max(r.simulated_over_delta for r in rows):.2f}")
    for warning in design_warnings(run):
        console.print(f"warning: below the calibrated range: {warning}", markup=False, soft_wrap=True)


def _print_claim_plan(run, claims: list, target: float, n_sims: int) -> None:
    """The confirmatory claims at the declared design (hrbench.plan.plan_claims), one row each."""
    from hrbench.plan import MAX_TASKS_FACTOR
    from hrbench.stats.cluster import FAMILY_LEVEL_MIN

    study = run.study
    if not claims:
        console.print("claims: no family has 2 tasks, so no claim has a tasks-sampled interval to plan")
        return
    pct = f"{100 * study.bootstrap.level:g}%"
    table = Table(title=f"Claims at the declared design · m_i={study.trials.checkpoint}, m_0={study.trials.natural}, "
                        f"{len(run.tasks)} tasks · {pct} tasks-sampled half-widths")
    for column in ("agent", "claim", "truth", "±predicted", "±simulated", "sim/pred", "P(different)",
                   "P(equivalent)", f"tasks for ±{target:g}", "±pred", "±sim", "sim/pred ", f"m_i for ±{target:g}"):
        table.add_column(column, justify="left" if column in ("agent", "claim") else "right")
    for c in claims:
        what = f"Γ({c.condition})" if c.kind == "residual" else \
            f"ΔΓ({c.condition}){' shared' if c.shared_checkpoint else ''}"
        sized = ("—", "—", "—") if c.tasks_needed is None else (
            f"{c.half_width_sized_predicted:.3f}", _fmt(c.half_width_sized_simulated),
            "—" if c.sized_ratio is None else f"{c.sized_ratio:.2f}")
        table.add_row(c.agent, what, f"{c.truth:.3f}", f"{c.half_width_predicted:.3f}",
                      f"{c.half_width_simulated:.3f}", f"{c.ratio:.2f}", f"{c.power_different:.2f}",
                      "—" if c.power_equivalent is None else f"{c.power_equivalent:.2f}",
                      f"> {MAX_TASKS_FACTOR * len(run.tasks)}" if c.tasks_needed is None else str(c.tasks_needed),
                      *sized, "unreachable" if c.m_needed is None else str(c.m_needed))
    Console(width=max(console.width, 160)).print(table)
    if claims:
        console.print(f"±predicted: cluster-t half-width from the tasks' spread and the trial variances; ±simulated: "
                      f"mean over {n_sims} simulated studies (ratio {min(c.ratio for c in claims):.2f}–"
                      f"{max(c.ratio for c in claims):.2f}); P(different)/P(equivalent): share of them whose adjusted "
                      f"interval excludes 0 / lies inside the margin; tasks for ±{target:g}: the fewest tasks (the declared "
                      f"family mix, each family's tasks repeated in turn: tasks sampled) whose predicted half-width "
                      f"reaches it at the declared trials, with that half-width predicted and simulated over {n_sims} "
                      f"studies of that size beside it; families are held fixed (resampled only from "
                      f"{FAMILY_LEVEL_MIN} families); m_i: trials per stage that reach it with the declared tasks "
                      "('unreachable': the tasks' spread alone is wider).",
                      markup=False, soft_wrap=True)
    _print_family_plan(run, [c for c in claims if c.families is not None], target)


def _print_family_plan(run, claims: list, target: float) -> None:
    """The families each Γ claim needs for the target when families are resampled (hrbench.plan.size_families)."""
    from hrbench.plan import MAX_TASKS_FACTOR
    from hrbench.stats.cluster import FAMILY_LEVEL_MIN

    if not claims:
        return
    declared = len({t.family for t in run.tasks})
    table = Table(title=f"Families for ±{target:g} · families resampled (from {FAMILY_LEVEL_MIN} families) · "
                        f"{declared} declared")
    for column in ("agent", "claim", "families", "tasks", "±predicted", "±simulated", "sim/pred"):
        table.add_column(column, justify="left" if column in ("agent", "claim") else "right")
    for c in claims:
        f = c.families
        if f.families_needed is None:
            table.add_row(c.agent, f"Γ({c.condition})", f"> {MAX_TASKS_FACTOR * declared}", "—", "—", "—", "—")
            continue
        table.add_row(c.agent, f"Γ({c.condition})", str(f.families_needed), str(f.tasks),
                      f"{f.half_width_predicted:.3f}", _fmt(f.half_width_simulated),
                      "—" if f.ratio is None else f"{f.ratio:.2f}")
    Console(width=max(console.width, 160)).print(table)
    n_sims = claims[0].families.n_sims
    console.print(f"families: the fewest families (the declared ones in turn, each with its declared tasks) whose "
                  f"families-resampled half-width of the `all` row (t on F − 1 df of the family totals) reaches "
                  f"±{target:g} at the declared trials, predicted from the declared families' spread and the trial "
                  f"variances, and simulated over {n_sims} studies of that design.", markup=False, soft_wrap=True)


def _load_tasks(paths: list[Path] | None, registry: Path | None) -> tuple[list, list[tuple[Path, str]]]:
    """Task dirs and registries alike (default: the built-in registry); bad tasks come back as errors."""
    targets = list(paths or []) + ([registry] if registry is not None else [])
    return load_paths(targets or [BUILTIN_REGISTRY])


@tasks_app.command("list")
def tasks_list(paths: list[Path] = typer.Argument(None, help="task dirs or registries (default: the built-in tasks)"),
               registry: Path = typer.Option(None, help="a registry (or task dir), as a positional path would be"),
               keys: bool = typer.Option(True, help="show, per task, the task.toml keys honoured / ignored and why")
               ) -> None:
    """List task packages (family, structure, stages, W, H_dep, backend) and what of their task.toml is
    honoured. A task that does not load is reported (exit 1); the others are still listed."""
    tasks, errors = _load_tasks(paths, registry)
    table = Table(title="tasks")
    for column in ("task", "version", "schema", "family", "structure", "stages", "W", "H_dep", "key step", "backend"):
        table.add_column(column)
    for t in tasks:
        table.add_row(escape(t.name), escape(t.version or "—"), escape(t.schema_version), escape(t.family), t.structure, str(t.n_stages),
                      str(t.work), str(t.dependency_depth), "marked" if t.has_key_steps else "n/a",
                      "docker-only" if t.docker_only else "local")
    console.print(table)
    for t in tasks if keys else []:
        console.print(Text(f"{t.name}:"), soft_wrap=True)
        if t.docker_only:
            console.print(Text(f"  local backend: refused ({t.docker_only}); run it with `backend: docker` (or "
                               "`auto`) in the study, `--backend docker` for a command"), soft_wrap=True)
        if t.support:
            console.print(Text(f"  {'local':<11} {'docker':<11} key: how / why"), soft_wrap=True)
        for k in t.support:
            console.print(Text(f"  {k.status:<11} {k.docker:<11} {k.key}: {k.how}"), soft_wrap=True)
    for _, message in errors:
        err.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)
    if errors:
        raise typer.Exit(1)


def _backend_option(default: str | None, what: str):
    return typer.Option(default, help=f"where {what} run: {', '.join(backend_choices())} (auto: docker for the "
                                      "tasks local cannot run, local for the rest)")


def _task_backends(choice: str, cache_dir: Path) -> TaskBackends:
    if choice not in backend_choices():
        raise _fail(f"--backend {choice!r}: choose from {backend_choices()}")
    return TaskBackends(choice, BackendOptions(cache_dir=cache_dir))


@tasks_app.command("audit")
def tasks_audit(paths: list[Path] = typer.Argument(None, help="task dirs or registries (default: every built-in task)"),
                registry: Path = typer.Option(None, help="a registry (or task dir), as a positional path would be"),
                backend: str = _backend_option("local", "the audit's runs")) -> None:
    """Verifier audit: reference = 1, nothing = 0, key step removed = stage fails (n/a without a marked key
    step), tamper checks. A task that does not load is reported and the rest audited. Exit 1 on any problem."""
    import tempfile

    failures = 0
    tasks, errors = _load_tasks(paths, registry)
    for _, message in errors:
        console.print(Text.assemble(("FAIL", "red"), " ", message), soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="hrbench-audit-") as tmp:
        backends = _task_backends(backend, Path(tmp))
        for task in tasks:
            try:
                backends.check_supported(task)
            except SandboxError as exc:
                failures += 1
                why = (f"the local backend cannot run it ({task.docker_only}); pass --backend docker (or auto) to "
                       "audit it with the docker backend") if task.docker_only and backend == "local" else str(exc)
                console.print(Text.assemble(("FAIL", "red"), f" {task.name}: {why}"), soft_wrap=True)
                continue
            rows = audit_task(task, backends.for_task(task))
            bad = [r for r in rows if not r.ok]
            failures += len(bad)
            console.print(Text.assemble(("ok", "green") if not bad else ("FAIL", "red"),
                                        f" {task.name} ({task.n_stages} stages)"), soft_wrap=True)
            for r in rows:
                line = f"    stage {r.stage}: key-step check {r.key_check}"
                console.print(Text(line + (f"; problem: {r.problem}" if r.problem else "")), soft_wrap=True)
                for note in r.notes:
                    console.print(Text(f"    stage {r.stage}: note: {note}"), soft_wrap=True)
    failures += len(errors)
    if failures:
        err.print(Text(f"{failures} task(s) or stage(s) failed the audit", style="red"))
        raise typer.Exit(1)
    console.print("all tasks pass the verifier audit")


@app.command()
def depth(paths: list[Path] = typer.Argument(None, help="task package directories (default: the study's tasks)"),
          study: Path = typer.Option(None, help="study YAML file whose agents (and, without paths, tasks) to use"),
          agent: list[str] = typer.Option(None, help="agent id of the study to use (repeat; default: all, in "
                                                     "the study's order, the first measured in full)"),
          agent_config: list[Path] = typer.Option(None, help="agent config file (agents/<id>.yaml) to use "
                                                             "instead of the study's agents (repeat)"),
          seed: int = typer.Option(None, help="seed of the agents' draws (default: the study's seed, else 0)"),
          backend: str = _backend_option(None, "the rollouts (default: the study's backend, else local)")) -> None:
    """Depth D by turn caps (depth paper App. B) and work W per task, measured with real rollouts."""
    import tempfile

    from hrbench.agents.config import AgentConfigError, load_agent_config
    from hrbench.agents.factory import make_agent
    from hrbench.structure.depth import CAPS, estimate_depth, harness_runner
    from hrbench.structure.work import task_work

    if study is None and not agent_config:
        raise _fail("no agents to measure with: pass --study STUDY.yaml (its agents) or --agent-config "
                    "agents/<id>.yaml (repeatable)")
    try:
        loaded = load_study(study) if study is not None else None
        specs = [load_agent_config(c) for c in agent_config] if agent_config else list(loaded.study.agents)
        if agent:
            unknown = sorted(set(agent) - {s.id for s in specs})
            if unknown:
                raise StudyError(f"--agent {unknown}: not among the agents {[s.id for s in specs]}")
            specs = [s for s in specs if s.id in agent]
        if paths:
            tasks = [load_task(p) for p in paths]
        elif loaded is not None:
            tasks = load_registry(loaded.registry, loaded.study.tasks.include)
        else:
            raise StudyError("no tasks: pass task package directories or --study STUDY.yaml")
    except (StudyError, TaskError, AgentConfigError) as exc:
        raise _fail(exc) from exc
    draw_seed = seed if seed is not None else (loaded.study.seed if loaded is not None else 0)
    table = Table(title=f"depth D (caps {', '.join(map(str, CAPS))}) and work W · agents "
                        f"{', '.join(s.id for s in specs)}")
    table.add_column("task", no_wrap=True, min_width=max(len(t.name) for t in tasks))  # names stay whole
    for column in ("D", "N", "W lines", "W chars", "W tokens", "runs"):
        table.add_column(column, justify="right")
    choice = backend or (loaded.study.backend if loaded is not None else "local")
    with tempfile.TemporaryDirectory(prefix="hrbench-depth-") as tmp:
        backends = _task_backends(choice, Path(tmp))
        try:
            backends.check(tasks)
        except SandboxError as exc:
            raise _fail(exc) from exc
        for task in tasks:
            estimate = estimate_depth([(s.id, harness_runner(task, make_agent(s), backends, seed=draw_seed,
                                                             trajectory_dir=Path(tmp) / "trajectories", model=s.id))
                                       for s in specs])
            w = task_work(task)
            shown = {"above_largest_cap": f"> {CAPS[-1]}", "no_estimate": "none"}  # D's status in its cell
            table.add_row(escape(task.name), shown.get(estimate.status, str(estimate.depth)),
                          "—" if estimate.n_turns is None else str(estimate.n_turns), str(w.lines), str(w.chars),
                          "—" if w.tokens is None else str(w.tokens), str(len(estimate.runs)))
    console.print(table)


@agents_app.command("check")
def agents_check(config: Path = typer.Argument(..., help="agent config file, e.g. agents/<id>.yaml")) -> None:
    """Validate an agent config (llm or command) and ping its endpoint or program. Exit 1 on any problem."""
    from hrbench.agents.check import AgentCheckError, check_agent
    from hrbench.agents.config import AgentConfigError, load_agent_config

    try:
        spec = load_agent_config(config)
    except AgentConfigError as exc:
        raise _fail(exc, label="invalid:") from exc
    if config.stem != spec.id:
        err.print(Text.assemble(("note:", "yellow"), f" id {spec.id!r} differs from the file name {config.name!r}"))
    console.print(f"[green]valid[/] {spec.kind} agent {spec.id!r}")
    try:
        console.print(Text.assemble(("ok", "green"), f" {check_agent(spec)}"), soft_wrap=True)
    except AgentCheckError as exc:
        raise _fail(exc, label="check failed:") from exc


@app.command()
def lineage(out: Path = typer.Argument(..., help="output directory of a study run")) -> None:
    """For each residual row: the chain back to its trials, agent registration, task hashes, code version and
    pre-registration, with the times that show P_expected was fixed before natural rollouts."""
    from hrbench.lineage import lineage_lines
    from hrbench.storage import store_for

    if not store_for(out).exists(PREREGISTRATION_KEY):
        raise _fail(f"{out} has no preregistration.json: run a study into it first")
    for line in lineage_lines(out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
def verify(out: Path = typer.Argument(..., help="output directory of a study run")) -> None:
    """Re-hash the pre-registration, agent registrations, every table (against its lineage record and the
    trial journal) and every cached environment state (against its seal). Exit 1 naming each file that no longer
    matches."""
    from hrbench.lineage import verify as verify_out

    problems, checked = verify_out(out)
    for p in problems:
        err.print(f"MISMATCH {p.path}: {p.problem}", markup=False, highlight=False, soft_wrap=True)
    summary = ", ".join(f"{n} {what}" for what, n in checked.items())
    if problems:
        err.print(f"verify failed: {len(problems)} problem(s) in {out} (checked {summary})", markup=False)
        raise typer.Exit(1)
    console.print(f"verified {out}: {summary}; every hash matches", markup=False, highlight=False)


@import_app.command("harbor")
def import_harbor(jobs: list[Path] = typer.Argument(..., help="Harbor job folders (what `harbor run` wrote under jobs/)"),
                  study: Path = typer.Option(..., help="the study YAML file the trials are for"),
                  agent: list[str] = typer.Option(None, help="HARBOR_AGENT[@provider/model]=STUDY_AGENT (repeat)"),
                  kind: str = typer.Option("natural", help="natural (the study's tasks) or checkpoint (tasks of "
                                                           "`hrbench export checkpoint-tasks`)"),
                  write: bool = typer.Option(False, help="append the import to the study file (else print it)")
                  ) -> None:
    """Check Harbor job folders against a study (each trial's task by name and checksum, its agent) and declare
    them as the study's trials. The study file holds the import, so the pre-registration seals every job file;
    `hrbench run` then reads each trial's outcome where it would have run it (natural: after expected_success)."""
    import yaml

    from hrbench.design import StudyDesign
    from hrbench.harbor_io.imports import match_imports
    from hrbench.protocol import HarborImport, Study

    try:
        mapping = dict(_pair(a) for a in agent or [])
        design = StudyDesign.from_file(study)
        base = design.loaded.source.parent
        entry = HarborImport(kind=kind, harbor_jobs=[os.path.relpath(j.resolve(), base) for j in jobs],
                             agents=mapping)  # type: ignore[arg-type]
        trial_study = Study.model_validate({**design.study.model_dump(mode="json"), "imports": [entry.model_dump()]})
        needs = None
        if kind == "checkpoint":
            from hrbench.harbor_io.export import checkpoint_task_checksums

            needs = checkpoint_task_checksums(design.tasks)
        found = match_imports(trial_study, design.tasks, base, needs)
    except (StudyError, TaskError, ValueError) as exc:
        raise _fail(exc) from exc
    table = Table(title=f"Harbor {kind} trials for study {design.study.name}")
    for column in ("agent", "task", "stage", "trials"):
        table.add_column(column)
    for (a, _, t, s), folders in sorted(found.by_cell.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        table.add_row(escape(a), escape(t), escape(s or "—"), str(len(folders)))
    console.print(table)
    for line in found.unused:
        console.print(Text(f"not imported: {line}"), soft_wrap=True)
    snippet = yaml.safe_dump({"imports": [entry.model_dump(mode="json")]}, sort_keys=False)
    if write:
        if design.study.imports:
            raise _fail(f"{study}: already declares imports; add this entry to its list by hand:\n{snippet}")
        with open(study, "a") as handle:
            handle.write("\n# hrbench import harbor: these trials stand for the study's own (sealed by the "
                         "pre-registration)\n" + snippet)
        console.print(f"added to {study}; run `hrbench run {study}` to take them in", markup=False)
    else:
        console.print(Text(f"add to {study} (or rerun with --write):\n{snippet}"), soft_wrap=True)


def _pair(text: str) -> tuple[str, str]:
    label, sep, target = text.rpartition("=")
    if not sep or not label or not target:
        raise StudyError(f"--agent {text!r}: give HARBOR_AGENT[@provider/model]=STUDY_AGENT")
    return label, target


@export_app.command("checkpoint-tasks")
def export_checkpoint_tasks(study: Path = typer.Argument(..., help="study YAML file whose tasks to export"),
                            out: Path = typer.Option(..., help="folder to write the tasks into")) -> None:
    """Every stage of the study's tasks as a Harbor task starting from the oracle state before it (run them with
    `harbor run`, bring the job back with `hrbench import harbor --kind checkpoint`)."""
    from hrbench.harbor_io.export import export_checkpoint_tasks as export

    try:
        loaded = load_study(study)
        tasks = load_registry(loaded.registry, loaded.study.tasks.include)
    except (StudyError, TaskError) as exc:
        raise _fail(exc) from exc
    folders = export(tasks, out)
    console.print(f"wrote {len(folders)} checkpoint task(s) of {len(tasks)} task(s) to {out}", markup=False)


if __name__ == "__main__":
    app()
