"""Protects the docker backend against the hostile agents of tests/security/hostile_agents.py (the
symlink agent and its racer, the poisoner, the starver), hrbench running as root, against podman:
the same checks as on local (tests/security/test_hostile_agents.py), but one documented shortfall:
the verifier runs in the agent's container, and after the starver it writes no reward, so those
trials are `verifier_error` (docs/security.md, "What the docker backend must match")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.test_hostile_agents import REPO, STARVERS, _check

pytestmark = pytest.mark.slow  # podman, containers


def test_hostile_agents_on_the_docker_backend(docker_host: str, tmp_path: Path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "tests.security.hostile_agents", str(out), "--backend", "docker",
                           "--docker-host", docker_host], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr[-3000:]
    assert "docker backend" in proc.stdout
    _check(json.loads(out.read_text()), proc.stdout, shortfalls=STARVERS)
