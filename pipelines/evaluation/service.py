"""The reward service: POST a task id and a patch, get the reward, resolved and the report.

For RL trainers that score rollouts from another process or machine (TRL's GRPOTrainer through
``rewards.trl_reward_func``, or any framework over HTTP). ``workers`` patches are graded at once,
each in a fresh container of its task's image (Docker keeps one started, never used container per
worker and image ready, so a request does not wait for one to start; each serves one patch and is
removed, docs/security.md); up to ``queue_size`` more wait.
Nothing is dropped silently: a request beyond that is answered 503 ``queue_full`` at once, one
that waits past ``request_timeout_s`` is answered 504 ``request_timeout``, and every answer
(bad request, unknown task, harness error) is counted in ``/stats``, as is every connection
accepted and every one closed without an answer (``connections``). The
listen backlog holds a burst of ``workers + queue_size`` clients (at least ``MIN_BACKLOG``), so
the kernel does not reset them before they are counted. A refusal carries ``error`` and
``reason`` and no ``reward``: it is no verdict, and a client must not read one from it.

Endpoints: ``POST /reward`` ``{"instance_id", "patch", "partial": false, "fail_fast": null}``
(``fail_fast`` null: the server's ``--fail-fast``); ``GET /health``;
``GET /stats``; ``GET /tasks``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.schemas import json_rows
from trajforge.schemas.task_instance import TaskInstance

MAX_PATCH_BYTES = 1_000_000
MIN_BACKLOG = 128  # connections the kernel holds for accept(); Python's default is 5


@dataclass(frozen=True)
class Answer:
    status: int  # HTTP status
    body: dict[str, Any]


class RewardService:
    """Admission, a bounded pool and the counters; ``serve`` puts it behind HTTP."""

    def __init__(
        self,
        evaluator: Evaluator,
        tasks: dict[str, TaskInstance],
        workers: int = 2,
        queue_size: int = 64,
        request_timeout_s: float = 900.0,
        max_patch_bytes: int = MAX_PATCH_BYTES,
    ) -> None:
        self.evaluator = evaluator
        self.tasks = tasks
        self.workers = workers
        self.queue_size = queue_size
        self.request_timeout_s = request_timeout_s
        self.max_patch_bytes = max_patch_bytes
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reward")
        self.slots = threading.BoundedSemaphore(workers + queue_size)
        self.lock = threading.Lock()
        self.counts: Counter = Counter()  # answers: resolved, not:<reason>, refused:<reason>
        self.connections: Counter = Counter()  # accepted, unanswered
        self.in_flight = 0
        self.latencies: list[float] = []

    def reward(self, body: bytes) -> Answer:
        """One POST /reward, answered whatever it holds."""
        started = time.monotonic()
        request = self._request(body)
        if isinstance(request, Answer):
            return self.answered(request, started)
        task, patch, partial, fail_fast = request
        if not self.slots.acquire(blocking=False):
            busy = f"{self.workers} running and {self.queue_size} waiting; retry later"
            return self.answered(_error(503, "queue_full", busy), started)
        with self.lock:
            self.in_flight += 1
        future = self.pool.submit(self._grade, task, patch, partial, fail_fast)
        try:
            evaluation = future.result(timeout=self.request_timeout_s)
        except FutureTimeout:
            why = f"not graded within {self.request_timeout_s:g}s (it goes on; the answer is lost)"
            return self.answered(_error(504, "request_timeout", why, task.instance_id), started)
        body_out = evaluation.as_dict()
        return self.answered(Answer(200, body_out), started)

    def _grade(self, task: TaskInstance, patch: str | None, partial: bool, fail_fast: bool | None):
        try:
            return self.evaluator.evaluate(task, patch, partial, fail_fast)
        finally:
            with self.lock:
                self.in_flight -= 1
            self.slots.release()

    def _request(self, body: bytes) -> tuple[TaskInstance, str | None, bool, bool | None] | Answer:
        if not body:
            return _error(400, "no_body", 'POST a JSON object: {"instance_id": ..., "patch": ...}')
        try:  # bounded, and deep nesting or a lone surrogate is a refusal, not a crash
            data = json_rows.loads(body, max(self.max_patch_bytes * 2, json_rows.MAX_ROW_BYTES))
        except json_rows.RowError as exc:
            return _error(400, "malformed_request", f"the body is not readable JSON: {exc.why}")
        if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
            return _error(400, "malformed_request", "the body needs instance_id (a string)")
        instance_id = data["instance_id"]
        patch = data.get("patch", data.get("model_patch"))
        if patch is not None and not isinstance(patch, str):
            return _error(400, "malformed_request", "patch must be text or null", instance_id)
        if patch is not None and len(patch.encode()) > self.max_patch_bytes:
            why = f"the patch is over {self.max_patch_bytes} bytes"
            return _error(413, "patch_too_large", why, instance_id)
        partial = data.get("partial", False)
        if not isinstance(partial, bool):  # "false" is a string, and a string would be true
            why = f"partial must be true or false (a JSON boolean), not {_json_type(partial)}"
            return _error(400, "malformed_request", why, instance_id)
        fail_fast = data.get("fail_fast")
        if fail_fast is not None and not isinstance(fail_fast, bool):
            why = f"fail_fast must be true or false (a JSON boolean), not {_json_type(fail_fast)}"
            return _error(400, "malformed_request", why, instance_id)
        task = self.tasks.get(instance_id)
        if task is None:
            return _error(404, "unknown_instance", "no task with this instance_id", instance_id)
        return task, patch, partial, fail_fast

    def answered(self, answer: Answer, started: float) -> Answer:
        with self.lock:
            self.counts["requests"] += 1
            reason = answer.body.get("reason", "")
            if answer.status == 200:
                self.counts["resolved" if answer.body.get("resolved") else f"not:{reason}"] += 1
                self.latencies.append(time.monotonic() - started)
            else:
                self.counts[f"refused:{reason}"] += 1
        return answer

    def connection(self, what: str) -> None:
        with self.lock:
            self.connections[what] += 1

    def health(self) -> dict[str, Any]:
        with self.lock:
            return {
                "ok": True,
                "tasks": len(self.tasks),
                "workers": self.workers,
                "queue_size": self.queue_size,
                "in_flight": self.in_flight,
            }

    def stats(self) -> dict[str, Any]:
        with self.lock:
            ordered = sorted(self.latencies)
            return {
                "counts": dict(sorted(self.counts.items())),
                "connections": {k: self.connections[k] for k in ("accepted", "unanswered")},
                "in_flight": self.in_flight,
                "p50_s": _quantile(ordered, 0.5),
                "p95_s": _quantile(ordered, 0.95),
            }

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _error(status: int, reason: str, why: str, instance_id: str = "") -> Answer:
    body: dict[str, Any] = {"error": True, "reason": reason, "detail": why}  # no reward: no verdict
    if instance_id:
        body["instance_id"] = instance_id
    return Answer(status, body)


def _json_type(value: object) -> str:
    kinds = {
        str: "a string",
        int: "a number",
        float: "a number",
        list: "an array",
        dict: "an object",
    }
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


READ_TIMEOUT_S = 30.0  # receiving one request: its line, headers and body (or a keep-alive's wait)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a request still grading never holds the process at shutdown
    service: RewardService

    def process_request(self, request: Any, client_address: Any) -> None:
        """Every connection accepted is counted, before anything can go wrong with it."""
        self.service.connection("accepted")
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, never a traceback: the request is lost, the service goes on."""
        exc = sys.exc_info()[1]
        said = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        print(f"serve-rewards: a request from {client_address[0]} failed ({said})", file=sys.stderr)


