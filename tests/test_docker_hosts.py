"""Workers reach Docker where it is: each Dask worker through its own DOCKER_HOST (never the
launcher's), ``sandbox.docker_host`` from params over any worker's, and a worker whose engine
does not answer rejects its candidates in one line naming the address and DOCKER_HOST.

Real processes throughout: a ``dask scheduler`` and a ``dask worker`` started here, the real CLI,
the real engine. The worker's DOCKER_HOST is a TCP port on which this test forwards to the local
engine's socket, counting connections, so what reached the engine through it is known.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.verifiers.sandbox import docker as docker_sandbox
from trajforge.verifiers.sandbox.base import SandboxBroken, SessionSpec

pytestmark = pytest.mark.docker

DASK = str(Path(sys.executable).parent / "dask")
ENGINE_SOCKET = "/var/run/docker.sock"
LAUNCHER_HOST = f"unix://{ENGINE_SOCKET}"  # the launcher's own DOCKER_HOST: not the workers'


class Forwarder:
    """127.0.0.1:<port> -> the engine's unix socket, byte for byte, counting connections.

    ``silent_after``: once the engine sends these bytes, nothing more passes either way and
    nothing is closed (the way to a remote engine went silent), until ``flowing`` is set again.
    """

    def __init__(self, target: str = ENGINE_SOCKET, silent_after: bytes | None = None) -> None:
        self.target = target
        self.silent_after = silent_after
        self.flowing = threading.Event()
        self.flowing.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True, name="forwarder")
        self.thread.start()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                engine.connect(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += 1
                self.open += [client, engine]
            done = threading.Barrier(2, action=functools.partial(_close, client, engine))
            directions = ((client, engine, None), (engine, client, self.silent_after))
            for source, sink, watch in directions:
                pump = functools.partial(_pump, source, sink, done, self.flowing, watch)
                threading.Thread(target=pump, daemon=True).start()

    def close(self) -> None:
        self.stopped.set()
        self.server.close()
        self.thread.join(5)
        with self.lock:
            _close(*self.open)


def _pump(
    source: socket.socket,
    sink: socket.socket,
    done: threading.Barrier,
    flowing: threading.Event,
    watch: bytes | None,
) -> None:
    """One direction until its end; the other side is told (half close), and the pair is closed
    once both directions ended. Bytes pass only while ``flowing``; ``watch`` stops the flow."""
    try:
        while chunk := source.recv(65536):
            flowing.wait()
            sink.sendall(chunk)
            if watch is not None and watch in chunk:
                flowing.clear()
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
    with contextlib.suppress(threading.BrokenBarrierError):
        done.wait(timeout=600)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()


def _dead_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _environ(**changes: str) -> dict[str, str]:
    """This process's environment without DOCKER_HOST, with ``changes``."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return {**env, **changes}


@contextlib.contextmanager
def dask_cluster(root: Path, docker_host: str) -> Iterator[str]:
    """A ``dask scheduler`` and one ``dask worker`` (one thread), the worker's environment having
    DOCKER_HOST=``docker_host``; yields the scheduler's address."""
    from dask.distributed import Client

    root.mkdir(parents=True, exist_ok=True)
    scheduler_file = root / "scheduler.json"
    log = open(root / "dask.log", "wb")  # noqa: SIM115  (the processes hold it)
    scheduler = subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)],
        env=_environ(), stdout=log, stderr=log, cwd=root,
    )  # fmt: skip
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            assert scheduler.poll() is None, (root / "dask.log").read_text()
            assert time.monotonic() < deadline, "the scheduler wrote no scheduler file"
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen(
            [DASK, "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
             "--nworkers", "1", "--memory-limit", "0", "--no-dashboard"],
            env=_environ(DOCKER_HOST=docker_host), stdout=log, stderr=log, cwd=root,
        )  # fmt: skip
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            seen = set(client.run(os.getenv, "DOCKER_HOST").values())
        assert seen == {docker_host}, seen  # the worker runs with its own DOCKER_HOST
        yield address
    finally:
        for proc in (worker, scheduler):
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in (worker, scheduler):
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()


# --- one mine output and its local-runner validation, shared --------------------------------


