"""Shared fixtures: the fixture registry, a tiny study, and task-package builders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_STUDY = FIXTURES / "studies" / "tiny.yaml"
TINY_TASK = FIXTURES / "registry" / "tiny-chain"


@pytest.fixture
def tiny_task_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture task, for tests that break it."""
    target = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, target)
    return target
