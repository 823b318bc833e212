"""Protects the sandbox launcher (hrbench/envs/local/launch.c, the one exec between the harness and bwrap):
it fails closed, running nothing, when it cannot join a trial's cgroup; a planted launcher binary is
refused; without a C compiler the sh + setpriv launcher confines a sandbox exactly as it does; and
either launcher puts the sandbox, not the harness, into every cgroup of the trial."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hrbench.envs.local import confine
from hrbench.envs.base import SandboxError
from hrbench.envs.local.confine import (
    LAUNCH_ENV,
    SandboxLimits,
    TrialCgroup,
    confined_argv,
    namespace_args,
    root_mounts,
)
from hrbench.envs.local import LocalBackend
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

STATUS = "grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; ulimit -t -f -v"


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=LAUNCH_ENV, cwd="/", capture_output=True, text=True, timeout=60,
                          start_new_session=True, check=False)


def test_a_cgroup_it_cannot_join_stops_the_launch_before_anything_runs(tmp_path: Path):
    marker = tmp_path / f"ran-{secrets.token_hex(3)}"
    unjoinable = TrialCgroup("unjoinable", SandboxLimits(), existing={"pids": tmp_path / "no-such-cgroup"})
    bwrap = root_mounts(SandboxLimits()) + ["--bind", str(tmp_path), str(tmp_path)] + namespace_args()
    proc = _run(confined_argv(bwrap, ["/bin/sh", "-c", f"touch {marker}"], SandboxLimits(), unjoinable))
    assert proc.returncode == 125, proc.stderr
    assert "cannot join the cgroup" in proc.stderr and "no-such-cgroup" in proc.stderr
    assert not marker.exists()


@pytest.mark.skipif(confine.launcher() is None, reason="no C compiler: the sh + setpriv launcher is in use")
def test_a_launcher_binary_writable_by_others_is_refused(tmp_path: Path, monkeypatch):
    area = tmp_path / "area"
    area.mkdir(mode=0o711)
    monkeypatch.setattr(confine, "sandbox_area", lambda: area)
    confine.launcher.cache_clear()
    try:
        binary = Path(confine.launcher())  # built afresh in the private area
        assert binary.parent == area / "launcher"
        os.chmod(binary, 0o777)
        confine.launcher.cache_clear()
        with pytest.raises(SandboxError, match="writable only by it"):
            confine.launcher()
    finally:
        confine.launcher.cache_clear()


def _interpreter(binary: Path) -> bool:
    """Whether an ELF binary names a dynamic loader (a PT_INTERP program header)."""
    data = binary.read_bytes()
    offset, size, count = (int.from_bytes(data[a:a + n], "little") for a, n in ((0x20, 8), (0x36, 2), (0x38, 2)))
    return any(int.from_bytes(data[offset + i * size:offset + i * size + 4], "little") == 3 for i in range(count))


@pytest.mark.skipif(confine.launcher() is None, reason="no C compiler: the sh + setpriv launcher is in use")
@pytest.mark.parametrize("static_archive", [True, False])
def test_the_launcher_is_linked_statically_where_it_can_be_and_works_either_way(tmp_path: Path, monkeypatch,
                                                                                 static_archive: bool):
    area = tmp_path / "area"
    area.mkdir(mode=0o711)
    monkeypatch.setattr(confine, "sandbox_area", lambda: area)
    if not static_archive:  # a static link that fails, as where the C library's archive is not installed
        monkeypatch.setattr(confine, "_LAUNCH_BUILDS", (("-O2", "-Wall", "-static", "-lhrbench-missing"),
                                                        *confine._LAUNCH_BUILDS[1:]))
    confine.launcher.cache_clear()
    try:
        binary = Path(confine.launcher())
        libc_archive = any(Path(d, "libc.a").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"))
        assert _interpreter(binary) == (not static_archive or not libc_archive)
        proc = _run([str(binary), "--", "/bin/echo", "launched"])
        assert proc.returncode == 0 and proc.stdout == "launched\n", proc.stderr
    finally:
        confine.launcher.cache_clear()


def _status_inside(tmp_path: Path) -> list[str]:
    env = LocalBackend(tmp_path / "cache").start(load_task(TINY_TASK), 0)
    try:
        return env.exec(STATUS, 30).output.split()
    finally:
        env.close()


def test_the_fallback_launcher_confines_a_sandbox_as_the_compiled_one_does(tmp_path: Path, monkeypatch):
    compiled = _status_inside(tmp_path / "compiled")
    monkeypatch.setattr(confine, "launcher", lambda: None)
    assert confined_argv(["bwrap"], ["true"], SandboxLimits(), None)[0] == "/bin/sh"
    fallback = _status_inside(tmp_path / "fallback")
    assert fallback == compiled
    assert "NoNewPrivs:" in compiled and compiled[compiled.index("NoNewPrivs:") + 1] == "1"
    assert compiled[compiled.index("CapBnd:") + 1] == "0" * 16


@pytest.mark.parametrize("which", ["compiled", "fallback"])
def test_the_launcher_moves_itself_into_every_trial_cgroup_and_leaves_the_harness_out(tmp_path: Path, monkeypatch,
                                                                                      which: str):
    # Each launcher writes "0" (the calling thread) into a v1 group's `tasks`: the harness, which
    # started it, must stay where it was, and what bwrap starts must be inside every group.
    if which == "fallback":
        monkeypatch.setattr(confine, "launcher", lambda: None)
    cgroup = TrialCgroup(f"join-{which}", SandboxLimits())
    if not cgroup.enforced:
        pytest.skip("no writable memory or pids cgroup here")
    try:
        bwrap = root_mounts(SandboxLimits()) + namespace_args()
        proc = subprocess.Popen(confined_argv(bwrap, ["/bin/sleep", "30"], SandboxLimits(), cgroup), env=LAUNCH_ENV,
                                cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            members: dict[str, set[int]] = {}
            for _ in range(200):
                members = {name: {int(p) for p in (group / "cgroup.procs").read_text().split()}
                           for name, group in cgroup.dirs.items()}
                if proc.poll() is not None or all(len(pids) >= 2 for pids in members.values()):  # bwrap + sleep
                    break
                time.sleep(0.02)
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            for name, pids in members.items():
                assert proc.pid in pids, (name, pids)
                assert len(pids) >= 2, (name, pids)
                assert os.getpid() not in pids, name
        finally:
            cgroup.kill()
            if proc.poll() is None:  # a launcher that joined nothing left it outside the groups
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    finally:
        cgroup.remove()
