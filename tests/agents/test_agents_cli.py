"""Protects `hrbench agents check`: it validates a config with file/field errors and pings the
endpoint, with a clear message and exit 1 on any problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrbench.agents.config import AgentConfigError, load_agent_config
from hrbench.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
runner = CliRunner()


def _invoke(*args: str):
    """Run the CLI; return (exit code, output with rich's line wrapping undone)."""
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())


def _config(tmp_path: Path, text: str, name: str = "scripted.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_check_passes_against_a_live_endpoint(server, tmp_path):
    server.script = ['{"ok": true}']
    path = _config(tmp_path, f"id: scripted\nkind: llm\nmodel: m\nbase_url: {server.base_url}\napi_key_env: null\n")
    code, output = _invoke("agents", "check", str(path))
    assert code == 0, output
    assert "valid llm agent 'scripted'" in output and "answered" in output
    assert server.requests[0]["model"] == "m"


def test_check_names_the_bad_fields(tmp_path):
    path = _config(tmp_path, "id: Bad Id\nkind: llm\nmodel: m\nbase_url: localhost:8000\nmax_retries: -1\n")
    code, output = _invoke("agents", "check", str(path))
    assert code == 1
    for field in ("id:", "base_url:", "max_retries:", path.name):
        assert field in output


def test_check_reports_an_unreachable_endpoint_clearly(tmp_path):
    path = _config(tmp_path, "id: scripted\nkind: llm\nmodel: m\nbase_url: http://127.0.0.1:9/v1\n"
                             "api_key_env: null\ntimeout_sec: 2\n")
    code, output = _invoke("agents", "check", str(path))
    assert code == 1 and "cannot reach http://127.0.0.1:9/v1" in output


def test_check_reports_a_missing_api_key(tmp_path, monkeypatch):
    monkeypatch.delenv("HRBENCH_TEST_KEY", raising=False)
    path = _config(tmp_path, "id: scripted\nkind: llm\nmodel: m\nbase_url: http://127.0.0.1:9/v1\n"
                             "api_key_env: HRBENCH_TEST_KEY\n")
    code, output = _invoke("agents", "check", str(path))
    assert code == 1 and "HRBENCH_TEST_KEY is empty" in output


def test_check_pings_a_command_agent(monkeypatch):
    monkeypatch.chdir(EXAMPLES.parents[1])  # the example's argv is relative to the repository root
    code, output = _invoke("agents", "check", str(EXAMPLES / "list-then-finish.yaml"))
    assert code == 0, output
    assert "answered with 1 command(s)" in output


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_configs_are_valid(name):
    spec = load_agent_config(EXAMPLES / name)
    assert spec.id == Path(name).stem


def test_unknown_kind_is_named(tmp_path):
    with pytest.raises(AgentConfigError, match="kind: expected one of"):
        load_agent_config(_config(tmp_path, "id: x\nkind: gpt\n"))


def test_check_says_what_a_live_endpoint_answered(server, tmp_path):
    # A server that answers 500 is reachable: the message says what it answered, not "cannot reach".
    server.script = [{"status": 500}, {"status": 500}, {"status": 500}]
    path = _config(tmp_path, f"id: scripted\nkind: llm\nmodel: m\nbase_url: {server.base_url}\napi_key_env: null\n"
                             "max_retries: 0\n")
    code, output = _invoke("agents", "check", str(path))
    assert code == 1 and f"{server.base_url} answered 500" in output and "cannot reach" not in output
