"""Protects the host, the cache and other trials from a hostile agent's writable space, and the
verifier from an agent that exhausts its trial: the symlink agent, the poisoner and the starver of
hostile_agents.py, with hrbench started as root and as an unprivileged user (delegated cgroups)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.test_attacks import TEST_UID, _run_as_user, delegated_cgroups  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")]


STARVERS = ("starver", "starver, verifier writes the workspace")


def _check(results: dict, transcript: str, shortfalls: tuple[str, ...] = ()) -> None:
    """Every check of the module's docstring; `shortfalls` names trials a backend is documented to
    record as `verifier_error` (docs/security.md) instead of `failed`."""
    agents = {k: v for k, v in results.items() if k not in ("outside", "racer")}
    # 0 stages passed without solving: the symlink agent solves part 1 of its natural rollout, nothing else
    passed = {k: v["stages_passed"] for k, v in agents.items() if v["stages_passed"]}
    assert passed == {"symlink natural": 1}, (passed, transcript)
    errors = {k: v["error"] for k, v in agents.items() if v["error"] and k not in shortfalls}
    assert not errors, errors
    # every probe ran and none saw a host marker, through any link, in any fresh shell or racing exec
    assert not any(v["escaped"] for v in agents.values()) and not results["racer"]["escaped"], transcript
    assert agents["symlink natural"]["swaps"] >= 5 and agents["symlink natural"]["probes_held"] >= 4, agents
    assert results["racer"]["held"] == results["racer"]["probes"] > 0, results["racer"]
    # nothing outside the trials' workspaces changed
    before, after = results["outside"]["before"], results["outside"]["after"]
    assert after == before and after["states_ok"] == 3, (before, after)
    # the starver's trials are the agent's failures, never verifier errors
    for name in STARVERS:
        expected = ["verifier_error"] if name in shortfalls else ["failed"]
        assert agents[name]["stage_exit_reasons"] == expected, agents[name]


def test_hostile_agents_with_hrbench_running_as_root(tmp_path: Path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "tests.security.hostile_agents", str(out)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    _check(results, proc.stdout)
    # as root the workspace is sized: the full workspace, not the verifier, is named as the cause
    detail = results["starver, verifier writes the workspace"]["details"][0]
    assert detail.startswith("the agent left its workspace full"), detail


def test_hostile_agents_with_hrbench_running_as_an_unprivileged_user(delegated_cgroups):  # noqa: F811
    results, transcript = _run_as_user(delegated_cgroups, "tests.security.hostile_agents")
    _check(results, transcript)
