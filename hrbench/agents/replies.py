"""Reply parsing: terminus-style JSON from a model or an external program, into an action.

    {"analysis": "...", "plan": "...",
     "commands": [{"keystrokes": "ls -la\\n", "duration": 0.5}], "task_complete": false}

A reply that does not parse becomes an action with `parse_error` set; the harness feeds the
error back to the agent and counts it. Used by the `llm` and `command` agents alike.
"""

from __future__ import annotations

import json
import re

from hrbench.agents.base import Action, Command


class ParsedAction(Action):
    """An action parsed from a reply: `raw` always holds the reply text."""

    raw: str = ""


def parse_reply(text: str) -> ParsedAction:
    """Parse a terminus-style JSON reply; never raises (errors go into `parse_error`)."""

    def bad(message: str) -> ParsedAction:
        return ParsedAction(raw=text, parse_error=message)

    if not text or not text.strip():
        return bad("The response was empty. Respond with a JSON object.")
    body = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", text.strip())
    start = body.find("{")
    if start == -1:
        return bad("No valid JSON found in response. Respond with one JSON object.")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        return bad(f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(data, dict):
        return bad("The JSON must be an object with analysis, plan, commands and task_complete.")
    complete = data.get("task_complete", False)
    if isinstance(complete, str):
        complete = complete.strip().lower() == "true"
    if not isinstance(complete, bool):
        return bad("Field 'task_complete' must be true or false.")
    raw_commands = data.get("commands")
    if raw_commands is None:
        if not complete:
            return bad("Missing required field: commands (an array, possibly empty).")
        raw_commands = []
    if not isinstance(raw_commands, list):
        return bad("Field 'commands' must be an array of objects with 'keystrokes' and 'duration'.")
    commands = []
    for i, item in enumerate(raw_commands):
        if not isinstance(item, dict) or not isinstance(item.get("keystrokes"), str):
            return bad(f"Command {i + 1} must be an object with a string field 'keystrokes'.")
        duration = item.get("duration", 1.0)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            return bad(f"Command {i + 1}: 'duration' must be a number of seconds.")
        commands.append(Command(keystrokes=item["keystrokes"], duration=max(0.0, min(float(duration), 60.0))))
    return ParsedAction(
        raw=text, analysis=str(data.get("analysis", "")), plan=str(data.get("plan", "")),
        commands=commands, task_complete=complete,
    )
