"""Work W of a task: the size of its reference solution (depth paper §2 and Appendix D).

W counts the non-blank, non-comment lines of every solve.sh, summed over stages (the same
count as :attr:`hrbench.tasks.model.Task.work`). Because lines depend on coding style, the
same counted lines are also measured in characters and, when tiktoken and its ``o200k_base``
encoding are available offline, in BPE tokens (None otherwise: never a download at run time).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from hrbench.tasks.model import Task


class WorkMeasures(BaseModel):
    """W of one task in lines, characters and (optionally) o200k_base tokens."""

    model_config = ConfigDict(frozen=True)
    task: str
    lines: int
    chars: int
    tokens: int | None  # None when tiktoken / o200k_base cannot be loaded offline


def counted_lines(script: str) -> list[str]:
    """The lines W counts: non-blank and not a comment (leading/trailing blanks dropped)."""
    return [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]


@functools.cache
def _o200k() -> Callable[[str], int] | None:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
    except Exception:  # noqa: BLE001 (not installed, or the encoding is not cached and there is no network)
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def script_work(script: str, count_tokens: Callable[[str], int] | None = None) -> tuple[int, int, int | None]:
    """(lines, characters, tokens) of one script; characters and tokens cover the counted lines only."""
    lines = counted_lines(script)
    text = "\n".join(lines)
    return len(lines), len(text), (count_tokens(text) if count_tokens is not None else None)


def task_work(task: Task, count_tokens: Callable[[str], int] | None | bool = True) -> WorkMeasures:
    """W of `task` summed over its stages; `count_tokens=True` uses o200k_base when available."""
    counter = _o200k() if count_tokens is True else (count_tokens or None)
    lines = chars = 0
    tokens: int | None = 0 if counter else None
    for stage in task.stages:
        n, c, t = script_work(stage.solution_script(), counter)
        lines, chars = lines + n, chars + c
        if tokens is not None and t is not None:
            tokens += t
    return WorkMeasures(task=task.name, lines=lines, chars=chars, tokens=tokens)
