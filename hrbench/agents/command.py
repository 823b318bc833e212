"""The `command` agent: an external program speaking JSON lines on stdin/stdout.

One process per trial. The harness writes one JSON object per line to the program's stdin and,
for every observation, reads one JSON line back from its stdout:

    -> {"type": "begin_trial", "trial_key": "...", "seed": 123, "kind": "natural", "task": "tiny-chain"}
    -> {"type": "observation", "task": ..., "stage": ..., "stage_index": 0, "n_stages": 3, "turn": 1,
        "turn_cap": 20, "messages": [{"role": "user", "content": "...", "stage_index": 0}, ...]}
    <- {"analysis": "...", "plan": "...", "commands": [{"keystrokes": "ls\\n", "duration": 1}],
        "task_complete": false, "usage": {"tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}}
    -> {"type": "end_trial"}          (then stdin is closed)

`messages` is exactly what the history policy lets the agent see; `usage` (optional) is the
program's cumulative spend in this trial. A reply that is not valid JSON of that shape is a parse
error fed back to the program (in the next observation) and counted; a program that exits or
stays silent past `reply_timeout_sec` ends the trial as `harness_error`. Lines the program writes
to stderr are kept (the last 50) for the error message. See examples/command_agent/.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import threading

from hrbench.agents.base import Action, Agent, Observation, TrialContext, Usage
from hrbench.agents.config import CommandAgentSpec
from hrbench.agents.replies import ParsedAction, parse_reply


class CommandAgentError(RuntimeError):
    """The external program died, timed out or could not be started."""


class CommandAgent(Agent):
    uses_shell = True
    ask_confirmation = True

    def __init__(self, spec: CommandAgentSpec):
        self.spec = spec
        self.name = f"command:{spec.id}"
        self.model_name = None
        self.proc: subprocess.Popen | None = None
        self._usage = Usage()

    def begin_trial(self, context: TrialContext) -> None:
        self.end_trial()
        self._usage = Usage()
        try:
            self.proc = subprocess.Popen(
                self.spec.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=self.spec.cwd, env={**os.environ, **self.spec.env}, start_new_session=True,
            )
        except OSError as exc:
            raise CommandAgentError(f"agent {self.spec.id!r}: cannot start {self.spec.argv}: {exc}") from exc
        self._lines: queue.Queue = queue.Queue()
        self._stderr: collections.deque = collections.deque(maxlen=50)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self._stderr_reader.start()
        self._send({"type": "begin_trial", "trial_key": context.trial_key, "seed": context.seed,
                    "kind": context.kind, "task": context.task.name})

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(None)

    def _drain(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self._stderr.append(line.decode("utf-8", errors="replace").rstrip())

    def _send(self, payload: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise CommandAgentError(f"agent {self.spec.id!r}: the program closed its input: {self._tail()}") from exc

    def _tail(self) -> str:
        return " | ".join(list(self._stderr)[-5:]) or "(no stderr)"

    def act(self, observation: Observation) -> Action:
        self._send({"type": "observation", **observation.model_dump(mode="json")})
        try:
            line = self._lines.get(timeout=self.spec.reply_timeout_sec)
        except queue.Empty as exc:
            raise CommandAgentError(
                f"agent {self.spec.id!r}: no reply within {self.spec.reply_timeout_sec:g}s; stderr: {self._tail()}"
            ) from exc
        if line is None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self._stderr_reader.join(timeout=2)  # its last words explain the exit
            raise CommandAgentError(f"agent {self.spec.id!r}: the program exited (code {code}); "
                                    f"stderr: {self._tail()}")
        text = line.decode("utf-8", errors="replace")
        action = parse_reply(text)
        try:
            usage = json.loads(text).get("usage")
            if isinstance(usage, dict):
                self._usage = Usage(tokens_in=int(usage.get("tokens_in", 0)), tokens_out=int(usage.get("tokens_out", 0)),
                                    cost_usd=float(usage.get("cost_usd", 0.0)))
        except (ValueError, AttributeError, TypeError):
            pass
        return action if isinstance(action, ParsedAction) else action

    def usage(self) -> Usage:
        return self._usage

    def end_trial(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.write(b'{"type": "end_trial"}\n')
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
