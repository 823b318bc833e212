"""Protects the llm agent and the harness around it, driven through the real `openai` client
against a scripted OpenAI-compatible server on loopback (DESIGN §5, issue 4 acceptance)."""

from __future__ import annotations

import json

import pytest

from hrbench.agents.llm import SUMMARY_PROMPT
from hrbench.agents.replies import parse_reply
from hrbench.harness.loop import CONFIRM_PROMPT
from hrbench.protocol import Budget
from hrbench.harness.trajectory import read_trajectory
from tests.agents.helpers import SOLVE, checkpoint, natural, solved
from tests.agents.scripted_server import reply


def _user_texts(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


def _stage_prompt_requests(server, part: int) -> list[list[dict]]:
    return [msgs for msgs in server.chat_requests()
            if msgs[-1]["role"] == "user" and f"Here is part {part} of 3" in msgs[-1]["content"]]


def test_full_history_shows_every_earlier_part_and_passes(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make"), solved("double"), solved("report"), reply(complete=True)]
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path)
    assert record.exit_reason == "passed" and record.passed and record.stages_passed == 3
    first_of_part3 = _stage_prompt_requests(server, 3)[0]
    assert first_of_part3[0]["role"] == "system" and "JSON" in first_of_part3[0]["content"]
    users = _user_texts(first_of_part3)
    assert any("Here is part 1 of 3" in u for u in users) and any("part 2 of 3" in u for u in users)
    assert [m["role"] for m in first_of_part3] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_reset_history_shows_only_the_current_part(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make"), solved("double"), solved("report"), reply(complete=True)]
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path, condition="context_reset")
    assert record.passed
    first_of_part2 = _stage_prompt_requests(server, 2)[0]
    assert [m["role"] for m in first_of_part2] == ["system", "user"]
    assert "Here is part 1" not in json.dumps(first_of_part2)


def test_compact_history_is_a_model_summary_at_the_boundary(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make"), "SUMMARY-ONE: a.txt holds 4", solved("double"), "SUMMARY-TWO: b.txt holds 8",
                     solved("report"), reply(complete=True)]
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path, condition="compaction")
    assert record.passed and record.compactions == 2
    summary_request = server.chat_requests()[1]
    assert SUMMARY_PROMPT in summary_request[-1]["content"]
    assert "Here is part 1 of 3" in summary_request[-1]["content"]  # the transcript is summarized
    assert "response_format" not in server.requests[1]  # the summary is prose
    first_of_part2 = _stage_prompt_requests(server, 2)[0]
    assert [m["role"] for m in first_of_part2] == ["system", "user", "user"]
    assert first_of_part2[1]["content"].startswith("[summary covers=1 parts]\nSUMMARY-ONE")
    first_of_part3 = _stage_prompt_requests(server, 3)[0]
    assert "SUMMARY-TWO" in first_of_part3[1]["content"] and "SUMMARY-ONE" not in json.dumps(first_of_part3)


def test_matched_checkpoint_starts_from_a_recorded_transcript_prefix(server, llm_spec, tiny_task, backend,
                                                                      tmp_path):
    server.script = [solved("make"), solved("double"), solved("report"), reply(complete=True)]
    natural(llm_spec, tiny_task, backend, tmp_path)
    n_before = len(server.requests)
    server.script = [solved("double")]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="double", history="matched")
    assert record.passed, record.error
    first = server.chat_requests()[n_before]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]
    assert "Here is part 1 of 3" in first[1]["content"] and first[2]["content"] == solved("make")
    assert "Part 1 is marked complete. Here is part 2 of 3." in first[-1]["content"]


def test_matched_checkpoint_without_a_recording_is_a_clear_harness_error(server, llm_spec, tiny_task, backend,
                                                                          tmp_path):
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="double", history="matched")
    assert record.exit_reason == "harness_error" and "Run the natural trials first" in record.error
    assert server.requests == []


def test_fresh_checkpoint_sees_only_its_part(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("report"), reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    assert record.passed and record.kind == "checkpoint"
    assert [m["role"] for m in server.chat_requests()[0]] == ["system", "user"]


@pytest.mark.parametrize("n_bytes, truncated", [(10_000, False), (10_001, True)])
def test_output_is_cut_at_exactly_10000_bytes(server, llm_spec, tiny_task, backend, tmp_path, n_bytes, truncated):
    rest = n_bytes - 10_000
    command = ("head -c 5000 /dev/zero | tr '\\0' a; " + (f"head -c {rest} /dev/zero | tr '\\0' b; " if rest else "")
               + "head -c 5000 /dev/zero | tr '\\0' c\n")
    server.script = [reply([command], duration=5)]
    server.default = reply(complete=True)
    checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="make")
    shown = server.chat_requests()[1][-1]["content"]
    if not truncated:
        assert shown == "a" * 5000 + "c" * 5000
    else:
        assert shown == "a" * 5000 + "\n[... output truncated: 1 bytes omitted ...]\n" + "c" * 5000


