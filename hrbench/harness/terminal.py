"""How the harness types an agent's commands: a persistent shell, or one sandboxed exec per command.

`llm` and `command` agents (those with `uses_shell = True`) get a `ShellTerminal`: one long-lived
bash per part, non-blocking commands, incremental reads. Before each verification the environment
ends every agent process, the shell included (a background process must not touch the files the
verifier reads); the terminal opens a new shell for the next part without a word, so the agent
keeps its files but not its shell state (cwd, variables, jobs) across parts. The reference agents (oracle, nop, sim)
keep the blocking `ExecTerminal`, whose state lives only in the workspace files.
"""

from __future__ import annotations

from typing import Protocol

from hrbench.envs.base import Environment, ExecResult
from hrbench.envs.shell import MAX_WAIT_S, PersistentShell
from hrbench.harness.truncation import MAX_OUTPUT_BYTES, HeadTail, render_head_tail
from hrbench.tasks.model import Stage


class Terminal(Protocol):
    def run(self, keystrokes: str, wait_s: float, duration_s: float) -> bool:
        """Type one command; True if it finished within the wait."""

    def replay(self, stage: Stage, script: str) -> bool:
        """Run `script` as `stage`'s solve.sh the way Harbor's oracle does (the backend's run_solution,
        bounded by the stage's agent timeout); True if it finished in time. Reference agents only."""

    def read(self) -> str:
        """Output since the previous read, cut to 10,000 bytes."""

    def reopen(self) -> None:
        """Start again after the workspace was replaced (state repair)."""

    def close(self) -> None: ...


class ExecTerminal:
    """Each command is a fresh sandboxed `bash -s` that blocks for up to `wait_s`."""

    uses_shell = False

    def __init__(self, env: Environment):
        self.env = env
        self._buf = HeadTail(MAX_OUTPUT_BYTES // 2)

    def run(self, keystrokes: str, wait_s: float, duration_s: float) -> bool:
        return self._show(self.env.exec(keystrokes, wait_s), wait_s)

    def replay(self, stage: Stage, script: str) -> bool:
        return self._show(self.env.run_solution(stage, script), None)

    def _show(self, result: ExecResult, wait_s: float | None) -> bool:
        self._buf.add(result.output.encode("utf-8", errors="replace"))
        if result.timed_out:
            after = f" after {wait_s:.0f}s" if wait_s is not None else " (the stage's agent timeout)"
            self._buf.add(f"\n[command timed out{after}]".encode())
        return not result.timed_out

    def read(self) -> str:
        buf, self._buf = self._buf, HeadTail(MAX_OUTPUT_BYTES // 2)
        return render_head_tail(bytes(buf.head), bytes(buf.tail), buf.total)

    def reopen(self) -> None:
        pass

    def close(self) -> None:
        pass


class ShellTerminal:
    """A persistent shell: waits min(agent's duration, 60 s, what the budget leaves) per command."""

    uses_shell = True

    def __init__(self, env):
        self.env = env
        self.shell: PersistentShell = env.open_shell()
        self._still_running = False
        self._notes: list[str] = []

    def run(self, keystrokes: str, wait_s: float, duration_s: float) -> bool:
        wait = max(0.0, min(duration_s, wait_s, MAX_WAIT_S))
        if self.shell.closed:  # the environment ended it to verify a part: the next part gets a fresh one
            self.reopen()
        elif not self.shell.alive:  # the agent typed `exit`: a new shell, as a new terminal would be
            self.reopen()
            self._notes.append("[the previous shell exited; this is a new shell]")
        finished = self.shell.send(keystrokes, wait)
        self._still_running = not finished
        return finished

    def replay(self, stage: Stage, script: str) -> bool:
        """The solution runs on its own (not typed into the shell, whose state it must not depend on);
        its output is shown before the shell's."""
        result = self.env.run_solution(stage, script)
        self._notes.append(result.output + ("\n[the solution timed out]" if result.timed_out else ""))
        return not result.timed_out

    def read(self) -> str:
        out = self.shell.read()
        text = render_head_tail(out.head, out.tail, out.total)
        for note in self._notes:
            text = note + "\n" + text
        self._notes = []
        if not out.alive:
            text += "\n[the shell exited]"
        elif self._still_running:
            text += "\n[a command is still running; its output will appear in a later turn]"
        return text

    def reopen(self) -> None:
        self.shell.close()
        self.shell = self.env.open_shell()

    def close(self) -> None:
        self.shell.close()


def open_terminal(env, agent) -> Terminal:
    """A persistent shell for agents that type into one (llm, command), else per-command exec."""
    if getattr(agent, "uses_shell", False):
        if not hasattr(env, "open_shell"):
            raise RuntimeError(f"environment {type(env).__name__} cannot open a persistent shell")
        return ShellTerminal(env)
    return ExecTerminal(env)
