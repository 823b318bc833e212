"""Protects the docker backend against a hostile agent: tests/security's attack sequence
(tests/security/attacks.py) with the docker backend swapped in, hrbench running as root, against
podman. Every attack must fail except the one docs/docker.md names as the backend's shortfall."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.test_attacks import FAKE_KEY, REPO, _report

pytestmark = pytest.mark.slow  # podman, containers


def test_every_attack_fails_on_the_docker_backend(docker_host: str, tmp_path: Path):
    out = tmp_path / "results.json"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tests.security.attacks", str(out), "--backend", "docker",
                           "--docker-host", docker_host], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    results = _report(out, proc)
    assert "docker backend at " + docker_host in proc.stdout
    broken = {name for name, r in results.items() if not r["held"]}
    assert not broken, f"attacks that succeeded: {sorted(broken)}\n{proc.stdout}"
    assert len(results) == 14, proc.stdout  # every attack of the sequence was judged, none skipped
    assert any(name.startswith("start the container privileged") for name in results)