def test_task_turn_cap_is_stated_for_all_parts_and_enforced(server, llm_spec, tiny_task, backend, tmp_path):
    budget = Budget(max_turns=None, task_max_turns=3, timeout_sec=60, command_timeout_sec=5)
    server.script = [solved("make")]
    server.default = reply(["echo still working\n"])  # never finishes part 2
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path, budget=budget)
    first = server.chat_requests()[0][-1]["content"]
    assert "You have at most 3 turns for the whole task, all 3 parts together." in first
    assert "Parts not finished by turn 3 fail" in first
    part2 = _stage_prompt_requests(server, 2)[0][-1]["content"]
    assert "Turns used so far: 1 of 3" in part2
    assert len(server.requests) == 3  # the harness stops after turn 3: no 4th request
    assert record.exit_reason == "turn_cap" and record.turns == 3
    assert record.stages_passed == 1 and record.stopped_stage == "double"
    assert "turn cap for the whole task (3)" in record.exit_detail


def test_stage_turn_cap_is_stated_and_enforced(server, llm_spec, tiny_task, backend, tmp_path):
    server.default = reply(["true\n"])
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="make",
                           budget=Budget(max_turns=2, timeout_sec=60, command_timeout_sec=5))
    assert "at most 2 turns for this part" in server.chat_requests()[0][-1]["content"]
    assert len(server.requests) == 2 and record.exit_reason == "turn_cap" and record.turns == 2


