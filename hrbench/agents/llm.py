"""The `llm` agent: any OpenAI-compatible chat endpoint through the `openai` SDK.

Replies are terminus-style JSON, parsed by `agents/replies.py`; a reply that does not parse
comes back to the harness as an action with `parse_error` set. Transient endpoint errors (429, 5xx,
connection errors, timeouts) are retried with exponential backoff; a context-length error is
raised as `ContextLengthExceeded` so the harness can compact the history and try again. Tokens
come from the endpoint's `usage`; cost from the configured price table.
"""

from __future__ import annotations

import os
import random
import time

from hrbench.agents.base import Action, Agent, ContextLengthExceeded, Message, Observation, TrialContext, Usage
from hrbench.agents.replies import parse_reply
from hrbench.agents.specs import LLMAgentSpec

SYSTEM_PROMPT = """You are an AI assistant tasked with solving command-line tasks in a Linux environment. \
You will be given a task description and the output from previously executed commands. Your goal is to \
solve the task by providing batches of shell commands. Tasks may come in several parts, delivered one at a time.

Format your response as JSON with the following structure:

{
  "analysis": "Analyze the current state based on the terminal output provided. What do you see? What has been accomplished? What still needs to be done?",
  "plan": "Describe your plan for the next steps. What commands will you run and why?",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "cd project\\n", "duration": 0.1}
  ],
  "task_complete": false
}

Required fields:
- "analysis": your analysis of the current situation
- "plan": your plan for the next steps
- "commands": an array of command objects to execute

Optional fields:
- "task_complete": true when the current part is complete (default false)

Command object structure:
- "keystrokes": the text typed into one persistent bash shell, ending with a newline ("\\n") to run it
- "duration": seconds to wait for the command before its output is read (default 1.0, at most 60); a \
command still running after that keeps running and its output appears in a later turn. "C-c" as the whole \
keystrokes interrupts running commands.

Respond with the JSON object only."""

SUMMARY_PROMPT = """You are about to hand this task over to a fresh copy of yourself that will not see the \
conversation so far. Write a summary it can continue from. Cover: 1. the task and the parts delivered so far; \
2. what was done, command by command where it matters; 3. what was learned about the environment (files, \
versions, settings, errors and how they were fixed); 4. the current state and what remains to be done. \
Answer in plain prose, not JSON."""

_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "maximum context", "context window",
                    "too many tokens", "prompt is too long", "exceeds the context", "n_ctx")


class LLMRequestError(RuntimeError):
    """The endpoint failed every attempt (after retries): recorded as `harness_error`."""


def is_context_error(exc: Exception) -> bool:
    text = f"{getattr(exc, 'code', '') or ''} {exc}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


