"""Protects the rule "the host never follows a path the agent can write" (docs/security.md): the
exploit of issue 20 (a persisted path's backing folder swapped for a symlink to / before a fresh
shell) and a step's files copied into a workspace whose paths the agent turned into host links."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, bwrap_available
from hrbench.harness.terminal import ShellTerminal
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required")


def test_a_persisted_path_swapped_for_a_symlink_to_root_shows_the_next_shell_nothing_of_the_host(tmp_path: Path):
    marker = tmp_path / "host-only-marker"
    marker.write_text("host\n")
    env = LocalBackend(tmp_path / "cache").start(load_task(TINY_TASK), 0)
    try:
        terminal = ShellTerminal(env)
        # the exploit, word for word, then the same against every place /output could come from
        terminal.run("rm -rf /app/.hrbench-persist/output && ln -s / /app/.hrbench-persist/output; "
                     "rm -rf /output /logs/artifacts; ln -s / /output; ln -s / /logs/artifacts; "
                     "mkdir -p /app/.hrbench-persist/logs; ln -s / /app/.hrbench-persist/logs/artifacts; "
                     "ln -s / /app/persist; ln -s / /app/work; exit\n", 10, 10)
        terminal.read()
        terminal.reopen()
        terminal.run(f"ls -A /output /logs/artifacts; cat /output{marker} /logs/artifacts{marker} "
                     f"/output/etc/hostname 2>&1; echo done\n", 10, 10)
        seen = terminal.read()
        assert "done" in seen and "host\n" not in seen and "usr" not in seen.split(), seen
        assert seen.count("No such file or directory") == 3, seen
        verdict = env.verify(env.task.stages[0])  # the verifier's sandbox binds the same sources
        assert verdict.error is None and not verdict.passed
    finally:
        env.close()


def test_a_steps_files_land_in_the_sandbox_whatever_links_the_agent_left(tmp_path: Path):
    registry = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, registry)
    files = registry / "steps" / "double" / "workdir"
    (files / "notes").mkdir(parents=True)
    (files / "notes" / "readme.txt").write_text("step notes\n")
    (files / "config.txt").write_text("step config\n")
    host = tmp_path / "host-dir"
    host.mkdir(mode=0o777)
    (host / "config.txt").write_text("host file\n")
    (host / "config.txt").chmod(0o666)
    task = load_task(registry)
    env = LocalBackend(tmp_path / "cache").start(task, 0)
    try:
        # the agent's workspace: the step's paths are links to host paths (dangling inside the sandbox)
        env.exec(f"ln -s {host} notes; ln -s {host}/config.txt config.txt", 10)
        env.begin_stage(task.stages[1])
        assert (host / "config.txt").read_text() == "host file\n" and sorted(p.name for p in host.iterdir()) == [
            "config.txt"]
        seen = env.exec("cat config.txt notes/readme.txt; test -L notes || echo real-dir", 10).output
        assert seen.split("\n")[:3] == ["step config", "step notes", "real-dir"], seen
    finally:
        env.close()
