"""Run a whole study from the command line by launching its named step jobs, in the order the method requires.

Order: setup (catalog, audit, pre-registration) -> per agent: registration -> checkpoint trials
(all tasks and every distinct checkpoint protocol in one run; prefix rollouts first when a condition is
matched) -> per condition: stage estimates and expected success -> natural trials (all tasks, one
run) -> observed success and residuals, contrasts, sensitivity and resources; then the report. The
conditions go together in each step (each its own branch of assets and checks). Each step is an
ordinary run of the code location's job (`pipelines.definitions:step_job`), tagged with the study, on
the instance under OUT/.dagster (or $DAGSTER_HOME), so `hrbench ui --out OUT` shows and re-executes
it, and a killed study resumes from the trial journals. A step whose tables are all there, intact and
under this protocol and registration (and without missing trials) is not run again. The caller (the
CLI) holds the output directory's lock.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, build_reconstructable_job, execute_job
from rich.console import Console

from hrbench.catalogue import StudyNames
from hrbench.preregistration import check_registration, record_study_source
from hrbench.stores import StudyStores
from hrbench.steps import Step, StudyFailed, step_done, steps_for
from hrbench.study_run import StudyRun
from pipelines.defs.study.jobs import step_tags

# hrbench prints each step's outcome; the Dagster console log would bury it (the event log keeps everything).
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
INSTANCE_YAML = "telemetry:\n  enabled: false\n"


def instance_for(out_dir: Path) -> DagsterInstance:
    """$DAGSTER_HOME's instance when set (a team deployment), else OUT/.dagster (telemetry off)."""
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    home = StudyStores(out_dir).dagster_home
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return DagsterInstance.local_temp(tempdir=str(home))


@contextmanager
def _environment(**values: str):
    """The code location reads the study from the environment when `hrbench run` reconstructs a job."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_study(study_path: str | Path, out_dir: str | Path, console: Console | None = None,
              instance: DagsterInstance | None = None, progress: bool = True) -> StudyRun:
    """Run every step of the study; returns the StudyRun whose out_dir holds the results."""
    console = console or Console(stderr=True)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    run = StudyRun.from_file(study_path, out, progress)
    run.check_out_dir()  # fail before any work if OUT holds another study version, or a changed agent
    run.runner.check_backends()  # and if a task's backend cannot run it (a docker study without an engine)
    run.design.imported  # noqa: B018 - and if an imported Harbor trial ran another version of a task
    registered = {}
    for spec in run.study.agents:
        registration = run.design.registration(spec.id)
        check_registration(out, registration)
        registered[spec.id] = registration.agent_sha256
    run.stores.publish(record_study_source(out, run.design.loaded.source, run.study))
    instance = instance or instance_for(out)
    agents = [a.id for a in run.study.agents]
    names = StudyNames.of(run.study.name)  # the study's own jobs and agents' partitions in the instance
    known = set(instance.get_dynamic_partitions(names.agents))
    instance.add_dynamic_partitions(names.agents, [a for a in agents if a not in known])
    task_names = [t.name for t in run.design.tasks]

    def step(s: Step, agent: str | None = None) -> None:
        if step_done(run, s, agent, registered.get(agent)):
            return  # its tables are all there, intact, under this protocol: a run would rewrite the same bytes
        tags = {"hrbench/study": run.study.name, **step_tags(s, agent, task_names),
                **({"hrbench/agent": agent} if agent else {})}
        launch_step(instance, names.name(s.job), tags, run.design.loaded.source, out, progress, f"{s.label} {agent}" if agent else s.label)

    console.print(f"[bold]study[/] {run.study.name}  tasks={len(run.design.tasks)} agents={len(agents)}  out={out}")
    steps = steps_for(run.study)
    step(steps[0])
    console.print(f"pre-registered: prereg_sha256={run.prereg_sha256}", soft_wrap=True)
    for agent in agents:
        for s in steps[1:-1]:
            step(s, agent)
        console.print(f"  agent {agent}: done")
    step(steps[-1])
    return run


def launch_step(instance: DagsterInstance, job_name: str, tags: dict[str, str], study_path: Path, out: Path,
                progress: bool = False, label: str | None = None) -> str:
    """Execute one run of a step job of the code location for this study; its run id, or StudyFailed."""
    env = {"HRBENCH_STUDY": str(study_path), "HRBENCH_OUT": str(out), "HRBENCH_PROGRESS": "1" if progress else "0"}
    with _environment(**env):
        # built in the study's environment: the job is resolved in this study's definitions (its own names)
        job = build_reconstructable_job("pipelines.definitions", "step_job", reconstructable_args=(job_name,))
        with execute_job(job, instance, run_config=QUIET, tags=tags, raise_on_error=False) as result:
            failed_checks = [e for e in result.get_asset_check_evaluations() if not e.passed]
            if result.success and not failed_checks:
                return result.run_id
            raise StudyFailed(_failure(out, label or job_name, result.run_id, failed_checks, result.all_events))


def _one_line(message: str, limit: int = 400) -> str:
    """An error message as one line: without the exception's module path, its lines joined."""
    text = re.sub(r"^[\w.]+\.(Failure|\w*Error|\w*Exception): ", "", message.strip())
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failure(out: Path, label: str, run_id: str, failed_checks: list, events: list) -> str:
    """One line of cause for the terminal; the whole error (with Dagster's traceback) in a log file."""
    causes = [f"check {e.check_name} failed: {e.description}" for e in failed_checks]
    details = list(causes)
    for event in events:
        if event.event_type == DagsterEventType.STEP_FAILURE and event.step_failure_data.error:
            error = event.step_failure_data.error
            root = error
            while root.cause is not None and root.cls_name in ("DagsterExecutionStepExecutionError",
                                                                "DagsterUserCodeExecutionError"):
                root = root.cause
            causes.append(_one_line(root.message))
            details.append(error.to_string())
        elif event.event_type == DagsterEventType.RUN_FAILURE and getattr(event.event_specific_data, "error", None):
            # the executor itself failed (e.g. a step container that would not start): no step error says why
            causes.append(_one_line(event.event_specific_data.error.message))
            details.append(event.event_specific_data.error.to_string())
    log = StudyStores(out).logs_dir / f"run-{run_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"{label} failed (run {run_id})\n\n" + "\n\n".join(details) + "\n")
    first = causes[0] if causes else "the run failed without a step error"
    return f"{label} failed: {first}  (details: {log})"
