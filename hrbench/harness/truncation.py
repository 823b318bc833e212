"""Terminal output shown back to the agent is cut like terminus-2 does."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 10_000
_KEEP = MAX_OUTPUT_BYTES // 2


def _marker(omitted: int) -> str:
    return f"\n[... output truncated: {omitted} bytes omitted ...]\n"


def truncate_bytes(data: bytes, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Raw terminal bytes -> text: at most `limit` bytes kept (first and last limit/2), invalid UTF-8 replaced."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    return render_head_tail(data[: limit // 2], data[-(limit // 2):], len(data), limit)


def render_head_tail(head: bytes, tail: bytes, total: int, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Text of a stream of `total` bytes of which only `head` and `tail` were kept."""
    if total <= limit:
        return (head + tail).decode("utf-8", errors="replace")
    keep = limit // 2
    head, tail = head[:keep], tail[-keep:] if tail else b""
    return (head.decode("utf-8", errors="replace") + _marker(total - len(head) - len(tail))
            + tail.decode("utf-8", errors="replace"))


def truncate_output(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Keep the first and last limit/2 bytes (UTF-8) with a marker saying how much was cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    keep = limit // 2
    head = data[:keep].decode("utf-8", errors="ignore")
    tail = data[-keep:].decode("utf-8", errors="ignore")
    return f"{head}{_marker(len(data) - 2 * keep)}{tail}"
