"""Terminal output shown back to the agent is cut like terminus-2 does."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 10_000


def _marker(omitted: int) -> str:
    return f"\n[... output truncated: {omitted} bytes omitted ...]\n"


def render_head_tail(head: bytes, tail: bytes, total: int, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Text of a stream of `total` bytes of which only `head` and `tail` were kept."""
    if total <= limit:
        return (head + tail).decode("utf-8", errors="replace")
    keep = limit // 2
    head, tail = head[:keep], tail[-keep:] if tail else b""
    return (head.decode("utf-8", errors="replace") + _marker(total - len(head) - len(tail))
            + tail.decode("utf-8", errors="replace"))

