"""Freeze a study: one protocol per study version, one registration per agent.

The protocol (`OUT/preregistration.json`, hash `prereg_sha256`) covers everything
that decides a number apart from the agent: the study's settings, every task's
content, the check library, the sandbox limits and the code version. Each agent's
registration (`OUT/registrations/<agent>.json`, hash `agent_sha256`) covers its
config and, for a command agent, the content of its program; it names the
protocol it joins. So a new model joins a study version without changing the
protocol or anything already materialized, while a changed protocol is a new
study version and a changed agent is a new agent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
from collections import Counter
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import BaseModel

from hrbench.envs.registry import AUTO, backend_for_task
from hrbench.protocol import Study, StudyError, sha256_json
from hrbench.stats.planning import calibrated_range_warnings
from hrbench.stores import registration_key
from hrbench.tasks.model import Task

# The code whose behaviour decides a number: the core and the Dagster layer that calls it.
CODE_ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("hrbench", "resources", "assets", "pipelines")
CHECK_LIBRARY = Path(__file__).resolve().parent / "tasks" / "checks.sh"


class FrozenTask(BaseModel):
    name: str
    family: str
    structure: str
    stages: list[str]
    content_sha256: str


class CodeVersion(BaseModel):
    """Which hrbench computed the numbers: package version, git commit and dirty flag, source hash."""

    package: str
    git_commit: str | None  # None when hrbench does not run from a git working tree (an installed wheel)
    dirty: bool | None  # uncommitted changes under CODE_DIRS; None outside a git tree
    source_sha256: str  # every file under CODE_DIRS: tells two dirty trees (or two wheels) apart

    @property
    def label(self) -> str:
        """Short form for Dagster's `code_version`: `0.1.0+g<commit>[.dirty.<source>]` or `0.1.0+src.<source>`."""
        if self.git_commit is None:
            return f"{self.package}+src.{self.source_sha256[:12]}"
        dirty = f".dirty.{self.source_sha256[:12]}" if self.dirty else ""
        return f"{self.package}+g{self.git_commit[:12]}{dirty}"


class Preregistration(BaseModel):
    """The protocol every later table is tied to through `prereg_sha256` (agents register separately)."""

    study: dict  # the study file's settings without its agents
    tasks: list[FrozenTask]
    code: CodeVersion
    check_library_sha256: str
    sandbox: dict
    sealed_inputs: dict[str, str] | None = None  # imported Harbor jobs: {job/file: sha256}
    prereg_sha256: str
    # Where the declared design is below the range the calibration covers (docs/statistics.md §10), said
    # before any trial runs (hashed: it follows from the study and its tasks).
    design_warnings: list[str] = []
    frozen_at: str | None = None  # when it was first written; not hashed (the same protocol frozen twice is one)

    def body(self) -> dict:
        """What the hash covers."""
        return self.model_dump(exclude={"prereg_sha256", "frozen_at"} | ({"sealed_inputs"} if self.sealed_inputs is None
                                                                         else set()))

    def write(self, path: Path) -> None:
        """Store the protocol; an identical one already there is kept as it is (with its first timestamp)."""
        if path.is_file() and _stored_hash(path, "prereg_sha256") == self.prereg_sha256:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        stamped = self.model_copy(update={"frozen_at": _now()})
        path.write_text(json.dumps(stamped.model_dump(), indent=2, sort_keys=True) + "\n")


class ProgramFile(BaseModel):
    path: str
    sha256: str


class AgentRegistration(BaseModel):
    """One agent joining one study version, frozen before its first trial."""

    agent: str
    prereg_sha256: str
    config: dict
    program: list[ProgramFile]  # a command agent's program files; empty for other kinds
    agent_sha256: str
    registered_at: str | None = None  # when it was first written; not hashed

    def body(self) -> dict:
        return self.model_dump(exclude={"agent_sha256", "registered_at"})


def freeze(study: Study, tasks: list[Task], sealed_inputs: dict[str, str] | None = None) -> Preregistration:
    """The protocol of a study: change a setting, a task, the check library or the code, get a new hash.

    `sealed_inputs` ({file: sha256}) are the files of imported Harbor jobs: a changed file is a new
    protocol, so outcomes recorded elsewhere cannot change after the study was frozen."""
    settings = study.model_dump(mode="json")
    settings.pop("agents")
    settings.pop("backend")  # recorded with the sandbox, beside each task's backend
    if not settings["imports"]:
        settings.pop("imports")  # a study without imports freezes as before imports existed
    body = {
        "study": settings,
        "tasks": [
            FrozenTask(name=t.name, family=t.family, structure=t.structure, stages=[s.name for s in t.stages],
                       content_sha256=t.content_hash()).model_dump()
            for t in tasks
        ],
        "code": code_version().model_dump(),
        "check_library_sha256": file_sha256(CHECK_LIBRARY),
        "sandbox": sandbox_limits(study, tasks),
        "design_warnings": calibrated_range_warnings(study.trials.checkpoint, study.trials.natural,
                                                     dict(Counter(t.family for t in tasks))),
    }
    if sealed_inputs:
        body["sealed_inputs"] = sealed_inputs
    return Preregistration(**body, prereg_sha256=sha256_json(body))


