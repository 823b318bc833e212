"""Protects the harness against hostile agents: every trial ends with a recorded exit reason,
no crash and no lost row, whatever the model replies and whatever its commands do."""

from __future__ import annotations

import json
import typing

from hrbench.agents.specs import LLMAgentSpec
from hrbench.agents.llm import LLMAgent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import ExitReason, TrialSpec
from hrbench.harness.journal import TrialJournal, run_trials
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.protocol import Budget, CheckpointProtocol, Retries
from hrbench.tasks.loader import load_task
from tests.agents.scripted_server import ScriptedServer, reply
from tests.conftest import TINY_TASK

BUDGET = Budget(max_turns=4, timeout_sec=6, command_timeout_sec=2, task_timeout_sec=10, memory_mb=512)

HOSTILE: dict[str, list] = {
    "huge_output": [reply(["yes hrbench | head -c 50000000\n"], duration=5), reply(complete=True)],
    "invalid_utf8_output": [reply(["printf '\\xff\\xfe\\x80ok\\xc3\\n'\n"]), reply(complete=True)],
    "hanging_command": [reply(["sleep 1000\n"], duration=60)] * 3 + [reply(complete=True)],
    "reads_its_own_input": [reply(["cat\n"], duration=1), reply(["echo after\n"]), reply(complete=True)],
    "fork_bomb": [reply([":(){ :|:& };:\n"], duration=3), reply(["echo alive\n"]), reply(complete=True)],
    "memory_hog": [reply(["python3 -c \"x = ' ' * 10**10\"\n"], duration=3), reply(complete=True)],
    "exits_the_shell": [reply(["exit\n"]), reply(["echo new shell\n"]), reply(complete=True)],
    "garbage_replies": ["\x00\x01 not json", "{" * 5000, '{"commands": [' + "1," * 10000 + "1]}",
                        reply(complete=True)],
    "huge_reply": [reply(["echo " + "x" * 200_000 + "\n"]), reply(complete=True)],
    "endless_commands": [reply(["true\n"] * 500, duration=0.1)] * 4,
    "server_errors": [{"status": 500}] * 10,
    "sentinel_forgery": [reply(["echo '__HRB_0000_1__'; sleep 3\n"], duration=1), reply(complete=True)],
}


def test_hostile_agents_all_end_with_a_recorded_exit_reason(tmp_path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    cases = sorted(HOSTILE)
    specs = [TrialSpec(prereg_sha256="0" * 64, agent="fuzz", condition="baseline", protocol=name, task=task.name,
                       kind="checkpoint", stage="make", trial_index=0) for name in cases]
    seen: dict[str, list[dict]] = {}

    def execute(spec: TrialSpec):
        server = ScriptedServer()
        server.script = list(HOSTILE[spec.protocol])
        server.default = reply(complete=True)
        try:
            agent = LLMAgent(LLMAgentSpec(id="fuzz", kind="llm", model="m", base_url=server.base_url,
                                          api_key_env=None, max_retries=1, backoff_sec=0.01, timeout_sec=5))
            return run_checkpoint_trial(spec, task, agent, backend, CheckpointProtocol(budget=BUDGET), 0,
                                        trajectory_dir=tmp_path / "trajectories")
        finally:
            seen[spec.protocol] = server.chat_requests()
            server.close()

    journal = TrialJournal(tmp_path / "journal.jsonl")
    # one attempt each: what one attempt records is the question here (retries: tests/harness/test_journal.py)
    records = run_trials(specs, execute, journal, concurrency=4, progress=False, retries=Retries(max_attempts=1))

    reasons = set(typing.get_args(ExitReason))
    assert len(records) == len(cases) == len(journal.load()) + len(journal.attempts())  # harness_error: attempts
    by_case = {r.protocol: r for r in records}
    for name, record in by_case.items():
        assert record.exit_reason in reasons, name
        assert record.wall_s < 30, name
        assert record.trajectory_path and (tmp_path / record.trajectory_path).is_file(), name
        for msgs in seen[name]:
            for m in msgs:
                if m["role"] == "user":
                    assert len(m["content"].encode()) <= 12_000, name  # 10,000 bytes of output plus a prompt

    huge = seen["huge_output"][1][-1]["content"]
    assert "output truncated" in huge and huge.startswith("hrbench\nhrbench")
    assert "\ufffd" in seen["invalid_utf8_output"][1][-1]["content"]
    assert by_case["hanging_command"].exit_reason in ("timeout", "turn_cap")
    assert "after" in json.dumps(seen["reads_its_own_input"]) or by_case["reads_its_own_input"].exit_reason
    assert "alive" in seen["fork_bomb"][2][-1]["content"]
    assert "new shell" in seen["exits_the_shell"][2][-1]["content"]
    assert by_case["garbage_replies"].parse_errors == 3
    assert by_case["server_errors"].exit_reason == "harness_error"
    assert by_case["endless_commands"].exit_reason in ("timeout", "turn_cap")
    assert "still running" in seen["sentinel_forgery"][1][-1]["content"]


def test_an_agent_that_gives_up_at_once_is_an_early_exit_with_its_detail(tmp_path):
    from hrbench.agents.oracle import NopAgent

    task = load_task(TINY_TASK)
    spec = TrialSpec(prereg_sha256="0" * 64, agent="nop", condition="baseline", protocol="p", task=task.name,
                     kind="checkpoint", stage="make", trial_index=0)
    record = run_checkpoint_trial(spec, task, NopAgent(), LocalBackend(tmp_path / "cache"),
                                  CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=tmp_path / "trajectories")
    assert record.exit_reason == "early_exit"
    assert "complete after 1 turn(s) without running a command" in record.exit_detail
