"""The `hrbench` command line: the core's commands (hrbench/cli.py) and the Dagster-facing ones added here,
`demo` and `run` (launch the study's step jobs, pipelines/materialize.py) and `ui` (the Dagster UI on the
code location of workspace.yaml). The console script is `pipelines.cli:app`.

Dagster is imported inside these commands only, so the core's commands start without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

from hrbench.cli import _fail, app, run_into
from hrbench.protocol import DEMO_STUDY
from hrbench.stores import StudyStores

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run_study(study: Path, out: Path, console: Console, progress: bool) -> Path:
    """Every step of the study through its Dagster jobs; the output directory."""
    from pipelines.materialize import run_study  # Dagster only behind these commands

    return run_study(study, out, console=console, progress=progress).out_dir


@app.command()
def demo(out: Path = typer.Option(Path("demo-out"), help="output directory")) -> None:
    """Run the built-in demo study (local sandbox, simulated agents, local storage)."""
    run_into(DEMO_STUDY, out, _run_study)


@app.command()
def run(study: Path = typer.Argument(..., help="study YAML file"),
        out: Path = typer.Option(Path("out"), help="output directory")) -> None:
    """Run a pre-registered study end to end; re-running resumes from the trial journals."""
    run_into(study, out, _run_study)


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
        raise _fail(f"{out} was made by {recorded.study_file}, not {study.resolve()}; drop --study to show "
                    "it, or pass another --out for this study")
    if not study.is_file():
        raise _fail(f"study file {study} (recorded in {out / 'study_source.json'}) does not exist")
    home = Path(os.environ.get("DAGSTER_HOME") or StudyStores(out).dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # no telemetry banner
    env = {**os.environ, "DAGSTER_HOME": str(home), "HRBENCH_STUDY": str(study.resolve()),
           "HRBENCH_OUT": str(out.resolve())}
    # dagster dev ignores SIGINT/SIGTERM when started from some shells; restore defaults before exec.
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-p", str(port)]
    subprocess.run(command, env=env, cwd=REPO_ROOT, preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL),
                                                                        signal.signal(signal.SIGTERM, signal.SIG_DFL)))


if __name__ == "__main__":
    app()
