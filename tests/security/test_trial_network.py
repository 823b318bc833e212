"""One network namespace per trial: its sandboxes (agent commands, shells, verifier) share it, no two
trials do, it holds only a loopback, and the sandbox can change nothing in it (docs/security.md)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, bwrap_available
from hrbench.envs.local.confine import launcher
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = pytest.mark.skipif(not bwrap_available() or os.geteuid() != 0 or launcher() is None,
                                reason="a trial's own network namespace needs root and the compiled launcher")


_TASK = {
    "task.toml": 'version = "1.0"\n[task]\nname = "netns"\ndescription = "one stage"\n[metadata.hrbench]\n'
                 'family = "bench"\nstructure = "shallow"\n[environment]\nworkdir = "/app"\n[[steps]]\nname = "only"\n',
    "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n",
    "environment/files/seed.txt": "41\n",
    "steps/only/instruction.md": "Nothing.\n",
    "steps/only/solution/solve.sh": "#!/bin/bash\n# hrbench:key-begin\ntrue\n# hrbench:key-end\n",
    "steps/only/tests/test.sh": "#!/bin/bash\necho verifier-net=$(readlink /proc/self/ns/net)\n"
                                "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n",
}


def _task(root: Path):
    for rel, text in _TASK.items():
        (root / "netns" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "netns" / rel).write_text(text)
    return load_task(root / "netns")


def test_a_trials_sandboxes_share_one_network_namespace_and_no_two_trials_do(tmp_path: Path):
    backend = LocalBackend(tmp_path / "cache")
    task = _task(tmp_path)
    first, second = backend.start(task, 0), backend.start(task, 0)
    try:
        probe = "readlink /proc/self/ns/net"
        ns = [first.exec(probe, 10).output.strip(), first.exec(probe, 10).output.strip(),
              second.exec(probe, 10).output.strip()]
        assert ns[0] == ns[1] != ns[2] and os.readlink("/proc/self/ns/net") not in ns, ns
        shell = first.open_shell()
        shell.send(probe, 10)
        assert ns[0] in shell.read().data.decode()  # a persistent shell joins it too
        verified = first.verify(task.stages[0])
        assert f"verifier-net={ns[0]}" in verified.output, verified.output  # and the verifier
        inside = first.exec(
            "ls /proc/self/fd | wc -l; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
            "(exec 3<>/dev/tcp/127.0.0.1/9) 2>&1 | head -1; (exec 3<>/dev/tcp/1.1.1.1/53) 2>&1 | head -1; "
            "echo 1 > /proc/sys/net/ipv4/ip_forward 2>/dev/null || echo sysctl-refused; "
            "unshare -rn true 2>/dev/null || echo userns-refused", 10).output
        lines = inside.splitlines()
        assert lines[0] == "4", inside  # 0, 1, 2 and ls's own: the namespace's fd did not reach the sandbox
        assert lines[1] == "lo" and "refused" in lines[2] and "unreachable" in lines[3], inside
        assert "sysctl-refused" in inside and "userns-refused" in inside, inside
    finally:
        first.close()
        second.close()


def test_the_namespaces_made_ahead_are_entered_by_no_thread_of_the_harness(tmp_path: Path):
    from hrbench.envs.local import confine

    env = LocalBackend(tmp_path / "cache").start(_task(tmp_path), 0)
    try:
        trial_ns = env.exec("readlink /proc/self/ns/net", 10).output.strip()
        ready = confine._netns_ready[os.getpid()]
        deadline = time.monotonic() + 10
        while not ready.full() and time.monotonic() < deadline:  # the maker restocks in the background
            time.sleep(0.01)
        assert ready.full()
        spares = {os.readlink(f"/proc/self/fd/{fd}") for fd in list(ready.queue)}
        host = os.readlink("/proc/self/ns/net")
        threads = {os.readlink(f"/proc/self/task/{tid}/ns/net") for tid in os.listdir("/proc/self/task")}
        assert threads == {host}, threads  # the maker left each namespace it made
        assert len(spares) == confine._NETNS_SPARES and host not in spares and trial_ns not in spares, spares
    finally:
        env.close()


@pytest.fixture
def fresh_maker():
    """This process as if no namespace had been made ahead yet."""
    from hrbench.envs.local import confine

    confine._netns_ready.pop(os.getpid(), None)  # its maker stays blocked on its own full queue
    yield confine


def test_a_namespace_that_could_not_be_made_costs_only_its_own_trial(fresh_maker, monkeypatch):
    libc, calls, earlier = fresh_maker._libc(), [], set(threading.enumerate())  # an old maker may still be making
    real = libc.unshare

    def once_refused(flags):
        if threading.current_thread() in earlier:
            return real(flags)
        calls.append(flags)
        return -1 if len(calls) == 1 else real(flags)

    monkeypatch.setattr(libc, "unshare", once_refused)
    got = [fresh_maker.new_network_namespace() for _ in range(3)]
    try:
        assert got[0] is None and all(isinstance(fd, int) and fd >= 0 for fd in got[1:]), got
        assert len({os.readlink(f"/proc/self/fd/{fd}") for fd in got[1:]}) == 2
    finally:
        for fd in got[1:]:
            if fd is not None:
                os.close(fd)


def test_a_maker_that_could_not_start_leaves_the_next_trial_its_namespace(fresh_maker, monkeypatch):
    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    assert fresh_maker.new_network_namespace() is None and os.getpid() not in fresh_maker._netns_ready
    monkeypatch.undo()
    fd = fresh_maker.new_network_namespace()
    assert isinstance(fd, int) and fd >= 0
    os.close(fd)
