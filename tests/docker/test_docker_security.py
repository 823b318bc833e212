"""Protects the docker backend against a hostile agent: tests/security's attack sequence
(tests/security/attacks.py) with the docker backend swapped in, hrbench running as root, against
podman. Every attack must fail except the one docs/docker.md names as the backend's shortfall."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.attacks import LIMITS
from tests.security.test_attacks import FAKE_KEY, REPO, _report

pytestmark = pytest.mark.slow  # podman, containers

# The writable layer has no quota here (ext4 overlay: no project quota), so files under the
# per-file bound add up past the workspace size; docs/docker.md ("Where it falls short").
SHORTFALLS = {f"exceed the disk limit with many files ({LIMITS.workspace_mb} MB workspace)"}


def test_every_attack_fails_on_the_docker_backend_but_the_documented_one(docker_host: str, tmp_path: Path):
    out = tmp_path / "results.json"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tests.security.attacks", str(out), "--backend", "docker",
                           "--docker-host", docker_host], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    results = _report(out, proc)
    assert "docker backend at " + docker_host in proc.stdout
    broken = {name for name, r in results.items() if not r["held"]}
    assert broken == SHORTFALLS, f"attacks that succeeded: {sorted(broken)}\n{proc.stdout}"
    assert len(results) == 14, proc.stdout  # every attack of the sequence was judged, none skipped
    assert any(name.startswith("start the container privileged") for name in results)
