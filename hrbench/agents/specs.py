"""Agent specs: how a study (or `agents/<id>.yaml`) declares an agent, one model per kind.

The specs are plain data (pydantic, frozen); `agents/factory.py` turns one into an agent and
`protocol.py` puts the `AgentSpec` union into the study file. This module imports nothing from
hrbench, so anything may import it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


AGENT_ID = Field(pattern=AGENT_ID_PATTERN, description="partition key of the agent: lower case, digits, . _ -")


class SimParams(_Frozen):
    """Declared behaviour of a simulated agent (DESIGN §5); its truth is computable."""

    skill: float = Field(0.9, gt=0, le=1, description="base per-stage success probability")
    skill_spread: float = Field(
        0.0, ge=0, lt=1, description="per-task skill lowered by spread*u_task, u_task in [0,1) from the task name"
    )
    context_rot: float = Field(0.0, ge=0, description="lambda: success x exp(-lambda*h), h = visible stage boundaries")
    defect_rate: float = Field(0.0, ge=0, le=1, description="chance a passed stage leaves a latent defect")
    defect_penalty: float = Field(0.0, ge=0, description="kappa: success x exp(-kappa*defects present)")
    compaction_retention: float = Field(
        0.3, ge=0, le=1, description="share of earlier boundaries still felt after compaction"
    )
    steps_per_turn: int | None = Field(
        None, ge=1, description="batching ability: at most this many `# hrbench:step` steps of the solution per "
                                "turn, never past a `reads-output` step; null = the whole script in one turn"
    )


class OracleAgentSpec(_Frozen):
    id: str = AGENT_ID
    kind: Literal["oracle"]


class NopAgentSpec(_Frozen):
    id: str = AGENT_ID
    kind: Literal["nop"]


class SimAgentSpec(_Frozen):
    id: str = AGENT_ID
    kind: Literal["sim"]
    sim: SimParams = SimParams()


AgentSpec = Annotated[
    Union[OracleAgentSpec, NopAgentSpec, SimAgentSpec, LLMAgentSpec, CommandAgentSpec], Field(discriminator="kind")
]