def test_malformed_reply_is_fed_back_as_a_parse_error_and_counted(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = ["I think I should run ls", '{"analysis": "x", "commands": "ls"}', solved("report"),
                     reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    second, third = server.chat_requests()[1], server.chat_requests()[2]
    assert second[-2] == {"role": "assistant", "content": "I think I should run ls"}
    assert second[-1]["content"].startswith("Previous response had parsing errors:\nERROR: No valid JSON")
    assert "'commands' must be an array" in third[-1]["content"]
    assert record.parse_errors == 2 and record.passed and record.turns == 4


def test_completion_is_confirmed_once_and_only_in_the_last_stage(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make"), solved("double"), solved("report"), reply(complete=True)]
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path)
    asks = [i for i, msgs in enumerate(server.chat_requests()) if CONFIRM_PROMPT in msgs[-1]["content"]]
    assert asks == [3] and len(server.requests) == 4 and record.turns == 4
    assert "Here is part 3 of 3" in server.chat_requests()[2][-1]["content"]


def test_confirmation_declined_continues_the_stage(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [reply(["true\n"], complete=True), reply([SOLVE["report"]]), reply(complete=True),
                     reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    asks = [i for i, msgs in enumerate(server.chat_requests()) if CONFIRM_PROMPT in msgs[-1]["content"]]
    assert asks == [1, 3] and record.passed and record.turns == 4


def test_token_and_cost_totals_match_the_server(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make"), solved("double"), solved("report"), reply(complete=True)]
    record, agent = natural(llm_spec, tiny_task, backend, tmp_path)
    tin = sum(u["prompt_tokens"] for u in server.responses)
    tout = sum(u["completion_tokens"] for u in server.responses)
    assert (record.tokens_in, record.tokens_out) == (tin, tout) and tin > 100
    assert record.cost_usd == pytest.approx(tin * 3.0 / 1e6 + tout * 15.0 / 1e6)
    traj = read_trajectory(tmp_path / record.trajectory_path)
    assert traj["final_metrics"]["total_prompt_tokens"] == tin
    assert sum(s.get("metrics", {}).get("prompt_tokens", 0) for s in traj["steps"]) == tin


def test_a_500_is_retried_then_succeeds(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [{"status": 500}, {"status": 429}, solved("report"), reply(complete=True)]
    record, agent = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    assert record.passed and agent.retries == 2 and len(server.requests) == 4
    assert server.requests[0] == server.requests[2]  # the same request, resent


def test_repeated_failure_is_a_harness_error_with_nothing_lost(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [solved("make")] + [{"status": 503}] * 3
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path)
    assert record.exit_reason == "harness_error" and not record.passed
    assert "failed 3 attempt(s)" in record.error and "InternalServerError" in record.error
    assert record.stages_passed == 1 and record.stopped_stage == "double" and record.turns == 1
    outcomes = json.loads(record.stage_outcomes_json)
    assert [o["exit_reason"] for o in outcomes] == ["passed", "harness_error"]
    assert record.tokens_in == server.responses[0]["prompt_tokens"] and record.cost_usd > 0
    traj = read_trajectory(tmp_path / record.trajectory_path)
    assert traj["extra"]["exit_reason"] == "harness_error"
    assert any(s["source"] == "agent" for s in traj["steps"])


def test_context_length_error_triggers_compaction_then_retry(server, llm_spec, tiny_task, backend, tmp_path):
    too_long = {"status": 400, "error": {"message": "This model's maximum context length is 4096 tokens",
                                         "code": "context_length_exceeded", "type": "invalid_request_error"}}
    server.script = [reply(["true\n"]), too_long, "SUMMARY: nothing yet", solved("report"), reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    assert record.passed and record.compactions == 1
    after = server.chat_requests()[3]
    assert after[1]["content"].startswith("[summary covers=2 parts]\nSUMMARY: nothing yet")
    assert "Here is part 3 of 3" in after[2]["content"]


def test_context_length_error_after_compaction_is_a_clear_harness_error(server, llm_spec, tiny_task, backend,
                                                                         tmp_path):
    too_long = {"status": 400, "error": {"message": "maximum context length exceeded",
                                         "code": "context_length_exceeded"}}
    server.script = [too_long, "SUMMARY", too_long]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    assert record.exit_reason == "harness_error"
    assert "context length exceeded even after compacting the history" in record.error


def test_json_mode_is_requested_and_dropped_when_the_endpoint_refuses(server, llm_spec, tiny_task, backend,
                                                                       tmp_path):
    refuse = {"status": 400, "error": {"message": "response_format is not supported"}}
    server.script = [refuse, solved("report"), reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert "response_format" not in server.requests[1] and record.passed


def test_trajectory_is_atif_and_referenced_from_the_row(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [reply(["ls\n"]), solved("report"), reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="report")
    path = tmp_path / record.trajectory_path
    assert record.trajectory_path.startswith("trajectories/") and path.is_file()
    traj = read_trajectory(path)
    assert traj["schema_version"].startswith("ATIF-v") and traj["session_id"] == record.trial_key
    assert traj["agent"]["model_name"] == "scripted-model"
    agent_steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert len(agent_steps) == record.turns == 3
    assert agent_steps[0]["tool_calls"][0]["arguments"]["keystrokes"] == "ls\n"
    assert "a.txt" in agent_steps[0]["observation"]["results"][0]["content"]
    assert [s["step_id"] for s in traj["steps"]] == list(range(1, len(traj["steps"]) + 1))


@pytest.mark.parametrize("text, error", [
    ("", "empty"), ("[1, 2]", "object"), ('{"commands": [{"duration": 1}]}', "keystrokes"),
    ('{"commands": [], "task_complete": "maybe"}', None), ('{"task_complete": 3}', "true or false"),
    ('```json\n{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 99}]}\n```', None),
])
def test_parse_reply_accepts_terminus_json_and_names_what_is_wrong(text, error):
    action = parse_reply(text)
    if error is None:
        assert action.parse_error is None
        assert all(c.duration <= 60 for c in action.commands)
    else:
        assert error in action.parse_error


def test_per_command_wait_is_the_stated_duration_not_the_cap(server, llm_spec, tiny_task, backend, tmp_path):
    server.script = [reply(["sleep 30; echo late\n"], duration=0.5), reply(["echo now\n"], duration=1),
                     reply(["C-c"], duration=0.5), reply(complete=True)]
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="make")
    second = server.chat_requests()[1][-1]["content"]
    assert "still running" in second
    assert record.wall_s < 15 and record.exit_reason in ("failed", "early_exit")


def test_token_budget_per_part_stops_the_stage(server, llm_spec, tiny_task, backend, tmp_path):
    server.default = reply(["true\n"])
    record, _ = checkpoint(llm_spec, tiny_task, backend, tmp_path, stage="make",
                           budget=Budget(max_turns=5, timeout_sec=60, command_timeout_sec=5, max_tokens=10))
    assert len(server.requests) == 1 and record.exit_reason == "timeout"
    assert record.exit_detail == "token budget for the part (10) spent"


def test_wall_time_budget_per_trial_stops_the_rollout(server, llm_spec, tiny_task, backend, tmp_path):
    server.default = reply(["sleep 1\n"], duration=5)
    record, _ = natural(llm_spec, tiny_task, backend, tmp_path,
                        budget=Budget(max_turns=50, timeout_sec=60, command_timeout_sec=5, task_timeout_sec=2.5))
    assert record.exit_reason == "timeout" and "wall-time limit for the trial" in record.exit_detail
    assert 2.5 <= record.wall_s < 10 and record.turns <= 3


def test_compact_policy_compacts_when_the_context_nears_its_limit(server, llm_spec, tiny_task, backend, tmp_path):
    def responder(body):
        return "SUMMARY-X" if "Transcript:" in body["messages"][-1]["content"] else reply(["true\n"])

    server.responder = responder
    small = llm_spec.model_copy(update={"context_window": 256, "max_output_tokens": 32})
    record, _ = checkpoint(small, tiny_task, backend, tmp_path, stage="report", history="compacted",
                           budget=Budget(max_turns=2, timeout_sec=60, command_timeout_sec=5))
    kinds = ["summary" if "Transcript:" in m[-1]["content"] else "act" for m in server.chat_requests()]
    assert kinds == ["act", "summary", "act"] and record.compactions == 1
    assert server.chat_requests()[2][1]["content"].startswith("[summary covers=2 parts]\nSUMMARY-X")
