"""The `hrbench` command line.

The Dagster-facing commands (demo, run, ui) import `pipelines` inside the command,
so the core stays importable without Dagster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hrbench.envs.local import LocalBackend
from hrbench.protocol import DEMO_STUDY, BUILTIN_REGISTRY, StudyError
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_registry, load_task
from hrbench.tasks.model import TaskError

app = typer.Typer(help="hrbench: horizon residuals of agents on long tasks.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task packages: list and audit.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
agents_app = typer.Typer(help="Agent configuration files: validate and ping.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
# Redirected to a file (CI logs), rich would cut tables at 80 columns; names must survive verbatim.
console = Console(width=None if sys.stdout.isatty() else 4096)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 4096)


def _run(study: Path, out: Path) -> None:
    from pipelines.materialize import StudyFailed, run_study  # Dagster only behind this command

    try:
        # progress bars only on a terminal: in a redirected log they are thousands of lines
        run = run_study(study, out, console=err, progress=sys.stderr.isatty())
    except (StudyFailed, StudyError, TaskError) as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    summary = json.loads((run.out_dir / "summary.json").read_text())
    table = Table(title=f"Horizon residuals · {summary['study']} · prereg {summary['prereg_sha256'][:12]}")
    for column in ("agent", "scope", "name", "P_exp", "P_obs", "Γ", "95% CI", "true Γ"):
        table.add_column(column, justify="right" if column not in ("agent", "scope", "name") else "left")
    for r in summary["residuals"]:
        if r["scope"] == "task":
            continue
        fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
        table.add_row(r["agent"], r["scope"], r["name"], fmt(r["p_expected"]), fmt(r["p_observed"]),
                      fmt(r["gamma"]), f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]", fmt(r["true_gamma"]))
    console.print(table)
    console.print(f"report: {run.out_dir / 'report.html'}")
    console.print(f"summary: {run.out_dir / 'summary.json'}")


@app.command()
def demo(out: Path = typer.Option(Path("demo-out"), help="output directory")) -> None:
    """Run the built-in demo study (local sandbox, simulated agents, local storage)."""
    _run(DEMO_STUDY, out)


@app.command()
def run(study: Path = typer.Argument(..., help="study YAML file"),
        out: Path = typer.Option(Path("out"), help="output directory")) -> None:
    """Run a pre-registered study end to end; re-running resumes from the trial journals."""
    _run(study, out)


@app.command()
def report(study: Path = typer.Argument(..., help="study YAML file"),
           out: Path = typer.Option(Path("out"), help="output directory of that study's run")) -> None:
    """Re-render report.html and summary.json from the stored residual tables (no trials run)."""
    import pandas as pd

    from hrbench.analysis import MissingTrials, current_residuals
    from hrbench.report.html import write_report
    from hrbench.report.summary import write_summary
    from hrbench.study_run import StudyRun

    try:
        run = StudyRun.from_file(study, out, progress=False)
        tables = sorted((run.out_dir / "tables" / "horizon_residuals").glob("*.parquet"))
        residuals = current_residuals(run, pd.concat([pd.read_parquet(p) for p in tables]) if tables
                                      else pd.DataFrame())
    except (StudyError, TaskError, MissingTrials) as exc:
        err.print(f"[red]error:[/] {exc}; run `hrbench run {study} --out {out}` first")
        raise typer.Exit(1) from exc
    console.print(f"report: {write_report(run, residuals, run.out_dir / 'report.html')}")
    console.print(f"summary: {write_summary(run, residuals, run.out_dir / 'summary.json')}")


@app.command()
def plan(study: Path = typer.Argument(..., help="study YAML file"),
         half_width: float = typer.Option(0.25, help="target half-width of the interval on Γ per task (nats)"),
         pilot: Path = typer.Option(None, help="output directory of a pilot run to take q_i and P_obs from"),
         q: str = typer.Option(None, help="anticipated q_i, comma-separated (one value = every stage)"),
         p_obs: float = typer.Option(None, help="anticipated P_observed"),
         sims: int = typer.Option(4000, help="simulated studies per plan")) -> None:
    """Trials m_i, m_0 for a target interval on Γ (delta method), checked by simulation; and the
    smallest |Γ| the declared trials detect at 80% power."""
    import tempfile

    from hrbench.plan import anticipated, plan_study
    from hrbench.study_run import StudyRun

    try:
        with tempfile.TemporaryDirectory(prefix="hrbench-plan-") as scratch:  # planning runs no trial
            run = StudyRun.from_file(study, Path(scratch), progress=False)
            inputs = anticipated(run, pilot, [float(v) for v in q.split(",")] if q else None, p_obs)
            rows = plan_study(run, half_width, inputs, n_sims=sims, seed=run.study.bootstrap.seed)
    except (StudyError, TaskError, ValueError) as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    level = run.study.bootstrap.level
    table = Table(title=f"Plan · {run.study.name} · target ±{half_width:g} nats at {level:.0%} per task")
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


@tasks_app.command("list")
def tasks_list(registry: Path = typer.Option(BUILTIN_REGISTRY, help="directory of task packages")) -> None:
    """List task packages with family, structure, stages, work W and dependency depth."""
    try:
        tasks = load_registry(registry)
    except TaskError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    table = Table(title=f"tasks in {registry}")
    for column in ("task", "family", "structure", "stages", "W", "H_dep", "backend"):
        table.add_column(column)
    for t in tasks:
        table.add_row(t.name, t.family, t.structure, str(t.n_stages), str(t.work), str(t.dependency_depth),
                      "docker-only" if t.docker_only else "local")
    console.print(table)


@tasks_app.command("audit")
def tasks_audit(paths: list[Path] = typer.Argument(None, help="task package directories (default: every built-in task)"),
                registry: Path = typer.Option(BUILTIN_REGISTRY, help="registry used when no paths are given")) -> None:
    """Verifier audit: reference = 1, nothing = 0, key step removed = stage fails. Exit 1 on any problem."""
    import tempfile

    failures = 0
    with tempfile.TemporaryDirectory(prefix="hrbench-audit-") as tmp:
        backend = LocalBackend(Path(tmp))
        try:
            tasks = [load_task(p) for p in paths] if paths else load_registry(registry)
        except TaskError as exc:
            err.print(f"[red]FAIL[/] {exc}")
            raise typer.Exit(1) from exc
        for task in tasks:
            rows = audit_task(task, backend)
            bad = [r for r in rows if not r.ok]
            failures += len(bad)
            status = "[green]ok[/]" if not bad else "[red]FAIL[/]"
            console.print(f"{status} {task.name} ({task.n_stages} stages)")
            for r in bad:
                console.print(f"    stage {r.stage}: {r.problem}")
    if failures:
        err.print(f"[red]{failures} stage(s) failed the audit[/]")
        raise typer.Exit(1)
    console.print("all tasks pass the verifier audit")


@agents_app.command("check")
def agents_check(config: Path = typer.Argument(..., help="agent config file, e.g. agents/<id>.yaml")) -> None:
    """Validate an agent config (llm or command) and ping its endpoint or program. Exit 1 on any problem."""
    from hrbench.agents.config import AgentCheckError, AgentConfigError, check_agent, load_agent_config

    try:
        spec = load_agent_config(config)
    except AgentConfigError as exc:
        err.print(f"[red]invalid:[/] {exc}")
        raise typer.Exit(1) from exc
    if config.stem != spec.id:
        err.print(f"[yellow]note:[/] id {spec.id!r} differs from the file name {config.name!r}")
    console.print(f"[green]valid[/] {spec.kind} agent {spec.id!r}")
    try:
        console.print(f"[green]ok[/] {check_agent(spec)}")
    except AgentCheckError as exc:
        err.print(f"[red]check failed:[/] {exc}")
        raise typer.Exit(1) from exc


@app.command()
def ui(out: Path = typer.Option(Path("out"), help="output directory of the study to show"),
       study: Path = typer.Option(None, help="study YAML file (default: the one that made OUT; the demo for a new OUT)"),
       port: int = typer.Option(3000)) -> None:
    """Open the Dagster UI on a study (its instance lives under OUT/.dagster, or $DAGSTER_HOME when set)."""
    from hrbench.preregistration import recorded_study_source

    recorded = recorded_study_source(out)
    if study is None:
        study = Path(recorded.study_file) if recorded else DEMO_STUDY
    elif recorded and Path(recorded.study_file) != study.resolve():
        err.print(f"error: {out} was made by {recorded.study_file}, not {study.resolve()}; drop --study to show "
                  "it, or pass another --out for this study", markup=False)
        raise typer.Exit(1)
    if not study.is_file():
        err.print(f"error: study file {study} (recorded in {out / 'study_source.json'}) does not exist", markup=False)
        raise typer.Exit(1)
    home = Path(os.environ.get("DAGSTER_HOME") or (out / ".dagster")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # no telemetry banner
    env = {**os.environ, "DAGSTER_HOME": str(home), "HRBENCH_STUDY": str(study.resolve()),
           "HRBENCH_OUT": str(out.resolve())}
    root = Path(__file__).resolve().parent.parent
    # dagster dev ignores SIGINT/SIGTERM when started from some shells; restore defaults before exec.
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(root / "workspace.yaml"), "-p", str(port)]
    subprocess.run(command, env=env, cwd=root, preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL),
                                                                   signal.signal(signal.SIGTERM, signal.SIG_DFL)))


@app.command()
def lineage(out: Path = typer.Argument(..., help="output directory of a study run")) -> None:
    """For each residual row: the chain back to its trials, agent registration, task hashes, code version and
    pre-registration, with the times that show P_expected was fixed before natural rollouts."""
    from hrbench.lineage import lineage_lines

    if not (out / "preregistration.json").is_file():
        err.print(f"error: {out} has no preregistration.json: run a study into it first", markup=False)
        raise typer.Exit(1)
    for line in lineage_lines(out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
def verify(out: Path = typer.Argument(..., help="output directory of a study run")) -> None:
    """Re-hash the pre-registration, agent registrations and every table (against its lineage record and the
    trial journal). Exit 1 naming each file that no longer matches."""
    from hrbench.lineage import verify as verify_out

    problems, checked = verify_out(out)
    for p in problems:
        err.print(f"MISMATCH {p.path}: {p.problem}", markup=False, highlight=False, soft_wrap=True)
    summary = ", ".join(f"{n} {what}" for what, n in checked.items())
    if problems:
        err.print(f"verify failed: {len(problems)} problem(s) in {out} (checked {summary})", markup=False)
        raise typer.Exit(1)
    console.print(f"verified {out}: {summary}; every hash matches", markup=False, highlight=False)


if __name__ == "__main__":
    app()
