"""A real git smart-HTTP server for tests: ``git http-backend`` (CGI) behind Python's http.server,
with HTTP basic auth, as a private repository host serves clones.

Every request without the right ``Authorization`` header is answered 401 (git then retries with
the credentials it has); the headers each request carried are kept in ``seen`` so a test can
prove the credentials were sent and so were used.
"""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def git_http_server(root: Path, user: str, password: str) -> Iterator[tuple[str, list[dict]]]:
    """Serve the bare repositories under ``root`` at ``http://127.0.0.1:PORT/<name>.git``;
    yields ("127.0.0.1:PORT", the requests seen: method, path, authorization)."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    seen: list[dict] = []

    class Backend(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._cgi(b"")

        def do_POST(self) -> None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                body = self._chunks()
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._cgi(body)

        def _chunks(self) -> bytes:
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if not size:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()

        def _cgi(self, body: bytes) -> None:
            auth = self.headers.get("Authorization") or ""
            seen.append({"method": self.command, "path": self.path, "authorization": auth})
            if auth != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", ""),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type") or "",
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": user,
                "REMOTE_ADDR": self.client_address[0],
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding") or "",
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol") or "",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
            }
            done = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            if not payload and b"\n\n" in done.stdout:
                head, _, payload = done.stdout.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