@pytest.fixture(scope="module")
def mined(calc_repo, docker_engine, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Two candidates of one profile: a kept fix and a collection error; validated once with
    the local runner (ids to compare with) in the launcher's own engine."""
    path, shas = calc_repo
    work = tmp_path_factory.mktemp("hosts")
    write_params(work / "params.yaml", work / "cache-local")
    commits = f"{shas['fix_add']},{shas['import_error']}"
    proc = run_cli("mine", "--repo", str(path), "--commits", commits, "--output", "m", cwd=work)
    assert proc.returncode == 0, proc.stderr
    local = run_cli(
        "validate", "--input", "m", "--output", "local", cwd=work,
        env={"DOCKER_HOST": LAUNCHER_HOST}, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0 and "Traceback" not in local.stderr, local.stderr
    assert _ids(work / "local", "tasks") and _ids(work / "local", "rejections"), local.stderr
    return work, shas


def _ids(output: Path, table: str) -> list[str]:
    frame = pl.read_parquet(output / table / "*.parquet")
    column = "candidate_id" if table == "tasks" else "input"
    return sorted(frame[column].to_list())


def _validate_on(work: Path, address: str, output: str, params: Path):
    """``trajforge validate`` on the cluster at ``address``, launched with the launcher's own
    DOCKER_HOST (the local socket), never the worker's. Paths are absolute: the worker runs in
    another directory."""
    return run_cli(
        "validate", "--input", str(work / "m"), "--output", str(work / output),
        "--params", str(params),
        "--runner", "dask", "--dask_client_address", address, cwd=work,
        env={"DOCKER_HOST": LAUNCHER_HOST}, timeout=600,
    )  # fmt: skip


def _same_as_local(work: Path, output: str) -> None:
    for table in ("tasks", "rejections"):
        assert _ids(work / output, table) == _ids(work / "local", table), table
    summary = json.loads((work / output / "summary.json").read_text())
    local = json.loads((work / "local" / "summary.json").read_text())
    assert summary["kept"] == local["kept"] and summary["rejected"] == local["rejected"]


# --- the cases ---------------------------------------------------------------------------------


def test_a_worker_reaches_docker_through_its_own_docker_host(mined, tmp_path):
    """The worker's DOCKER_HOST (a forwarder here) carries every container of the run; the
    launcher's DOCKER_HOST (the local socket) does not travel to the worker."""
    work, _ = mined
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")  # validated afresh
    forwarder = Forwarder()
    try:
        with dask_cluster(tmp_path / "dask", forwarder.url) as address:
            assert forwarder.connections == 0
            proc = _validate_on(work, address, "through-forwarder", params)
    finally:
        forwarder.close()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    # A sandbox per bundle (environment, validate): each connects, and containers stream.
    assert forwarder.connections >= 2, forwarder.connections
    _same_as_local(work, "through-forwarder")


def test_sandbox_docker_host_in_params_overrides_a_workers_docker_host(mined, tmp_path):
    """The worker's own DOCKER_HOST points at nothing; params' sandbox.docker_host (the
    forwarder) is what the worker uses, and the run is the local runner's."""
    work, _ = mined
    forwarder = Forwarder()
    params = write_params(
        tmp_path / "params.yaml", tmp_path / "cache", f"sandbox:\n  docker_host: {forwarder.url}\n"
    )
    try:
        with dask_cluster(tmp_path / "dask", f"tcp://127.0.0.1:{_dead_port()}") as address:
            proc = _validate_on(work, address, "through-params", params)
    finally:
        forwarder.close()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert forwarder.connections >= 2, forwarder.connections
    _same_as_local(work, "through-params")


def test_a_worker_whose_docker_host_answers_nothing_rejects_in_one_line(mined, tmp_path):
    """No engine behind the worker's DOCKER_HOST: every candidate is a ``sandbox_unavailable``
    rejection whose one line names the address and DOCKER_HOST; no hang, no traceback."""
    work, _ = mined
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")
    dead = f"tcp://127.0.0.1:{_dead_port()}"
    started = time.monotonic()
    with dask_cluster(tmp_path / "dask", dead) as address:
        proc = _validate_on(work, address, "nowhere", params)
    assert time.monotonic() - started < 180
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    candidates = sorted(_ids(work / "local", "tasks") + _ids(work / "local", "rejections"))
    assert _ids(work / "nowhere", "rejections") == candidates
    assert not (work / "nowhere" / "tasks").exists() or not _ids(work / "nowhere", "tasks")
    frame = pl.read_parquet(work / "nowhere" / "rejections" / "*.parquet")
    assert set(frame["reason"]) == {"sandbox_unavailable"}
    for detail in frame["detail"]:
        assert "\n" not in detail
        assert f"no engine answers at {dead} (DOCKER_HOST on " in detail, detail
        assert "Connection refused" in detail, detail


def test_a_command_whose_engine_goes_silent_is_cut_after_its_timeout(docker_engine, monkeypatch):
    """The way to a remote engine goes silent under a running command (nothing is closed, no
    byte passes): the watchdog's kill cannot reach the engine, so the command's output is cut
    KILL_GRACE_S after its timeout and the session is broken (a sandbox_error rejection, never
    cached): no thread, so no Beam bundle, waits on that engine for ever."""
    monkeypatch.setattr(docker_sandbox, "KILL_GRACE_S", 2.0)
    # The marker only the command's output holds (the request carries the unexpanded form).
    forwarder = Forwarder(silent_after=b"went-2-silent")
    sandbox = docker_sandbox.DockerSandbox(docker_host=forwarder.url)
    try:
        with sandbox.session(SessionSpec(image=base_image_tag("3.11"))) as session:
            ready = session.exec("echo ready", timeout_s=30, workdir="/")
            assert ready.exit_code == 0 and ready.output == "ready\n"
            started = time.monotonic()
            with pytest.raises(SandboxBroken, match="went silent"):
                session.exec("echo went-$((1+1))-silent; sleep 120", timeout_s=3, workdir="/")
            took = time.monotonic() - started
            assert not forwarder.flowing.is_set()  # it was silent all along
            forwarder.flowing.set()  # the way back: the container is removed as usual
        assert 3 + 2 <= took < 3 + 2 + 15, took
    finally:
        forwarder.flowing.set()
        sandbox.close()
        forwarder.close()


def test_where_the_engine_is_comes_from_params_else_this_processs_environment(
    monkeypatch, tmp_path
):
    """``client_kwargs`` reads the environment of the process that connects (a worker's own);
    sandbox.docker_host replaces DOCKER_HOST, and TLS settings apply to either (``docker -H``)."""
    for name in ("cert.pem", "key.pem", "ca.pem"):
        (tmp_path / name).write_text("not read until a connection is made\n")
    monkeypatch.setenv("DOCKER_HOST", "tcp://worker-engine.example:2376")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path))
    own = docker_sandbox.client_kwargs(None)
    assert own["base_url"] == "tcp://worker-engine.example:2376" and own["tls"].verify
    given = docker_sandbox.client_kwargs("tcp://params-engine.example:2376")
    assert given["base_url"] == "tcp://params-engine.example:2376"
    assert given["tls"].cert == (str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    host = socket.gethostname()
    assert docker_sandbox.engine_address(None) == (
        f"tcp://worker-engine.example:2376 (DOCKER_HOST on {host})"
    )
    assert docker_sandbox.engine_address("ssh://me@box") == "ssh://me@box (sandbox.docker_host)"
    monkeypatch.delenv("DOCKER_HOST")
    local = docker_sandbox.engine_address(None)
    assert local.endswith(f"(the local socket: no DOCKER_HOST on {host})"), local


def test_an_ssh_docker_host_says_what_it_needs(monkeypatch):
    """ssh:// hosts: without paramiko (docker[ssh]) the one line says so; with it, the host."""
    monkeypatch.setenv("DOCKER_HOST", "ssh://nobody@127.0.0.1:1")
    with pytest.raises(docker_sandbox.SandboxUnavailable) as caught:
        docker_sandbox.connect()
    message = str(caught.value)
    assert "\n" not in message
    assert "no engine answers at ssh://nobody@127.0.0.1:1 (DOCKER_HOST on " in message
    try:
        import paramiko  # noqa: F401
    except ImportError:
        assert "pip install 'docker[ssh]'" in message
