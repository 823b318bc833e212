"""Trajectories in ATIF (Harbor's Agent Trajectory Interchange Format), one JSON file per trial.

Every user message, agent reply (with its commands as tool calls and the output shown back as
the observation), parse error, compaction and verification is a step. The root `extra` keeps
hrbench's own view: the trial key, outcome, and the full message log with stage indices
(`hrbench_messages`), from which `matched` checkpoints take their transcript prefix.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from hrbench.agents.base import Message

# The newest ATIF whose models (PyPI `atif`, Harbor's RFC 0001) validate what `write` produces (tests/harbor).
ATIF_VERSION = "ATIF-v1.8"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def trajectory_relpath(trial_key: str) -> Path:
    """Where a trial's trajectory lives under the trajectories root (the key, made path-safe)."""
    parts = [p.replace(":", "_").replace("/", "_") or "_" for p in trial_key.split("/")]
    return Path(*parts[:-1]) / f"{parts[-1]}.json.gz"


def read_trajectory(path: Path) -> dict:
    """An ATIF trajectory as written by `TrajectoryRecorder.write` (gzip-compressed JSON)."""
    return json.loads(gzip.decompress(Path(path).read_bytes()))


class TrajectoryRecorder:
    """Collects ATIF steps for one trial."""

    def __init__(self, session_id: str, agent_name: str, model_name: str | None = None,
                 agent_extra: dict | None = None):
        self.session_id = session_id
        self.agent = {"name": agent_name, "version": "hrbench"}
        if model_name:
            self.agent["model_name"] = model_name
        if agent_extra:
            self.agent["extra"] = agent_extra
        self.steps: list[dict] = []
        self.messages: list[Message] = []  # everything any history showed, with stage indices

    def _step(self, source: str, message: str, **fields) -> dict:
        step = {"step_id": len(self.steps) + 1, "timestamp": _now(), "source": source, "message": message}
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        return step

    def user(self, message: str, stage_index: int, **extra) -> None:
        self._step("user", message, extra={"stage_index": stage_index, **extra})

    def system(self, message: str, stage_index: int, **extra) -> None:
        self._step("system", message, extra={"stage_index": stage_index, **extra})

    def agent_turn(self, message: str, commands: list[dict], output: str | None, stage_index: int, turn: int,
                   tokens_in: int, tokens_out: int, cost_usd: float, model_name: str | None = None,
                   parse_error: str | None = None) -> None:
        calls = [{"tool_call_id": f"s{stage_index}t{turn}c{i}", "function_name": "keystrokes", "arguments": c}
                 for i, c in enumerate(commands)]
        observation = None
        if output is not None:
            observation = {"results": [{"source_call_id": calls[-1]["tool_call_id"] if calls else None,
                                        "content": output}]}
        self._step(
            "agent", message, model_name=model_name, tool_calls=calls or None, observation=observation,
            metrics={"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "cost_usd": cost_usd},
            extra={"stage_index": stage_index, "turn": turn, "parse_error": parse_error},
        )

    def write(self, path: Path, final_metrics: dict, extra: dict) -> Path:
        """Write atomically (a crash never leaves half a file that a row points to)."""
        doc = {
            "schema_version": ATIF_VERSION,
            "session_id": self.session_id,
            "agent": self.agent,
            "steps": self.steps,
            "final_metrics": {**final_metrics, "total_steps": len(self.steps)},
            "extra": {**extra, "hrbench_messages": [m.model_dump() for m in self.messages]},
        }
        return _write_atomically(path, doc)


def note_earlier_attempts(path: Path, attempts: list[dict]) -> None:
    """Add a trial's earlier attempts (`TrialRecord.earlier_attempts_json`) to its trajectory's root `extra`,
    so the trajectory of the attempt that counts names the ones that did not."""
    doc = read_trajectory(path)
    doc.setdefault("extra", {})["earlier_attempts"] = attempts
    _write_atomically(path, doc)


def _write_atomically(path: Path, doc: dict) -> Path:
    """A crash never leaves half a file that a row points to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}-{threading.get_ident()}")
    # Compressed JSON (DESIGN §8): a study writes one trajectory per trial, mostly repeated text.
    tmp.write_bytes(gzip.compress(json.dumps(doc, ensure_ascii=False).encode(), compresslevel=6))
    os.replace(tmp, path)
    return path


def load_matched_prefix(rollouts: list[Path], stage_index: int, trial_index: int) -> list[Message] | None:
    """A transcript prefix for a `matched` checkpoint of stage `stage_index` (0-based).

    `rollouts` are the trajectories of recorded natural rollouts of the same agent and task under
    full history that passed every stage before it, in a fixed order (so a resumed study picks the
    same one); the prefix is the chosen rollout's messages of those stages, as the model saw them."""
    candidates = []
    for path in rollouts:
        try:
            extra = read_trajectory(path).get("extra", {})
        except (OSError, ValueError):
            continue
        if extra.get("stages_passed", 0) >= stage_index:
            candidates.append(extra.get("hrbench_messages", []))
    if not candidates:
        return None
    chosen = candidates[trial_index % len(candidates)]
    return [Message.model_validate(m) for m in chosen if 0 <= m["stage_index"] < stage_index]