def sandbox_limits(study: Study, tasks: list[Task]) -> dict:
    """The limits a trial runs under: the study's backend, the declared budget and the sandbox program's
    version; under `backend: auto`, also which backend each task runs on.

    Limits fixed in hrbench's code (process caps, mount sizes) are covered by `code.source_sha256`.
    """
    limits = {"backend": study.backend, "bwrap": bwrap_version(),
              "budget": study.checkpoint.budget.model_dump(mode="json")}
    if study.backend == AUTO:
        limits["task_backends"] = {t.name: backend_for_task(AUTO, t) for t in tasks}
    return limits


@functools.cache
def bwrap_version() -> str | None:
    bwrap = shutil.which("bwrap")
    return subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip() if bwrap else None


def register_agent(prereg: Preregistration, spec: BaseModel) -> AgentRegistration:
    """An agent's registration under a protocol: its config and, for a command agent, its program's content."""
    body = {
        "agent": spec.id,  # type: ignore[attr-defined]
        "prereg_sha256": prereg.prereg_sha256,
        "config": spec.model_dump(mode="json"),
        "program": [p.model_dump() for p in _program_files(spec)],
    }
    return AgentRegistration(**body, agent_sha256=sha256_json(body))


def registration_path(out_dir: Path, agent: str) -> Path:
    return Path(out_dir) / registration_key(agent)


def store_registration(out_dir: Path, registration: AgentRegistration) -> Path:
    """Write OUT/registrations/<agent>.json once; a different registration of the same agent id is refused.

    A changed config or program under the same id would mix two agents in one partition.
    """
    path = registration_path(out_dir, registration.agent)
    if check_registration(out_dir, registration):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    stamped = registration.model_copy(update={"registered_at": _now()})
    path.write_text(json.dumps(stamped.model_dump(), indent=2, sort_keys=True) + "\n")
    return path


def check_registration(out_dir: Path, registration: AgentRegistration) -> bool:
    """True if this registration is already stored; StudyError if another one of the same agent id is."""
    path = registration_path(out_dir, registration.agent)
    if path.is_file():
        stored = _stored_hash(path, "agent_sha256")
        if stored == registration.agent_sha256:
            return True
        raise StudyError(
            f"{path}: agent {registration.agent!r} is registered as {str(stored)[:12]}, but its config or program "
            f"is now {registration.agent_sha256[:12]}: a changed agent is a new agent — give it a new id in the "
            "study file (the old id keeps its results), or restore the registered config")
    return False


def load_registration(out_dir: Path, agent: str) -> AgentRegistration | None:
    path = registration_path(out_dir, agent)
    return AgentRegistration.model_validate_json(path.read_text()) if path.is_file() else None


@functools.cache
def code_version() -> CodeVersion:
    """Computed once per process: the code does not change under a running study."""
    try:
        package = version("hrbench")
    except PackageNotFoundError:  # run from a source tree that was never installed
        package = "0+unknown"
    commit, dirty = _git_state(CODE_ROOT)
    return CodeVersion(package=package, git_commit=commit, dirty=dirty, source_sha256=source_sha256(CODE_ROOT))


def source_sha256(root: Path) -> str:
    """SHA-256 over the path and bytes of every source file under CODE_DIRS (caches and bytecode left out)."""
    digest = hashlib.sha256()
    for name in CODE_DIRS:
        base = root / name
        if not base.is_dir():
            continue
        for file in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and p.suffix not in (".pyc", ".pyo")):
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _git_state(root: Path) -> tuple[str | None, bool | None]:
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None, None
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None, None
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *CODE_DIRS],
                            capture_output=True, text=True)
    return head.stdout.strip(), bool(status.stdout.strip()) or status.returncode != 0


def _program_files(spec: BaseModel) -> list[ProgramFile]:
    """Every argv element of a command agent that names a file (the interpreter and the script, say)."""
    argv = getattr(spec, "argv", None)
    if getattr(spec, "kind", None) != "command" or not argv:
        return []
    base = Path(spec.cwd) if getattr(spec, "cwd", None) else Path.cwd()  # where the program will run
    files = []
    for i, arg in enumerate(argv):
        candidate = Path(arg) if Path(arg).is_absolute() else base / arg
        if not candidate.is_file() and i == 0 and shutil.which(arg):
            candidate = Path(shutil.which(arg))  # type: ignore[arg-type]
        if candidate.is_file():
            files.append(ProgramFile(path=arg, sha256=file_sha256(candidate.resolve())))
    return files


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _stored_hash(path: Path, field: str) -> str | None:
    try:
        return json.loads(path.read_text()).get(field)
    except (OSError, ValueError):
        return None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class StudySource(BaseModel):
    """Which study file made an output directory (`OUT/study_source.json`), so tools can find it again."""

    study_file: str
    study_sha256: str  # of the validated study (agents included), as last run


def record_study_source(out_dir: Path, study_file: Path, study: Study) -> Path:
    path = Path(out_dir) / "study_source.json"
    body = StudySource(study_file=str(Path(study_file).resolve()), study_sha256=sha256_json(study.model_dump(mode="json")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body.model_dump_json(indent=2) + "\n")
    return path


def recorded_study_source(out_dir: Path) -> StudySource | None:
    path = Path(out_dir) / "study_source.json"
    try:
        return StudySource.model_validate_json(path.read_text()) if path.is_file() else None
    except ValueError:
        return None
