"""`hrbench agents check`: ping an agent's endpoint or program before a study spends money on it."""

from __future__ import annotations

from pathlib import Path

from hrbench.agents.specs import CommandAgentSpec, LLMAgentSpec


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
        if isinstance(cause, openai.APIStatusError):  # the server is there: say what it answered
            raise AgentCheckError(f"{spec.base_url} answered {cause.status_code}: {cause.message}") from exc
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
    if action.parse_error:
        raise AgentCheckError(f"{spec.argv} replied with something that is not an action: {action.parse_error}")
    return f"{spec.argv} answered with {len(action.commands)} command(s), task_complete={action.task_complete}"
