"""Protects the sandbox against a hostile agent, whoever runs hrbench: the attack sequence of
attacks.py runs from inside a trial with hrbench started as root and as an unprivileged user (with
a delegated cgroup, as systemd's Delegate= or a container gives one), and every attack must fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hrbench.envs.confine import _cgroup_bases

REPO = Path(__file__).resolve().parents[2]
FAKE_KEY = "sk-hrbench-fake-4f1c2a9e7d"
TEST_UID = 47100  # an ordinary user, not the sandbox's uid
SITE_PACKAGES = [p for p in sys.path if p.endswith("site-packages")]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")


def _report(out: Path, proc: subprocess.CompletedProcess) -> dict:
    print(proc.stdout)  # each attack and its outcome (pytest -s shows it; failures always do)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def _assert_all_held(results: dict, transcript: str) -> None:
    broken = [name for name, r in results.items() if not r["held"]]
    assert not broken, f"attacks that succeeded: {broken}\n{transcript}"
    assert len(results) >= 11, transcript


def test_every_attack_fails_with_hrbench_running_as_root(tmp_path: Path):
    out = tmp_path / "results.json"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tests.security.attacks", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    results = _report(out, proc)
    _assert_all_held(results, proc.stdout)
    assert "exceed the disk limit with many files (64 MB workspace)" in results  # root: the workspace is sized


@pytest.fixture
def delegated_cgroups():
    """Cgroups handed to TEST_UID (what systemd's Delegate= does), with the launcher script to enter them."""
    groups = []
    for controller, base in _cgroup_bases().items():
        group = base / f"hrbench-test-user-{os.getpid()}-{controller}"
        group.mkdir(exist_ok=True)
        for path in [group, *group.iterdir()]:
            os.chown(path, TEST_UID, TEST_UID)
        groups.append(group)
    yield groups
    for group in groups:
        for child in sorted(group.glob("hrbench-*"), reverse=True):
            child.rmdir()
        group.rmdir()


def _run_as_user(cgroups: list[Path], module: str = "tests.security.attacks") -> tuple[dict, str]:
    """The attack sequence (or another program of this suite, `module`) with hrbench started as
    TEST_UID, inside `cgroups` (none: no delegation)."""
    home = Path(tempfile.mkdtemp(prefix="hrbench-user-"))
    try:
        os.chown(home, TEST_UID, TEST_UID)
        out = home / "results.json"
        join = "".join(f"echo $$ > {g}/cgroup.procs\n" for g in cgroups)
        argv = ["/bin/sh", "-c", join + 'exec "$@"', "launcher", "setpriv", f"--reuid={TEST_UID}",
                f"--regid={TEST_UID}", "--clear-groups", "--inh-caps=-all", "--",
                "/usr/bin/python3", "-m", module, str(out)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "OPENAI_API_KEY": FAKE_KEY,
               "PYTHONPATH": ":".join([str(REPO), *SITE_PACKAGES])}
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
        results = _report(out, proc)
        assert f"as uid {TEST_UID} (root=False)" in proc.stdout
        return results, proc.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_every_attack_fails_with_hrbench_running_as_an_unprivileged_user(delegated_cgroups):
    assert delegated_cgroups, "this host has no memory or pids cgroup to delegate"
    results, transcript = _run_as_user(delegated_cgroups)
    assert "cgroups for a trial: ['cpu', 'memory', 'pids']" in transcript
    _assert_all_held(results, transcript)


def test_without_a_cgroup_only_the_documented_fallbacks_are_weaker():
    """No cgroup to use (an unprivileged user without delegation): processes are bounded per uid and
    memory per process (docs/security.md), so only the per-trial memory attack gets through."""
    results, transcript = _run_as_user([])
    assert "cgroups for a trial: none" in transcript
    broken = {name for name, r in results.items() if not r["held"]}
    assert broken == {next(n for n in results if n.startswith("exceed the memory limit"))}, transcript
