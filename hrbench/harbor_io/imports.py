"""A study's Harbor imports: which job trials stand for which of the study's trials, checked before any runs.

Only identities are read here (task, checksum, agent, time): outcomes are read by `jobs.trial_record`
where the runner would run the trial.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from hrbench.harbor_io.jobs import (
    HarborImportError,
    TrialIdentity,
    harbor_checksum,
    read_identity,
    sealed_files,
    trial_identities,
)
from hrbench.protocol import HarborImport, Study
from hrbench.tasks.model import Task


class ImportedTrials(BaseModel):
    """The trial folders of one (agent, kind, task, stage) in trial-index order, and what the jobs held
    that the study does not use (other agents, other tasks), for the import's report."""

    by_cell: dict[tuple[str, str, str, str | None], list[Path]]
    unused: list[str]
    recorded: list[str]  # finished_at of every used trial


def job_dirs(entry: HarborImport, base: Path) -> list[Path]:
    return [p if p.is_absolute() else (base / p).resolve() for p in map(Path, entry.harbor_jobs)]


def sealed_inputs(study: Study, base: Path) -> dict[str, str]:
    """{job/file: sha256} of every job folder a study imports (empty without imports)."""
    out: dict[str, str] = {}
    for entry in study.imports:
        out.update(sealed_files(job_dirs(entry, base)))
    return out


def _study_agent(entry: HarborImport, label: str) -> str | None:
    return entry.agents.get(label) or entry.agents.get(label.split("@", 1)[0])


def match_imports(study: Study, tasks: list[Task], base: Path, checkpoint_tasks: dict[str, tuple[Task, str, str]]
                  | None = None) -> ImportedTrials:
    """Map every imported trial to a study cell, refusing one whose task checksum is not the pre-registered
    task's (both named). `checkpoint_tasks`: {exported task name: (task, stage, harbor checksum)}."""
    natural = {}
    for t in tasks:
        ours = harbor_checksum(t.path)
        for name in {t.name, t.slug, t.path.name}:
            natural[name] = (t, ours)
    cells: dict[tuple[str, str, str, str | None], list[Path]] = {}
    unused: list[str] = []
    recorded: list[str] = []
    for entry in study.imports:
        for ident in trial_identities(job_dirs(entry, base)):
            agent = _study_agent(entry, ident.agent)
            if entry.kind == "natural":
                found = natural.get(ident.task_name)
                task, stage, ours = (found[0], None, found[1]) if found else (None, None, None)
            else:
                target = (checkpoint_tasks or {}).get(ident.task_name)
                task, stage, ours = target if target else (None, None, None)
            if agent is None or task is None:
                unused.append(f"{ident.job}/{ident.trial_name}: " + (
                    f"agent {ident.agent} is not mapped to a study agent" if agent is None
                    else f"task {ident.task_name!r} is not one of the study's {entry.kind} tasks"))
                continue
            _check_checksum(ident, task, ours)
            cells.setdefault((agent, entry.kind, task.name, stage), []).append(ident.folder)
            if ident.finished_at:
                recorded.append(ident.finished_at)
    return ImportedTrials(by_cell=cells, unused=unused, recorded=sorted(recorded))


def _check_checksum(ident: TrialIdentity, task: Task, ours: str) -> None:
    if ident.task_checksum != ours:
        raise HarborImportError(
            f"{ident.folder / 'result.json'}: Harbor ran task {ident.task_name!r} with checksum {ident.task_checksum}, "
            f"but the study pre-registered {task.name!r} with checksum {ours} ({task.path}); the trial ran another "
            "version of the task: import jobs of the pre-registered version, or register the version they ran")


def import_statements(study: Study, imported: ImportedTrials, frozen_at: str | None) -> list[str]:
    """What the report says of each import: whose trials, from which jobs, recorded when, and plainly
    whether before the pre-registration (the seed's order: predictions fixed before outcomes are seen)."""
    lines = []
    for entry in study.imports:
        agents = sorted(set(entry.agents.values()))
        times = sorted(t for (agent, kind, _, _), folders in imported.by_cell.items()
                       if agent in agents and kind == entry.kind
                       for t in _finished(folders))
        jobs = ", ".join(Path(j).name for j in entry.harbor_jobs)
        when = f"recorded by Harbor from {times[0]} to {times[-1]}" if times else "with no recorded finish time"
        line = f"The {entry.kind} trials of {', '.join(agents)} were not run by hrbench: they are imported from the " \
               f"Harbor job(s) {jobs}, {when}."
        frozen = _utc(frozen_at) if frozen_at else None
        if frozen and times and times[0] < frozen:
            line += (f" {sum(t < frozen for t in times)} of them were recorded before this study was "
                     f"pre-registered ({frozen_at}); their outcomes were sealed (file hashes in the pre-registration) "
                     "and read only after expected_success was fixed, but they existed before the prediction.")
        lines.append(line)
    return lines


def _finished(folders: list[Path]) -> list[str]:
    return [_utc(r.finished_at.isoformat()) for r in map(read_identity, folders) if r.finished_at is not None]


def _utc(stamp: str) -> str:
    """An ISO 8601 time as UTC, so times compare as text (Harbor writes naive UTC times)."""
    value = datetime.fromisoformat(stamp)
    value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    return value.isoformat(timespec="seconds")
