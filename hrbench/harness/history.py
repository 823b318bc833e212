"""History policies: what the agent sees, decided by the harness (DESIGN §5).

- `full`: everything, across stages.
- `reset` (checkpoint: `fresh`): a fresh context at every stage boundary.
- `compact` (checkpoint: `compacted`): the history is replaced by a summary at stage boundaries,
  and also mid-stage when the agent reports its context is nearly full. The summary is written by
  the agent's own model with a fixed prompt when it has one (`llm`), else extracted.
- `matched`: a checkpoint starts from a recorded transcript prefix (natural rollouts: as `full`).

Every policy falls back on compaction when the endpoint reports a context-length error.
"""

from __future__ import annotations

from collections.abc import Callable

from hrbench.agents.base import Message

Summarizer = Callable[[list[Message]], str]
SUMMARY_STAGE = -1
# Checkpoint protocols name two policies by what the agent starts with.
POLICY_ALIASES = {"fresh": "reset", "compacted": "compact"}


def canonical_policy(name: str) -> str:
    """`fresh` -> `reset`, `compacted` -> `compact`; other names unchanged."""
    return POLICY_ALIASES.get(name, name)


def extractive_summary(messages: list[Message]) -> str:
    """A model-free summary: the agent's last stated analysis in each finished stage."""
    last: dict[int, str] = {}
    for m in messages:
        if m.role == "assistant":
            last[m.stage_index] = m.content[:300]
    return "\n".join(f"part {i + 1}: {text}" for i, text in sorted(last.items()))


def summary_message(stages_done: int, text: str) -> Message:
    """The message that stands for compacted history (`covers=` is read by the sim agent)."""
    return Message(role="user", stage_index=SUMMARY_STAGE,
                   content=f"[summary covers={stages_done} parts]\n{text}")


class History:
    """The running transcript of one trial under one policy (full, reset, compact, matched)."""

    def __init__(self, policy: str, summarizer: Summarizer = extractive_summary):
        if policy not in ("full", "reset", "compact", "matched", "fresh", "compacted"):
            raise ValueError(f"history policy {policy!r} is not supported by this harness")
        self.policy = canonical_policy(policy)
        self.summarizer = summarizer
        self.messages: list[Message] = []
        self.log: list[Message] = []  # every message ever added, whatever the policy showed later
        self.compactions = 0

    def add(self, message: Message) -> None:
        self.messages.append(message)
        self.log.append(message)

    def boundary(self, stages_done: int) -> None:
        """Apply the policy when stage `stages_done` (1-based count) has finished."""
        if self.policy == "reset":
            self.messages = []
        elif self.policy == "compact" and stages_done > 0:
            self.compact(stages_done)

    def compact(self, stages_done: int, keep_stage: int | None = None) -> None:
        """Replace the visible history by one summary; mid-stage, the stage's own prompt is kept after it."""
        text = self.summarizer(list(self.messages))  # an earlier summary is summarized along
        kept = []
        if keep_stage is not None:
            prompts = [m for m in self.messages if m.stage_index == keep_stage and m.role == "user"]
            kept = prompts[:1]
        self.messages = [summary_message(stages_done, text)] + kept
        self.compactions += 1

    def start_checkpoint(self, stages_done: int) -> None:
        """A checkpoint trial's starting history: empty (fresh) or a summary of the earlier parts."""
        self.messages = []
        if self.policy == "compact" and stages_done > 0:
            self.messages = [summary_message(stages_done, f"Parts 1-{stages_done} were completed and verified.")]

    def start_matched(self, prefix: list[Message]) -> None:
        """A `matched` checkpoint: the transcript of the earlier stages from a recorded rollout."""
        self.messages = list(prefix)
        self.log = list(prefix)


def summary_covers(message: Message) -> int:
    """How many finished stages a compaction summary stands for (0 for any other message)."""
    if message.stage_index != SUMMARY_STAGE or "covers=" not in message.content:
        return 0
    return int(message.content.split("covers=", 1)[1].split()[0])
