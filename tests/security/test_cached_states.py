"""Protects cached environment states: they are the harness's, sealed with a content hash when built.
A state edited from outside is named by `hrbench verify` and rebuilt (with a log line) by the next
trial that needs it; the agent cannot reach the cache at all."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrbench.cli import app
from hrbench.envs import states
from hrbench.envs.local import LocalBackend, bwrap_available
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")


def test_a_state_edited_from_outside_is_named_by_verify_and_rebuilt(tmp_path: Path, caplog):
    out = tmp_path / "out"
    backend = LocalBackend(out / "cache")
    task = load_task(TINY_TASK)
    state = backend.checkpoint_state(task, 1)
    assert states.check(state) is None
    assert stat.S_IMODE((out / "cache" / "states").stat().st_mode) == 0o700  # the harness's only
    target = state / "work" / "a.txt"
    data = bytearray(target.read_bytes())
    data[0] ^= 1  # one byte, from outside
    target.write_bytes(bytes(data))

    result = CliRunner().invoke(app, ["verify", str(out)])
    rel = state.relative_to(out)
    assert result.exit_code == 1 and f"MISMATCH {rel}: content sha256" in result.output, result.output

    with caplog.at_level(logging.WARNING, logger="hrbench.envs.local"):
        env = backend.start(task, 1)
    try:
        assert env.exec("cat a.txt", 10).output.strip() == "4"  # the trial got the rebuilt state
    finally:
        env.close()
    assert any(f"checkpoint state {state}" in r.message and "rebuilding it" in r.message for r in caplog.records)
    assert states.check(state) is None
    assert f"MISMATCH {rel}" not in CliRunner().invoke(app, ["verify", str(out)]).output


def test_an_unsealed_state_is_rebuilt_and_a_tampered_agent_state_refused(tmp_path: Path, caplog):
    backend = LocalBackend(tmp_path / "cache")
    task = load_task(TINY_TASK)
    state = backend.checkpoint_state(task, 0)
    states.record_path(state).unlink()  # e.g. a state left by an older hrbench, or a crash after the copy
    with caplog.at_level(logging.WARNING, logger="hrbench.envs.local"):
        backend.checkpoint_state(task, 0)
    assert any("no content hash recorded" in r.message for r in caplog.records)

    env = backend.start(task, 0)
    try:
        env.exec("echo 4 > a.txt", 10)
        backend.save_state(env, "p0/after-1")
    finally:
        env.close()
    saved = tmp_path / "cache" / "agent-states" / "p0" / "after-1"
    assert states.check(saved) is None
    (saved / "work" / "a.txt").write_text("5\n")
    with pytest.raises(Exception, match="saved agent state .* differs from the"):
        backend.start(task, 1, "p0/after-1")


def test_the_agent_cannot_see_the_cache_or_its_trial_directory(tmp_path: Path):
    backend = LocalBackend(tmp_path / "cache")
    task = load_task(TINY_TASK)
    env = backend.start(task, 1)
    try:
        probe = env.exec(f"ls {tmp_path}/cache {env.root} 2>&1; stat -c '%u %a' /output /app; echo done", 10)
        assert "No such file or directory" in probe.output and "after-" not in probe.output, probe.output
        info = env.root.stat()
        assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o711  # the harness's
        assert (env.root / "persist").stat().st_uid == os.geteuid()
    finally:
        env.close()


def test_what_the_agent_does_to_its_workspace_never_reaches_the_cached_state(tmp_path: Path):
    """As root a trial's workspace is an overlay of the sealed state (copy-on-write): writes, truncation,
    chmod, a hard link written through, renames and deletions all land in the trial's upper layer."""
    backend = LocalBackend(tmp_path / "cache")
    task = load_task(TINY_TASK)
    state = backend.checkpoint_state(task, 1)
    before = states.tree_sha256(state)
    env = backend.start(task, 1)
    try:
        out = env.exec("ln a.txt link && echo 9 > link && chmod 600 a.txt && cat a.txt && mkdir d && mv d e && "
                       "python3 -c \"import os; os.rename('e', 'f')\" && rm -f a.txt && echo ok", 10).output
        assert out.split() == ["9", "ok"], out  # the agent sees its own writes, a directory renamed by rename(2)
    finally:
        env.close()
    assert states.tree_sha256(state) == before and states.check(state) is None
    assert (state / "work" / "a.txt").read_text() == "4\n"
    env = backend.start(task, 1)  # the next trial starts from the sealed state, untouched
    try:
        assert env.exec("cat a.txt; ls", 10).output.split() == ["4", "a.txt", "seed.txt"]
    finally:
        env.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the overlay and its sized upper layer need root")
def test_the_overlay_workspace_holds_what_a_copy_of_the_state_would(tmp_path: Path):
    from hrbench.envs.local.confine import SandboxLimits

    backend = LocalBackend(tmp_path / "cache", limits=SandboxLimits(workspace_mb=8))
    task = load_task(TINY_TASK)
    env = backend.start(task, 1)
    try:
        assert os.path.ismount(env.root)  # the overlay (in the trial's tmpfs, which holds its upper layer)
        used = env.exec("head -c 20M /dev/zero > big; find /app /output -type f -printf '%s\\n' | "
                        "awk '{s += $1} END {print s}'", 20)
        assert 7 << 20 < int(used.output.split()[-1]) <= 8 << 20, used.output  # state and writes: 8 MB
    finally:
        env.close()


def test_a_state_matched_before_is_hashed_again_once_anything_in_it_changed(tmp_path: Path, monkeypatch):
    """`SealChecks` skips re-reading a state's bytes only while no entry's metadata changed: an edit
    that keeps the size and puts the modification time back (ctime still moves) is caught."""
    monkeypatch.setattr(states, "_RACY_S", -60.0)  # trust a match however recent: the memo is what is tested
    hashed: list[Path] = []
    real_check = states.check
    monkeypatch.setattr(states, "check", lambda state: hashed.append(state) or real_check(state))
    backend = LocalBackend(tmp_path / "cache")
    task = load_task(TINY_TASK)
    state = backend.checkpoint_state(task, 1)
    hashed.clear()
    for _ in range(3):
        env = backend.start(task, 1)
        env.close()
    assert hashed == []  # matched before, metadata unchanged: no byte read again

    target = state / "work" / "a.txt"
    info = target.stat()
    data = bytearray(target.read_bytes())
    data[0] ^= 1
    target.write_bytes(bytes(data))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))  # same size, same mtime: only ctime moved
    env = backend.start(task, 1)
    try:
        assert env.exec("cat a.txt", 10).output.strip() == "4"  # rebuilt, not the edited bytes
    finally:
        env.close()
    assert hashed and hashed[0] == state
