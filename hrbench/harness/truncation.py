"""Bounded views of unbounded streams: terminal output, verifier output, agent replies.

Whatever a stream carries, only its first and last bytes are kept (and its length counted), so a
command that prints gigabytes costs the harness a fixed amount of memory. Terminal output shown
back to the agent is cut like terminus-2 does (first and last 5,000 of 10,000 bytes).
"""

from __future__ import annotations

MAX_OUTPUT_BYTES = 10_000


class HeadTail:
    """Keeps the first and last `half` bytes of a stream, and its length."""

    def __init__(self, half: int):
        self.half = half
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-self.half:]
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def render(self, limit: int | None = None) -> str:
        """The kept text, with a marker saying how many bytes were dropped in the middle."""
        return render_head_tail(bytes(self.head), bytes(self.tail), self.total, limit or 2 * self.half)


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
