#!/usr/bin/env python3
"""A tiny external agent for hrbench's `command` kind (JSON lines on stdin/stdout).

It looks around once per part (`ls -la`), then declares the part complete, and confirms when
the harness asks. It solves nothing; it shows the protocol. Wrap a real CLI agent the same way:
read an observation, decide, print one JSON line, flush.

Run it in a study:

    agents:
      - id: lister
        kind: command
        argv: [python3, examples/command_agent/list_then_finish.py]

It runs in a sandbox of its own: /usr and /etc read-only, this directory, no network, and only the
environment variables its config lists under `env` (docs/security.md). It needs nothing else.
"""

import json
import sys


def main() -> None:
    spent_out = 0
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "begin_trial":
            continue  # per-trial setup would go here (message["seed"], message["task"])
        if message["type"] == "end_trial":
            break
        # message["type"] == "observation": the visible history is in message["messages"]
        first_turn = message["turn"] == 1
        action = {
            "analysis": f"part {message['stage_index'] + 1} of {message['n_stages']}, turn {message['turn']}",
            "plan": "look around, then finish" if first_turn else "finish",
            "commands": [{"keystrokes": "ls -la\n", "duration": 1}] if first_turn else [],
            "task_complete": not first_turn,
        }
        spent_out += 10
        action["usage"] = {"tokens_in": 0, "tokens_out": spent_out, "cost_usd": 0.0}
        print(json.dumps(action), flush=True)


if __name__ == "__main__":
    main()