def serve(
    service: RewardService,
    host: str = "127.0.0.1",
    port: int = 8765,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> ThreadingHTTPServer:
    """An HTTP server for ``service`` (call ``serve_forever``; port 0 picks a free one).

    No client holds a thread by being slow: each request must arrive whole (line, headers and
    body; for a kept-alive connection, the next request too) within ``read_timeout_s``, else the
    connection is cut (a watchdog shuts its reading side, so a client that trickles bytes is too;
    each read also times out on its own, at twice that). A body is read only when its
    Content-Length is within the limit (over it: 413 at once, unread); a body without a length
    (chunked) is 411, one that ends before its length is 400, and one still missing at the
    deadline is 408."""
    body_limit = service.max_patch_bytes * 2 + 4096  # the patch limit, room for the JSON around

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Every read and write on the socket (StreamRequestHandler): a backstop behind the
        # watchdog, which decides, so a late request is always cut and counted the same way.
        timeout = read_timeout_s * 2
        watchdog: threading.Timer | None = None
        cut = False  # the watchdog shut the socket: the request did not arrive in time
        answers = 0  # responses sent on this connection

        def handle(self) -> None:
            try:
                super().handle()
            finally:
                if not self.answers:  # closed, cut or failed before any answer: counted
                    service.connection("unanswered")

        def handle_one_request(self) -> None:
            self.watchdog = threading.Timer(read_timeout_s, self._cut)
            self.watchdog.daemon = True
            self.watchdog.start()
            try:
                super().handle_one_request()
            finally:
                self._received()

        def _received(self) -> None:
            """The request is in: from here on the client waits for us, not we for it."""
            if self.watchdog is not None:
                self.watchdog.cancel()
                self.watchdog = None

        def _cut(self) -> None:
            self.cut = True
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RD)  # reads end; the answer still goes

        def do_POST(self) -> None:
            if self.cut:
                why = f"the request did not arrive whole within {read_timeout_s:g}s"
                return self._refuse(_error(408, "request_timeout", why))
            if self.path.rstrip("/") != "/reward":
                return self._refuse(_error(404, "not_found", "POST /reward"))
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                why = "send the body with a Content-Length (chunked bodies are not read)"
                return self._refuse(_error(411, "length_required", why))
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                return self._refuse(_error(400, "malformed_request", "bad Content-Length"))
            if length > body_limit:
                why = f"a body of {length} bytes is over the limit of {body_limit}"
                return self._refuse(_error(413, "patch_too_large", why))
            try:
                body = self.rfile.read(length) if length else b""
            except (TimeoutError, OSError):
                body = None
            self._received()
            if self.cut:
                body = None
            if body is None or len(body) < length:
                got = "none" if body is None else f"{len(body)} bytes"
                why = f"the body ended before its Content-Length of {length} bytes ({got} came)"
                late = _error(408, "request_timeout", f"{why} within {read_timeout_s:g}s")
                return self._refuse(late if body is None else _error(400, "body_incomplete", why))
            self._send(self._reward(body))

        def _reward(self, body: bytes) -> Answer:
            """The service's answer; whatever escapes it is still an answer, counted."""
            started = time.monotonic()
            try:
                return service.reward(body)
            except (ValueError, RecursionError) as exc:  # JSON too deep, a lone surrogate...
                said = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                answer = _error(400, "malformed_request", f"the body cannot be read ({said})")
            except Exception as exc:
                said = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                answer = _error(500, "internal_error", f"the service failed ({said})")
            return service.answered(answer, started)

        def do_GET(self) -> None:
            self._received()
            path = self.path.rstrip("/")
            if path == "/health":
                return self._send(Answer(200, service.health()))
            if path == "/stats":
                return self._send(Answer(200, service.stats()))
            if path == "/tasks":
                return self._send(Answer(200, {"instance_ids": sorted(service.tasks)}))
            self._send(_error(404, "not_found", "GET /health, /stats or /tasks"))

        def _refuse(self, answer: Answer) -> None:
            """Answer, counted, and close: what is left of the body is never read."""
            self._received()
            self.close_connection = True
            self._send(service.answered(answer, time.monotonic()))

        def _send(self, answer: Answer) -> None:
            data = (json.dumps(answer.body) + "\n").encode()
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.answers += 1
            except OSError:  # the client left (or was cut): nobody to answer
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: requests are counted in /stats, and patches never reach a log."""

    class Server(_Server):
        request_queue_size = max(MIN_BACKLOG, service.workers + service.queue_size)

    server = Server((host, port), Handler)
    server.service = service
    return server
