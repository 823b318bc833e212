"""Fixtures for the real-agent tests: a scripted OpenAI-compatible server and llm agent specs."""

from __future__ import annotations


import pytest

from hrbench.agents.specs import LLMAgentSpec, Prices
from hrbench.envs.local import LocalBackend
from hrbench.tasks.loader import load_task
from tests.agents.scripted_server import ScriptedServer
from tests.conftest import TINY_TASK


@pytest.fixture
def server():
    srv = ScriptedServer()
    yield srv
    srv.close()


@pytest.fixture
def llm_spec(server) -> LLMAgentSpec:
    return LLMAgentSpec(id="scripted", kind="llm", model="scripted-model", base_url=server.base_url,
                        api_key_env=None, max_retries=2, backoff_sec=0.01, timeout_sec=10,
                        prices=Prices(input_per_mtok=3.0, output_per_mtok=15.0))


@pytest.fixture(scope="session")
def tiny_task():
    return load_task(TINY_TASK)


@pytest.fixture(scope="session")
def backend(tmp_path_factory) -> LocalBackend:
    return LocalBackend(tmp_path_factory.mktemp("hrbench-agents") / "cache")
