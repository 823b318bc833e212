"""The task model: a Harbor multi-step task package as hrbench sees it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

KEY_BEGIN = "# hrbench:key-begin"
KEY_END = "# hrbench:key-end"


class TaskError(ValueError):
    """A task package that cannot be used: says which file, what, and what to do."""


class Stage(BaseModel):
    """One verifiable stage: instruction, reference solution sigma_i, verifier V_i."""

    model_config = ConfigDict(frozen=True)
    name: str
    index: int  # 0-based position in delivery order
    instruction: str
    solution: Path
    tests: Path
    depends_on: tuple[str, ...] = ()
    weight: float = 1.0

    def solution_script(self) -> str:
        return self.solution.read_text()

    def solution_without_key_step(self) -> str:
        """sigma_i with its marked key step removed (the sim agent's failure, the audit's third test)."""
        return strip_key_step(self.solution_script(), where=str(self.solution))


class Task(BaseModel):
    """A loaded task package (DESIGN §3)."""

    model_config = ConfigDict(frozen=True)
    name: str
    path: Path
    description: str = ""
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
        digest = hashlib.sha256()
        for file in sorted(p for p in self.path.rglob("*") if p.is_file()):
            digest.update(str(file.relative_to(self.path)).encode())
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
