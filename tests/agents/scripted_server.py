"""A scripted OpenAI-compatible chat server on loopback, for driving the real `openai` client.

It replays a script of replies (strings, or dicts naming an HTTP status / error), then falls back
to a responder function, records every request body it received, and reports token usage
computed deterministically from the request and reply text (so tests can check totals).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def count_tokens(text: str) -> int:
    """The server's 'tokenizer': one token per 4 characters, at least 1."""
    return max(1, len(text) // 4)


def reply(commands: list[str] | None = None, complete: bool = False, duration: float = 1.0,
          analysis: str = "ok") -> str:
    """A well-formed terminus-style JSON reply."""
    return json.dumps({"analysis": analysis, "plan": "do it",
                       "commands": [{"keystrokes": c, "duration": duration} for c in (commands or [])],
                       "task_complete": complete})


class ScriptedServer:
    def __init__(self):
        self.script: list = []
        self.requests: list[dict] = []
        self.responses: list[dict] = []  # (prompt_tokens, completion_tokens) actually reported
        self.responder: Callable[[dict], str] | None = None
        self.default = reply(complete=True)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _json(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found"}})
                    return
                with server._lock:
                    server.requests.append(body)
                    item = server.script.pop(0) if server.script else None
                if item is None:
                    item = server.responder(body) if server.responder else server.default
                if isinstance(item, dict) and "status" in item:
                    self._json(item["status"], {"error": item.get("error", {"message": f"scripted {item['status']}",
                                                                             "type": "server_error"})})
                    return
                content = item
                prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
                usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": count_tokens(content)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                with server._lock:
                    server.responses.append(usage)
                self._json(200, {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": usage,
                })

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chat_requests(self) -> list[list[dict]]:
        return [r["messages"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
