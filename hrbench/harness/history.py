"""History policies: what the agent sees, decided by the harness at stage boundaries."""

from __future__ import annotations

from collections.abc import Callable

from hrbench.agents.base import Message

Summarizer = Callable[[list[Message]], str]


def extractive_summary(messages: list[Message]) -> str:
    """A model-free summary: the agent's last stated analysis in each finished stage."""
    last: dict[int, str] = {}
    for m in messages:
        if m.role == "assistant":
            last[m.stage_index] = m.content[:300]
    return "\n".join(f"part {i + 1}: {text}" for i, text in sorted(last.items()))


class History:
    """The running transcript of one trial under one policy (full, reset, compact)."""

    def __init__(self, policy: str, summarizer: Summarizer = extractive_summary):
        if policy not in ("full", "reset", "compact", "fresh", "compacted"):
            raise ValueError(f"history policy {policy!r} is not supported by this harness")
        self.policy = {"fresh": "reset", "compacted": "compact"}.get(policy, policy)
        self.summarizer = summarizer
        self.messages: list[Message] = []

    def add(self, message: Message) -> None:
        self.messages.append(message)

    def boundary(self, stages_done: int) -> None:
        """Apply the policy when stage `stages_done` (1-based count) has finished."""
        if self.policy == "reset":
            self.messages = []
        elif self.policy == "compact" and stages_done > 0:
            earlier = [m for m in self.messages if not _is_summary(m)]
            text = self.summarizer(earlier)
            self.messages = [Message(role="user", stage_index=-1,
                                     content=f"[summary covers={stages_done} parts]\n{text}")]

    def start_checkpoint(self, stages_done: int) -> None:
        """A checkpoint trial's starting history: empty (fresh) or a summary of the earlier parts."""
        self.messages = []
        if self.policy == "compact" and stages_done > 0:
            self.messages = [Message(role="user", stage_index=-1,
                                     content=f"[summary covers={stages_done} parts]\n"
                                             f"Parts 1-{stages_done} were completed and verified.")]


def _is_summary(message: Message) -> bool:
    return message.stage_index == -1
