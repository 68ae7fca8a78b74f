"""A small OpenAI-compatible server for the tests: its answers come from a Python function.

The one stand-in the tests allow: a scripted "model" behind a real HTTP server, so the real
``openai`` SDK, its retries and timeouts, and trajforge's client are all exercised.
``respond(request) -> dict`` returns an assistant message (``content`` and/or ``tool_calls``), or
a ``Reply`` for an HTTP error, a delay or a body that is not JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: str | None = None  # raw body; None means the message below as a completion
    message: dict[str, Any] | None = None
    delay_s: float = 0.0


def tool_call(name: str, call_id: str | None = None, raw_arguments: str | None = None, **args):
    """One tool call as a model sends it; ``raw_arguments`` sends text that may not be JSON."""
    return {
        "id": call_id or f"call_{name}_{abs(hash(json.dumps(args, sort_keys=True))) % 10**8}",
        "type": "function",
        "function": {
            "name": name,
            "arguments": raw_arguments if raw_arguments is not None else json.dumps(args),
        },
    }


def completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    full = {"role": "assistant", "content": message.get("content"), **message}
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": full,
                "finish_reason": message.get("finish_reason")
                or ("tool_calls" if message.get("tool_calls") else "stop"),
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


class ScriptedLLM:
    def __init__(self, respond: Callable[[dict[str, Any]], dict[str, Any] | Reply]) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length))
                with scripted.lock:
                    scripted.requests.append(request)
                    scripted.headers.append({k.lower(): v for k, v in self.headers.items()})
                    scripted.in_flight += 1
                    scripted.max_in_flight = max(scripted.max_in_flight, scripted.in_flight)
                try:
                    answer = scripted.respond(request)
                    reply = answer if isinstance(answer, Reply) else Reply(message=answer)
                    time.sleep(reply.delay_s)
                    body = reply.body
                    if body is None:
                        body = json.dumps(completion(reply.message or {}, request["model"]))
                    data = body.encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with scripted.lock:
                        scripted.in_flight -= 1

        return Handler


def turn(request: dict[str, Any]) -> int:
    """How many assistant turns the conversation already has (the script's position)."""
    return sum(1 for m in request["messages"] if m["role"] == "assistant")
