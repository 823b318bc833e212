"""The task model: a Harbor multi-step task package as hrbench sees it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hrbench.tasks.harbor import CollectHook, Healthcheck, KeySupport

KEY_BEGIN = "# hrbench:key-begin"
KEY_END = "# hrbench:key-end"


class TaskError(ValueError):
    """A task package that cannot be used: says which file, what, and what to do."""


class VerifierImage(BaseModel):
    """Where a separate verifier's container comes from on docker, resolved as Harbor resolves it: the
    `docker_image` of the step's [verifier.environment], else of the task's; else the Dockerfile of the
    step's tests/ folder when the step has one, else of the task's tests/ (its folder is the build context).
    A stage with neither has none: its verifier's container is of the task's own image (e_0)."""

    model_config = ConfigDict(frozen=True)
    docker_image: str | None = None
    dockerfile: Path | None = None


class Stage(BaseModel):
    """One verifiable stage: instruction, reference solution sigma_i, verifier V_i."""

    model_config = ConfigDict(frozen=True)
    name: str
    index: int  # 0-based position in delivery order
    instruction: str
    solution: Path  # solve.sh; its folder is uploaded to /solution and it runs from there
    tests: Path  # the folder copied to /tests (the step's own, or the task-level tests/ fallback)
    depends_on: tuple[str, ...] = ()
    weight: float = 1.0
    workdir_files: Path | None = None  # steps/<name>/workdir/: copied into WORKDIR before the agent's turn
    setup_script: Path | None = None  # steps/<name>/workdir/setup.sh: run after the copy, before the turn
    agent_timeout_sec: float | None = None  # [steps.agent] timeout_sec (None: the task's)
    verifier_timeout_sec: float | None = None  # [steps.verifier] timeout_sec (None: the task's)
    verifier_env: tuple[tuple[str, str], ...] = ()  # [steps.verifier.env], over [verifier.env]
    healthcheck: Healthcheck | None = None  # [steps.healthcheck], after setup, before the agent's turn
    min_reward: float | tuple[tuple[str, float], ...] | None = None  # [[steps]] min_reward (Harbor's gate)
    artifacts: tuple[str, ...] = ()  # [[steps]] artifacts: paths collected after this step's verification
    # [verifier] environment_mode = "separate" (or a [verifier.environment]): the verifier runs in a fresh
    # environment that receives only the collected paths (/logs/artifacts, the task's and this step's artifacts)
    separate_verifier: bool = False
    verifier_image: VerifierImage | None = None  # a separate verifier's own image (docker); None: the task's
    collect: tuple[CollectHook, ...] = ()  # [[verifier.collect]]: run after the agent's turn, before collection

    def solution_script(self) -> str:
        return self.solution.read_text()

    @property
    def has_key_step(self) -> bool:
        """solve.sh marks a key step (hrbench's own extension; optional for Harbor tasks)."""
        return any(line.strip() == KEY_BEGIN for line in self.solution_script().splitlines())

    def solution_without_key_step(self) -> str:
        """sigma_i with its marked key step removed (the sim agent's failure, the audit's third test).

        Without a marked key step (a Harbor task as published) the failure is doing nothing."""
        if not self.has_key_step:
            return "true\n"
        return strip_key_step(self.solution_script(), where=str(self.solution))


class Task(BaseModel):
    """A loaded task package (DESIGN §3)."""

    model_config = ConfigDict(frozen=True)
    name: str  # as task.toml names it, `org/name` included
    path: Path
    description: str = ""
    goal_text: str | None = None  # a multi-step package's top-level instruction.md (see `goal`)
    family: str
    structure: Literal["shallow", "deep"]
    stages: tuple[Stage, ...]
    workdir: str = "/app"
    initial_files: tuple[tuple[Path, str], ...] = ()  # (host source, path relative to workdir)
    setup_script: Path | None = None
    shared_tests: Path | None = None
    docker_only: str | None = None  # reason the local backend cannot run it
    verifier_timeout_sec: float = 60.0
    agent_timeout_sec: float = 120.0
    schema_version: str = "1.0"
    env: tuple[tuple[str, str], ...] = ()  # [environment.env]: every sandboxed process of the task
    verifier_env: tuple[tuple[str, str], ...] = ()  # [verifier.env]
    solution_env: tuple[tuple[str, str], ...] = ()  # [solution.env]: the reference solution's runs
    healthcheck: Healthcheck | None = None  # [environment.healthcheck]: once the environment is up
    reward_strategy: Literal["mean", "final"] | None = None  # multi_step_reward_strategy
    artifacts: tuple[str, ...] = ()  # top-level artifacts (every stage)
    # (artifact source, exclude globs) of the artifact objects with `exclude` (task-level and the steps')
    artifact_exclude: tuple[tuple[str, tuple[str, ...]], ...] = ()
    network: Literal["no-network", "public"] = "no-network"  # public: a phase's network_mode asks for a network
    version: str | None = None  # [task] version: the package's own version (the content hash versions a study)
    persist: tuple[str, ...] = ()  # absolute paths outside WORKDIR whose writes survive between commands
    support: tuple[KeySupport, ...] = ()
    # tamper findings fail the audit (tasks written for hrbench, with [metadata.hrbench]); for Harbor tasks
    # without it they are reported as integrity notes (docs/tasks.md, "the audit")
    strict_integrity: bool = True  # every task.toml key: honoured, ignored (why), unsupported

    @property
    def slug(self) -> str:
        """The name as one path component (`org/name` -> `org__name`), for cache and file names."""
        return self.name.replace("/", "__")

    @property
    def goal(self) -> str:
        """The task's overall goal, as a `goal_only` checkpoint states it in place of a stage's instruction.

        A multi-step package may state it in a top-level `instruction.md` (Harbor reads only the
        steps' own instructions then, so the file is ours to use); else it is the steps' instructions
        in order, stated as one task."""
        if self.goal_text is not None:
            return self.goal_text.strip()
        if self.n_stages == 1:
            return self.stages[0].instruction.strip()
        parts = "\n\n".join(f"Part {s.index + 1} of {self.n_stages}:\n{s.instruction.strip()}" for s in self.stages)
        return f"The whole task, all {self.n_stages} parts in order:\n\n{parts}"

    @property
    def has_key_steps(self) -> bool:
        return all(s.has_key_step for s in self.stages)

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"task {self.name!r} has no stage {name!r}")

    @property
    def work(self) -> int:
        """W: non-blank, non-comment lines of all solve.sh files."""
        return sum(_work_lines(s.solution_script()) for s in self.stages)

    @property
    def dependency_depth(self) -> int:
        """H_dep: the longest chain (in stages) of the stage dependency DAG."""
        longest: dict[str, int] = {}
        for s in self.stages:  # stages are validated to be topologically ordered
            longest[s.name] = 1 + max((longest[d] for d in s.depends_on), default=0)
        return max(longest.values())

    def content_hash(self) -> str:
        """SHA-256 over every file of the package: a changed task is a new study version."""
        return folder_sha256(self.path)


def folder_sha256(root: Path) -> str:
    """SHA-256 over every file under `root`, each by its relative path and its bytes."""
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _work_lines(script: str) -> int:
    return sum(1 for line in script.splitlines() if line.strip() and not line.strip().startswith("#"))


def strip_key_step(script: str, where: str = "solve.sh") -> str:
    """Remove the lines between the key-step markers, markers included."""
    lines = script.splitlines(keepends=True)
    out: list[str] = []
    inside = False
    found = False
    for number, line in enumerate(lines, start=1):
        marker = line.strip()
        if marker == KEY_BEGIN:
            if inside:
                raise TaskError(f"{where}:{number}: nested '{KEY_BEGIN}'")
            inside, found = True, True
            continue
        if marker == KEY_END:
            if not inside:
                raise TaskError(f"{where}:{number}: '{KEY_END}' without '{KEY_BEGIN}'")
            inside = False
            continue
        if not inside:
            out.append(line)
    if inside:
        raise TaskError(f"{where}: '{KEY_BEGIN}' is never closed by '{KEY_END}'")
    if not found:
        raise TaskError(f"{where}: no key step marked; wrap it in '{KEY_BEGIN}' / '{KEY_END}' lines")
    return "".join(out)
