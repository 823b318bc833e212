"""Agent config files: `agents/<id>.yaml`, one agent entry as a study declares it.

A config file holds exactly one agent entry (same schema, same validation as in a study), so a
file checked with `hrbench agents check agents/<id>.yaml` can be pasted into a study's `agents:`
list unchanged. Examples for vLLM, ollama and OpenAI: examples/agents/. The specs themselves
live in `agents/specs.py`; pinging an agent is `agents/check.py`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from hrbench.agents.specs import CommandAgentSpec, LLMAgentSpec
from hrbench.config_files import describe_validation_error, read_yaml_mapping


class AgentConfigError(ValueError):
    """An agent config file that cannot be used: names the file, the field and what to do."""


def load_agent_config(path: str | Path) -> LLMAgentSpec | CommandAgentSpec:
    """Read and validate `agents/<id>.yaml`; errors name the file and field."""
    path = Path(path)
    raw = read_yaml_mapping(path, AgentConfigError, "agent config file", "a mapping with at least `id` and `kind`")
    kinds = {"llm": LLMAgentSpec, "command": CommandAgentSpec}
    kind = raw.get("kind")
    if kind not in kinds:
        raise AgentConfigError(f"{path}: kind: expected one of {sorted(kinds)}, got {kind!r}")
    try:
        spec = kinds[kind].model_validate(raw)
    except ValidationError as exc:
        raise AgentConfigError(f"{path}: invalid {kind} agent config\n{describe_validation_error(exc)}"
                               "\nSee docs/agents.md.") from exc
    return spec
