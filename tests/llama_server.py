"""A real OpenAI-compatible endpoint for tests: llama-cpp-python's server on CPU, serving the tiny
random-weight GGUF from ``tiny_gguf``. Its answers are garbage, which is the point: the pipeline
must record them as failed attempts without crashing.

``start_llama_server`` is a context manager yielding ``(base_url, process)``; the session fixture
``llama_endpoint`` yields ``{"base_url": ..., "model": "tiny"}``. ``scripts/setup_llama.sh``
(``make setup``) installs the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_gguf import CONTEXT_LENGTH, write_tiny_gguf

MODEL_ALIAS = "tiny"
STARTUP_TIMEOUT_S = 60.0
# Settings the server reads from the environment besides its flags; a stray one (HOST, PORT, ...)
# in a developer's shell or CI must not redirect the test server.
_SERVER_ENV_VARS = ("HOST", "PORT", "CONFIG_FILE")
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server output)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no server output)"


def _models_answer(base_url: str) -> bool:
    try:
        with _NO_PROXY.open(f"{base_url}/models", timeout=2) as response:
            body = json.load(response)
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return any(model.get("id") == MODEL_ALIAS for model in body.get("data", []))


def _bypass_proxy_for_loopback(mp: pytest.MonkeyPatch) -> None:
    """With HTTP(S)_PROXY set, httpx (the openai SDK) would send 127.0.0.1 through the proxy."""
    for name in ("NO_PROXY", "no_proxy"):
        current = [h for h in os.environ.get(name, "").split(",") if h.strip()]
        mp.setenv(name, ",".join([*current, "127.0.0.1", "localhost"]))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextlib.contextmanager
def start_llama_server(
    model_path: Path,
    port: int | None = None,
    n_ctx: int = CONTEXT_LENGTH,
    chat_format: str | None = None,
    log_path: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start ``python -m llama_cpp.server`` on 127.0.0.1, wait until it lists the model, yield
    ``(base_url, process)`` (base_url ends in ``/v1``) and stop it on exit.

    ``chat_format=None`` uses the GGUF's own chat template (ChatML that renders tools): requests
    with ``tools`` succeed and honour ``max_tokens``; the answer comes back as content. The
    ``chatml-function-calling`` format can return ``tool_calls`` but ignores ``max_tokens`` under
    ``tool_choice="auto"``, so with random weights a call can run until the context is full.
    While it runs, NO_PROXY includes 127.0.0.1 so a configured HTTP proxy is not used for it.
    """
    if log_path is None:
        log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV_VARS}
    env["HF_HUB_OFFLINE"] = "1"  # a local file only: nothing to fetch
    attempts = 1 if port is not None else 3  # a free port can be taken before the server binds
    for attempt in range(attempts):
        chosen = port if port is not None else _free_port()
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(chosen),
            "--n_ctx",
            str(n_ctx),
            "--logits_all",
            "false",  # only logprobs need every position's logits (n_ctx x n_vocab floats)
            "--verbose",
            "true",  # llama.cpp's load log goes to log_path: the tail explains a failed start
        ]
        if chat_format is not None:
            command += ["--chat_format", chat_format]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        base_url = f"http://127.0.0.1:{chosen}/v1"
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while process.poll() is None and time.monotonic() < deadline:
                if _models_answer(base_url):
                    break
                time.sleep(0.1)
            else:
                output = _tail(log_path)
                if process.poll() is not None:
                    if "address already in use" in output and attempt + 1 < attempts:
                        continue
                    raise AssertionError(
                        f"llama.cpp server exited with {process.returncode} before answering "
                        f"{base_url}/models; its output ({log_path}):\n{output}"
                    )
                raise AssertionError(
                    f"llama.cpp server did not answer {base_url}/models within "
                    f"{STARTUP_TIMEOUT_S:.0f}s; its output ({log_path}):\n{output}"
                )
            with pytest.MonkeyPatch.context() as mp:
                _bypass_proxy_for_loopback(mp)
                yield base_url, process
            return
        finally:
            _stop(process)
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def llama_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running llama.cpp server with the tiny random model, shared by the whole session."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as exc:
        raise AssertionError(
            f"llama-cpp-python's server is not installed ({exc}); run `make setup`"
        ) from None
    workdir = tmp_path_factory.mktemp("llama")
    model = write_tiny_gguf(workdir / "tiny.gguf")
    with start_llama_server(model, log_path=workdir / "server.log") as (base_url, _process):
        yield {"base_url": base_url, "model": MODEL_ALIAS}
