"""Freeze a study: canonical JSON of the protocol and of every task's content, and its SHA-256."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from pydantic import BaseModel

from hrbench.protocol import Study, sha256_json
from hrbench.tasks.model import Task


class FrozenTask(BaseModel):
    name: str
    family: str
    structure: str
    stages: list[str]
    content_sha256: str


class Preregistration(BaseModel):
    """What every later table is tied to through `prereg_sha256`."""

    study: dict
    tasks: list[FrozenTask]
    hrbench_version: str
    prereg_sha256: str

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump(), indent=2, sort_keys=True) + "\n")


def freeze(study: Study, tasks: list[Task]) -> Preregistration:
    """The hash covers the protocol, the task contents and the code version: change any, get a new study version."""
    body = {
        "study": study.model_dump(mode="json"),
        "tasks": [
            FrozenTask(name=t.name, family=t.family, structure=t.structure, stages=[s.name for s in t.stages],
                       content_sha256=t.content_hash()).model_dump()
            for t in tasks
        ],
        "hrbench_version": version("hrbench"),
    }
    return Preregistration(**body, prereg_sha256=sha256_json(body))

