"""Protects the `command` agent's own sandbox: its program sees only the variables its config names,
cannot read the task registry, solutions, tests, journals or host secrets, reaches no network unless
its config says so, runs as the sandbox uid when hrbench is root, and nothing it starts outlives its
trial."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hrbench.agents.base import Message, Observation, TrialContext
from hrbench.agents.command import CommandAgent, CommandAgentError
from hrbench.agents.specs import CommandAgentSpec
from hrbench.envs.local.confine import SANDBOX_UID, privileged
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

FAKE_KEY = "sk-hrbench-fake-command-agent"
# The program answers every observation with what it could find, in `analysis`.
PROBE = """import json, os, socket, subprocess, sys
def readable(path):
    try:
        with open(path, 'rb') as f:
            return f.read(64).decode('utf-8', 'replace')
    except OSError as e:
        return 'DENIED ' + type(e).__name__
for line in sys.stdin:
    msg = json.loads(line)
    if msg['type'] != 'observation':
        continue
    port = int(os.environ.get('PROBE_PORT', '0'))
    try:
        socket.create_connection(('127.0.0.1', port), timeout=2).close(); net = 'CONNECTED'
    except OSError as e:
        net = 'BLOCKED'
    subprocess.Popen(['sleep', '1000', os.environ['NONCE']], start_new_session=True)
    found = {'env': sorted(os.environ), 'pid1': readable('/proc/1/environ'), 'uid': os.getuid(), 'net': net,
             'files': {p: readable(p) for p in sys.argv[1:]}}
    print(json.dumps({'analysis': json.dumps(found), 'commands': [], 'task_complete': True}), flush=True)
"""


@pytest.fixture
def program(tmp_path: Path):
    folder = Path(tempfile.mkdtemp(prefix="hrbench-probe-"))
    os.chmod(folder, 0o755)
    (folder / "probe.py").write_text(PROBE)
    yield folder / "probe.py"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def accept() -> None:
        try:
            while True:
                server.accept()[0].close()
        except OSError:  # closed at teardown
            pass

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _ask(spec: CommandAgentSpec) -> dict:
    agent = CommandAgent(spec)
    task = load_task(TINY_TASK)
    agent.begin_trial(TrialContext(trial_key="k", seed=1, task=task, kind="checkpoint"))
    try:
        action = agent.act(Observation(task=task.name, stage="make", stage_index=0, n_stages=3, turn=1, turn_cap=3,
                                       messages=(Message(role="user", content="go", stage_index=0),)))
    finally:
        agent.end_trial()
    return json.loads(action.analysis)


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def test_the_program_sees_only_its_declared_variables_and_files(program, tmp_path, monkeypatch, listener):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    journal = tmp_path / "out" / "journal.jsonl"
    journal.parent.mkdir()
    journal.write_text('{"trial": 1}\n')
    nonce = secrets.token_hex(6)
    secrets_to_try = [str(TINY_TASK / "steps" / "make" / "solution" / "solve.sh"),
                      str(TINY_TASK / "steps" / "make" / "tests" / "test.sh"), str(journal), "/etc/shadow",
                      str(Path(__file__).resolve())]
    found = _ask(CommandAgentSpec(id="probe", kind="command", argv=["/usr/bin/python3", str(program), *secrets_to_try],
                                  env={"NONCE": nonce, "PROBE_PORT": str(listener)}))
    print(json.dumps(found, indent=1))
    assert set(found["env"]) <= {"NONCE", "PROBE_PORT", "PATH", "HOME", "LANG", "PWD", "SHLVL", "_"}
    assert FAKE_KEY not in json.dumps(found) and "OPENAI" not in found["pid1"]
    assert all(text.startswith("DENIED") for text in found["files"].values()), found["files"]
    assert found["net"] == "BLOCKED"
    if privileged():
        assert found["uid"] == SANDBOX_UID
    time.sleep(0.2)
    assert not _alive_with(nonce), "a process the program started outlived its trial"


def test_network_is_opt_in(program, listener):
    found = _ask(CommandAgentSpec(id="probe", kind="command", argv=["/usr/bin/python3", str(program)],
                                  env={"NONCE": secrets.token_hex(6), "PROBE_PORT": str(listener)}, network=True))
    assert found["net"] == "CONNECTED"


def test_a_declared_read_only_file_is_readable_and_nothing_else_beside_it(program, tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="hrbench-shared-"))
    try:
        os.chmod(shared, 0o755)
        (shared / "allowed.txt").write_text("ALLOWED")
        (shared / "other.txt").write_text("OTHER")
        found = _ask(CommandAgentSpec(id="probe", kind="command",
                                      argv=["/usr/bin/python3", str(program), str(shared / "allowed.txt"),
                                            str(shared / "other.txt")],
                                      env={"NONCE": secrets.token_hex(6)}, files=[str(shared / "allowed.txt")]))
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    files = found["files"]
    assert files[str(shared / "allowed.txt")] == "ALLOWED" and files[str(shared / "other.txt")].startswith("DENIED")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's sandbox uid differs from the caller's")
def test_a_program_the_sandbox_uid_cannot_reach_is_refused_with_the_reason(tmp_path):
    hidden = tmp_path / "agent.py"  # pytest's tmp_path sits under a 0700 directory
    hidden.write_text("print('never')")
    with pytest.raises(CommandAgentError, match="not searchable by others"):
        _ask(CommandAgentSpec(id="p", kind="command", argv=["/usr/bin/python3", str(hidden)]))


def test_a_program_whose_directory_holds_the_task_package_is_refused(tmp_path):
    registry = Path(tempfile.mkdtemp(prefix="hrbench-registry-"))
    try:
        os.chmod(registry, 0o755)
        shutil.copytree(TINY_TASK, registry / "tiny-chain")
        (registry / "agent.py").write_text("print('never')")
        agent = CommandAgent(CommandAgentSpec(id="p", kind="command", argv=["/usr/bin/python3", str(registry / "agent.py")]))
        with pytest.raises(CommandAgentError, match="would show the program the task package"):
            agent.begin_trial(TrialContext(trial_key="k", seed=1, task=load_task(registry / "tiny-chain"),
                                           kind="checkpoint"))
        agent.end_trial()
    finally:
        shutil.rmtree(registry, ignore_errors=True)