class LLMAgent(Agent):
    """A chat model driven turn by turn; the harness decides what history it sees."""

    uses_shell = True  # types into a persistent shell
    ask_confirmation = True  # terminus-2 asks once, in the last stage only
    writes_summaries = True  # compaction summaries come from this model

    def __init__(self, spec: LLMAgentSpec, sleep=time.sleep):
        import openai  # the real-agent dependency is imported only when an llm agent is built

        self.spec = spec
        self.name = f"llm:{spec.id}"
        self.model_name = spec.model
        self._openai = openai
        self._sleep = sleep
        key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""
        if spec.api_key_env and not key:
            raise LLMRequestError(
                f"agent {spec.id!r}: environment variable {spec.api_key_env} is empty; export the API key "
                "there, or set api_key_env: null for an endpoint without keys")
        self.client = openai.OpenAI(base_url=spec.base_url, api_key=key or "no-key", timeout=spec.timeout_sec,
                                    max_retries=0)
        self._json_mode = spec.response_format != "none"
        self._usage = Usage()
        self._last_prompt_tokens = 0
        self._seed: int | None = None
        self.requests = 0
        self.retries = 0

    # -- Agent ------------------------------------------------------------------------------

    def begin_trial(self, context: TrialContext) -> None:
        self._usage = Usage()
        self._last_prompt_tokens = 0
        self._seed = context.seed % (2**31) if self.spec.send_seed else None
        self._rng = random.Random(context.seed)

    def act(self, observation: Observation) -> Action:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        messages += [{"role": m.role, "content": m.content} for m in observation.messages]
        text = self.complete(messages, json_reply=True)
        return parse_reply(text)

    def usage(self) -> Usage:
        return self._usage

    def near_context_limit(self) -> bool:
        window = self.spec.context_window
        if not window or self._last_prompt_tokens == 0:  # nothing sent yet in this trial
            return False
        return self._last_prompt_tokens + self.spec.max_output_tokens >= self.spec.compact_at * window

    def summarize(self, messages: list[Message]) -> str:
        """The history summary used by `compact`: this model, a fixed prompt, the transcript cut to fit."""
        budget = (self.spec.context_window or 32_000) * 2  # characters, ~2 per token: leaves room
        budget = max(2_000, budget - len(SUMMARY_PROMPT) - 4 * self.spec.max_output_tokens)
        parts: list[str] = []
        used = 0
        for m in reversed(messages):  # the most recent messages matter most
            label = "summary" if m.stage_index < 0 else f"part {m.stage_index + 1}"
            chunk = f"[{m.role}, {label}]\n{m.content[:4000]}\n"
            if used + len(chunk) > budget:
                break
            parts.append(chunk)
            used += len(chunk)
        transcript = "".join(reversed(parts))
        text = self.complete([
            {"role": "system", "content": "You write concise, complete hand-over summaries of terminal sessions."},
            {"role": "user", "content": f"{SUMMARY_PROMPT}\n\nTranscript:\n{transcript}"},
        ], json_reply=False, max_tokens=min(self.spec.max_output_tokens, 1024))
        return text.strip() or "(the model returned an empty summary)"

    # -- the endpoint -----------------------------------------------------------------------

    def complete(self, messages: list[dict], json_reply: bool, max_tokens: int | None = None) -> str:
        """One chat completion with retries; tokens and cost are added to this trial's usage."""
        openai = self._openai
        attempts = self.spec.max_retries + 1
        last: Exception | None = None
        attempt = 0
        while attempt < attempts:
            kwargs = dict(model=self.spec.model, messages=messages, temperature=self.spec.temperature,
                          max_tokens=max_tokens or self.spec.max_output_tokens)
            if self.spec.top_p is not None:
                kwargs["top_p"] = self.spec.top_p
            if self._seed is not None:
                kwargs["seed"] = self._seed
            if json_reply and self._json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            if self.spec.extra_body:
                kwargs["extra_body"] = dict(self.spec.extra_body)
            self.requests += 1
            try:
                response = self.client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                if is_context_error(exc):
                    raise ContextLengthExceeded(str(exc)) from exc
                if "response_format" in kwargs and self.spec.response_format == "auto" and \
                        "response_format" in str(exc).lower():
                    self._json_mode = False  # the endpoint does not support it: stop asking
                    continue
                raise LLMRequestError(f"endpoint rejected the request (400): {exc}") from exc
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as exc:
                last = exc
            except openai.APIStatusError as exc:
                if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                    last = exc
                elif is_context_error(exc):
                    raise ContextLengthExceeded(str(exc)) from exc
                else:
                    raise LLMRequestError(f"endpoint error {exc.status_code}: {exc}") from exc
            else:
                self._account(response)
                choice = response.choices[0] if response.choices else None
                content = choice.message.content if choice and choice.message else None
                return content or ""
            attempt += 1
            if attempt < attempts:
                self.retries += 1
                delay = min(self.spec.backoff_max_sec, self.spec.backoff_sec * 2 ** (attempt - 1))
                self._sleep(delay * (0.5 + self._rng.random() / 2) if hasattr(self, "_rng") else delay)
        raise LLMRequestError(  # chained to the last error, so callers can tell "answered 500" from "unreachable"
            f"endpoint {self.spec.base_url} failed {attempts} attempt(s); last error: {type(last).__name__}: {last}"
        ) from last

    def _account(self, response) -> None:
        usage = getattr(response, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        tout = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        self._last_prompt_tokens = tin
        self._usage = Usage(
            tokens_in=self._usage.tokens_in + tin, tokens_out=self._usage.tokens_out + tout,
            cost_usd=self._usage.cost_usd + self.spec.prices.cost(tin, tout),
        )

    def ping(self) -> str:
        """One tiny request: used by `hrbench agents check` to tell a working endpoint from a broken one."""
        self._seed = None
        self._rng = random.Random(0)
        text = self.complete([{"role": "user", "content": "Reply with the JSON object {\"ok\": true}."}],
                             json_reply=True, max_tokens=16)
        return text
