"""Terminal output shown back to the agent is cut like terminus-2 does."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 10_000
_KEEP = MAX_OUTPUT_BYTES // 2


def truncate_output(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Keep the first and last limit/2 bytes (UTF-8) with a marker saying how much was cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    keep = limit // 2
    head = data[:keep].decode("utf-8", errors="ignore")
    tail = data[-keep:].decode("utf-8", errors="ignore")
    return f"{head}\n[... output truncated: {len(data) - 2 * keep} bytes omitted ...]\n{tail}"
