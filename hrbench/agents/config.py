"""Agent configuration: the `llm` and `command` agent specs, and `agents/<id>.yaml` files.

A config file holds exactly one agent entry as a study declares it (same schema, same
validation), so a file checked with `hrbench agents check agents/<id>.yaml` can be pasted into
a study's `agents:` list unchanged. Examples for vLLM, ollama and OpenAI: examples/agents/.

This module imports nothing from hrbench (protocol.py imports it for the AgentSpec union).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hrbench.config_files import describe_validation_error, read_yaml_mapping

AGENT_ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Prices(_Frozen):
    """USD per million tokens; cost = tokens_in * input + tokens_out * output (per million)."""

    input_per_mtok: float = Field(0.0, ge=0, description="USD per 1M prompt tokens")
    output_per_mtok: float = Field(0.0, ge=0, description="USD per 1M completion tokens")

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


class LLMAgentSpec(_Frozen):
    """A model behind any OpenAI-compatible chat endpoint (vLLM, ollama, OpenAI, OpenRouter, llama.cpp)."""

    id: str = Field(pattern=AGENT_ID_PATTERN, description="partition key of the agent: lower case, digits, . _ -")
    kind: Literal["llm"]
    model: str = Field(min_length=1, description="model name as the endpoint knows it")
    base_url: str = Field(description="endpoint root, e.g. http://localhost:8000/v1")
    api_key_env: str | None = Field(
        "OPENAI_API_KEY", description="name of the environment variable holding the API key; null = no key"
    )
    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_output_tokens: int = Field(2048, ge=1, description="max tokens per reply")
    timeout_sec: float = Field(120.0, gt=0, description="per request")
    max_retries: int = Field(4, ge=0, le=20, description="retries on 429, 5xx and connection errors")
    backoff_sec: float = Field(1.0, ge=0, description="first retry delay; doubles each retry")
    backoff_max_sec: float = Field(30.0, ge=0)
    context_window: int | None = Field(
        None, ge=256, description="tokens; when set, `compact` history compacts before the prompt nears it"
    )
    compact_at: float = Field(0.8, gt=0, lt=1, description="share of context_window that triggers compaction")
    response_format: Literal["auto", "json_object", "none"] = Field(
        "auto", description="ask for JSON output; 'auto' asks and stops asking if the endpoint refuses"
    )
    send_seed: bool = Field(True, description="pass the per-trial seed to the endpoint")
    prices: Prices = Prices()
    extra_body: dict[str, Any] = Field(default_factory=dict, description="extra request fields for the endpoint")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")


class CommandAgentSpec(_Frozen):
    """An external program speaking JSON lines on stdin/stdout (docs/agents.md, examples/command_agent/)."""

    id: str = Field(pattern=AGENT_ID_PATTERN, description="partition key of the agent: lower case, digits, . _ -")
    kind: Literal["command"]
    argv: list[str] = Field(min_length=1, description="program and arguments, e.g. [python, my_agent.py]")
    cwd: str | None = Field(None, description="working directory of the program")
    env: dict[str, str] = Field(default_factory=dict, description="the program's whole environment (nothing "
                                                                  "else of the harness's is passed)")
    reply_timeout_sec: float = Field(300.0, gt=0, description="longest wait for one reply line")
    files: list[str] = Field(default_factory=list, description="more paths the program may read (bound "
                                                               "read-only into its sandbox)")
    writable: list[str] = Field(default_factory=list, description="paths the program may write (bound "
                                                                  "read-write into its sandbox)")
    network: bool = Field(False, description="let the program reach the network (e.g. a model endpoint)")


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


class AgentCheckError(RuntimeError):
    """The agent's endpoint or program does not answer as it should (message says what to do)."""


def check_agent(spec: LLMAgentSpec | CommandAgentSpec) -> str:
    """Ping an agent: one tiny chat request (llm) or one observation round trip (command)."""
    if isinstance(spec, LLMAgentSpec):
        return _check_llm(spec)
    return _check_command(spec)


def _check_llm(spec: LLMAgentSpec) -> str:
    import openai

    from hrbench.agents.llm import LLMAgent, LLMRequestError

    try:
        agent = LLMAgent(spec.model_copy(update={"max_retries": min(spec.max_retries, 1), "backoff_sec": 0.5}))
        text = agent.ping()
    except LLMRequestError as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, openai.AuthenticationError):
            raise AgentCheckError(f"{spec.base_url} refused the API key (401): check {spec.api_key_env}") from exc
        if isinstance(cause, openai.NotFoundError):
            raise AgentCheckError(f"{spec.base_url} does not serve model {spec.model!r} (404): check `model` "
                                  "and `base_url` (it usually ends in /v1)") from exc
        if "APIConnectionError" in str(exc) or "APITimeoutError" in str(exc):
            raise AgentCheckError(f"cannot reach {spec.base_url}: {exc}. Is the server running, and is "
                                  "base_url right (it usually ends in /v1)?") from exc
        raise AgentCheckError(str(exc)) from exc
    except Exception as exc:  # anything else the SDK raises is reported, not a traceback
        raise AgentCheckError(f"{spec.base_url}: {type(exc).__name__}: {exc}") from exc
    u = agent.usage()
    return (f"{spec.base_url} answered as {spec.model!r}: {text.strip()[:80]!r} "
            f"({u.tokens_in} tokens in, {u.tokens_out} out, ${u.cost_usd:.6f})")


def _check_command(spec: CommandAgentSpec) -> str:
    import shutil

    from hrbench.agents.base import Message, Observation
    from hrbench.agents.command import CommandAgent

    program = spec.argv[0]
    if shutil.which(program) is None and not Path(spec.cwd or ".", program).is_file():
        raise AgentCheckError(f"program {program!r} (argv[0]) is not on PATH and not a file")
    agent = CommandAgent(spec.model_copy(update={"reply_timeout_sec": min(spec.reply_timeout_sec, 30.0)}))

    class _Ctx:  # begin_trial needs only these fields
        trial_key, seed, kind = "agents-check", 0, "checkpoint"
        task = type("T", (), {"name": "agents-check"})()

    try:
        agent.begin_trial(_Ctx())  # type: ignore[arg-type]
        action = agent.act(Observation(task="agents-check", stage="check", stage_index=0, n_stages=1, turn=1,
                                       turn_cap=1, messages=(Message(role="user", content="Here is part 1 of 1.\n\n"
                                                                     "Run `true`.", stage_index=0),)))
    except Exception as exc:
        raise AgentCheckError(f"{spec.argv}: {exc}") from exc
    finally:
        agent.end_trial()
    if getattr(action, "parse_error", None):
        raise AgentCheckError(f"{spec.argv} replied with something that is not an action: {action.parse_error}")
    return f"{spec.argv} answered with {len(action.commands)} command(s), task_complete={action.task_complete}"
