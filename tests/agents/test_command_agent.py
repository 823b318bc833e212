"""Protects the `command` agent: an external program speaking JSON lines drives the same
harness (persistent shell, parse errors, usage), and a dying program is a recorded harness_error."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from hrbench.agents.base import Observation, TrialContext
from hrbench.agents.command import CommandAgent, CommandAgentError
from hrbench.agents.specs import CommandAgentSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from tests.agents.helpers import FAST, spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "command_agent" / "list_then_finish.py"
PYTHON = "/usr/bin/python3"  # inside the agent's sandbox only /usr and /etc are there


@pytest.fixture
def program_dir():
    """A directory the sandbox uid can read (pytest's tmp_path sits under a 0700 directory)."""
    folder = Path(tempfile.mkdtemp(prefix="hrbench-agent-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _program(folder: Path, body: str) -> list[str]:
    path = folder / "agent.py"
    path.write_text("import json, sys\n" + body)
    return [PYTHON, str(path)]


def test_example_command_agent_runs_a_natural_rollout(tiny_task, backend, tmp_path):
    agent = CommandAgent(CommandAgentSpec(id="lister", kind="command", argv=[PYTHON, str(EXAMPLE)]))
    record = run_natural_trial(spec("natural"), tiny_task, agent, backend, CONDITIONS["baseline"], FAST, 0,
                               trajectory_dir=tmp_path / "t")
    assert record.exit_reason == "failed" and record.stopped_stage == "make"  # it looks, solves nothing
    assert record.turns == 2 and record.tokens_out == 20
    traj = read_trajectory(tmp_path / record.trajectory_path)
    first = next(s for s in traj["steps"] if s["source"] == "agent")
    assert "seed.txt" in first["observation"]["results"][0]["content"]  # ls ran in the persistent shell


def test_command_agent_sees_the_observation_schema_and_parse_errors(tiny_task, backend, tmp_path, program_dir):
    logs = program_dir / "logs"
    logs.mkdir(mode=0o777)
    os.chmod(logs, 0o777)
    log = logs / "seen.jsonl"
    argv = _program(program_dir, f"""
for line in sys.stdin:
    msg = json.loads(line)
    open({str(log)!r}, "a").write(line)
    if msg["type"] != "observation":
        continue
    if msg["turn"] == 1:
        print("this is not json", flush=True)
    elif msg["turn"] == 2:
        print(json.dumps({{"commands": [{{"keystrokes": "cd /tmp; echo $(( $(cat /app/seed.txt) + 1 )) > /app/a.txt\\n"}}]}}), flush=True)
    else:
        print(json.dumps({{"commands": [{{"keystrokes": "pwd\\n"}}], "task_complete": True}}), flush=True)
""")
    agent = CommandAgent(CommandAgentSpec(id="p", kind="command", argv=argv, writable=[str(logs)]))
    record = run_checkpoint_trial(spec("checkpoint", stage="make"), tiny_task, agent, backend,
                                  CheckpointProtocol(budget=FAST), 0, trajectory_dir=tmp_path / "t")
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [m["type"] for m in seen] == ["begin_trial", "observation", "observation", "observation", "end_trial"]
    third = seen[3]
    assert set(third) >= {"task", "stage", "stage_index", "n_stages", "turn", "turn_cap", "messages"}
    assert "Previous response had parsing errors" in seen[2]["messages"][-1]["content"]
    assert record.passed and record.parse_errors == 1
    traj = read_trajectory(tmp_path / record.trajectory_path)
    assert "/tmp" in [s for s in traj["steps"] if s["source"] == "agent"][-1]["observation"]["results"][0]["content"]


def test_a_dying_command_agent_is_a_harness_error(tiny_task, backend, tmp_path, program_dir):
    argv = _program(program_dir, "sys.stdin.readline(); sys.stderr.write('boom: out of credits\\n'); sys.exit(3)\n")
    agent = CommandAgent(CommandAgentSpec(id="p", kind="command", argv=argv))
    record = run_checkpoint_trial(spec("checkpoint", stage="make"), tiny_task, agent, backend,
                                  CheckpointProtocol(budget=FAST), 0, trajectory_dir=tmp_path / "t")
    assert record.exit_reason == "harness_error" and "exited (code 3)" in record.error
    assert "boom: out of credits" in record.error


def test_a_command_agent_gone_before_the_harness_writes_is_named_by_its_exit_code(tiny_task, program_dir):
    """A program that exited before the harness's next write shows first as a closed input (EPIPE): the error
    still gives its exit code and its last stderr."""
    argv = _program(program_dir, "sys.stdin.readline(); sys.stderr.write('boom: no key\\n'); sys.exit(3)\n")
    agent = CommandAgent(CommandAgentSpec(id="p", kind="command", argv=argv))
    agent.begin_trial(TrialContext(trial_key="k", seed=0, task=tiny_task, kind="checkpoint"))
    try:
        agent.proc.wait(timeout=30)  # gone: the next write meets a closed pipe
        with pytest.raises(CommandAgentError, match=r"exited \(code 3\).*boom: no key"):
            agent.act(Observation(task=tiny_task.name, stage="make", stage_index=0, n_stages=tiny_task.n_stages,
                                  turn=1, turn_cap=2, messages=()))
    finally:
        agent.end_trial()
