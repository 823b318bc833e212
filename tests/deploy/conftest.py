"""A small study whose agents live in their own files, as users keep them, and helpers to grow it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hrbench.catalogue import StudyNames
from hrbench.storage import store_for
from tests.conftest import FIXTURES

AGENTS = {
    "steady": {"id": "steady", "kind": "sim", "sim": {"skill": 0.9}},
    "rotting": {"id": "rotting", "kind": "sim", "sim": {"skill": 0.9, "context_rot": 0.3}},
    "third": {"id": "third", "kind": "sim", "sim": {"skill": 0.8}},
}


DEPLOY = StudyNames.of("deploy")  # the Dagster names of write_study's study


def write_study(root: Path, agents: list[str], name: str = "deploy") -> Path:
    """study.yaml + agents/<id>.yaml for the given agents, over the fixture registry."""
    (root / "agents").mkdir(parents=True, exist_ok=True)
    for agent in agents:
        (root / "agents" / f"{agent}.yaml").write_text(yaml.safe_dump(AGENTS[agent]))
    study = {
        "name": name, "tasks": {"registry": str(FIXTURES / "registry")},
        "agents": [{"config": f"agents/{a}.yaml"} for a in agents],
        "trials": {"checkpoint": 4, "natural": 6}, "bootstrap": {"n_boot": 200, "seed": 1}, "concurrency": 4,
    }
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def snapshot(out: Path, agents: list[str]) -> dict[str, bytes]:
    """Bytes of every table and journal of the given agents."""
    files = {}
    store = store_for(out)
    for key in store.list("tables"):  # the tables in the study's store (local or S3)
        if any(part in agents for part in key.split("/")) or key.split("/")[-1].removesuffix(".parquet") in agents:
            files[key] = store.get(key)
    for path in sorted((out / "journal").rglob("*.jsonl")):  # the journals (write-ahead logs: always local)
        if any(part in agents for part in path.relative_to(out).parts) or path.stem in agents:
            files[str(path.relative_to(out))] = path.read_bytes()
    return files


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    return tmp_path
