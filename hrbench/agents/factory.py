"""Build an agent from its declared spec (one place that knows every kind)."""

from __future__ import annotations

from hrbench.agents.base import Agent
from hrbench.agents.oracle import NopAgent, OracleAgent
from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import (
    AgentSpec, CommandAgentSpec, LLMAgentSpec, NopAgentSpec, OracleAgentSpec, SimAgentSpec,
)


def make_agent(spec: AgentSpec) -> Agent:
    """A fresh agent instance for one trial."""
    if isinstance(spec, SimAgentSpec):
        return SimAgent(spec.sim)
    if isinstance(spec, OracleAgentSpec):
        return OracleAgent()
    if isinstance(spec, NopAgentSpec):
        return NopAgent()
    if isinstance(spec, LLMAgentSpec):
        from hrbench.agents.llm import LLMAgent  # imports the openai SDK

        return LLMAgent(spec)
    if isinstance(spec, CommandAgentSpec):
        from hrbench.agents.command import CommandAgent

        return CommandAgent(spec)
    raise TypeError(f"no agent implementation for kind {getattr(spec, 'kind', spec)!r}")
