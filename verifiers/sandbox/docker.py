"""DockerSandbox: untrusted code runs here, locked down.

Every container: no network (unless building an image), all capabilities dropped,
no-new-privileges, memory / CPU / pids limits, and a wall-clock timeout per command that kills the
container. Containers carry a label so ``janitor`` can remove leftovers of a killed run.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from trajforge.schemas.errors import SandboxUnavailable
from trajforge.verifiers.sandbox.base import (
    BASE_ENV,
    REPO_DIR,
    ExecResult,
    Limits,
    OutputCapture,
    SessionSpec,
)

LABEL = "trajforge"
OWNER_LABEL = "trajforge.owner"


def connect(docker_host: str | None = None):  # -> docker.DockerClient
    import docker  # imported here so non-Docker runs never need an engine

    try:
        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        client.ping()
    except Exception as exc:
        where = docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise SandboxUnavailable(
            f"docker: no engine answers at {where} ({exc.__class__.__name__}); "
            "run `make setup` (installs and starts dockerd) or set DOCKER_HOST"
        ) from None
    return client


class DockerSession:
    def __init__(self, container, limits: Limits, env: dict[str, str]) -> None:
        self.container = container
        self.limits = limits
        self.env = env
        self.killed = False

    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None:
        self.container.put_archive(dest, tar_bytes)

    def exec(self, command: str, timeout_s: float, workdir: str = REPO_DIR) -> ExecResult:
        api = self.container.client.api
        started = time.monotonic()
        exec_id = api.exec_create(
            self.container.id, ["/bin/sh", "-c", command], workdir=workdir, environment=self.env
        )["Id"]
        watchdog = threading.Timer(timeout_s, self._kill)
        watchdog.start()
        capture = OutputCapture(self.limits.max_output_bytes)
        try:
            for chunk in api.exec_start(exec_id, stream=True):
                capture.add(chunk)
        finally:
            watchdog.cancel()
        exit_code = -9 if self.killed else (api.exec_inspect(exec_id).get("ExitCode") or 0)
        return ExecResult(
            exit_code=exit_code,
            output=capture.text(),
            timed_out=self.killed,
            duration_s=time.monotonic() - started,
            output_bytes=capture.total,
        )

    def read_file(self, path: str) -> bytes | None:
        if self.killed:
            return None
        try:
            stream, _ = self.container.get_archive(path)
        except Exception:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member else None
            return extracted.read() if extracted else None

    def commit(self, tag: str) -> str:
        repository, _, version = tag.partition(":")
        image = self.container.commit(repository=repository, tag=version or "latest")
        return image.id

    def _kill(self) -> None:
        self.killed = True
        with contextlib.suppress(Exception):
            self.container.kill()


class DockerSandbox:
    """Fresh containers on demand; one spare per image is started ahead so nobody waits for it.

    A spare is a container nobody has used: handing it out is the same as starting it then.
    Used containers are removed in the background. ``close`` removes the spares.
    """

    name = "docker"

    def __init__(self, limits: Limits | None = None, docker_host: str | None = None) -> None:
        self.limits = limits or Limits()
        self.client = connect(docker_host)
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        remove_leftovers(self.client)  # a killed earlier run must not hold resources
        self.background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="docker-bg")
        self.spares: dict[str, list[Future]] = {}
        self.lock = threading.Lock()
        self.closed = False
        atexit.register(self.close)

    def has_image(self, image: str) -> bool:
        import docker.errors

        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        return True

    @contextlib.contextmanager
    def session(self, spec: SessionSpec) -> Iterator[DockerSession]:
        container = self._fresh_container(spec)
        session = DockerSession(container, self.limits, {**BASE_ENV, **spec.env})
        try:
            yield session
        finally:
            self.background.submit(_remove, container)

    def close(self) -> None:
        """Remove the spares and wait for background removals (safe to call twice)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            spares = [f for futures in self.spares.values() for f in futures]
            self.spares.clear()
        for future in spares:
            with contextlib.suppress(Exception):
                _remove(future.result())
        self.background.shutdown(wait=True)

    def _fresh_container(self, spec: SessionSpec):
        if spec.network:  # image builds: one-off, never pooled
            return self._start(spec)
        with self.lock:
            queue = self.spares.setdefault(spec.image, [])
            spare = queue.pop() if queue else None
            queue.append(self.background.submit(self._start, spec))
        if spare is not None:
            with contextlib.suppress(Exception):
                return spare.result()
        return self._start(spec)

    def _start(self, spec: SessionSpec):
        return self.client.containers.run(
            spec.image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="bridge" if spec.network else "none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=self.limits.memory,
            memswap_limit=self.limits.memory,
            nano_cpus=int(self.limits.cpus * 1e9),
            pids_limit=self.limits.pids,
            labels={LABEL: "1", OWNER_LABEL: self.owner},
            working_dir="/",
        )


def _remove(container) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True)


def janitor(docker_host: str | None = None, only_dead_owners: bool = True) -> int:
    """Remove trajforge containers left by killed runs; return how many were removed."""
    return remove_leftovers(connect(docker_host), only_dead_owners)


def remove_leftovers(client, only_dead_owners: bool = True) -> int:
    host = socket.gethostname()
    removed = 0
    # The low-level listing returns labels without inspecting each container, so a container
    # that another run removes while we list cannot end this one (docker.errors.NotFound).
    for container in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (container.get("Labels") or {}).get(OWNER_LABEL, "")
        owner_host, _, pid = owner.partition(":")
        if only_dead_owners and owner_host == host and pid.isdigit() and _alive(int(pid)):
            continue
        if only_dead_owners and owner_host != host:
            continue  # another machine's run: not ours to judge
        with contextlib.suppress(Exception):
            client.api.remove_container(container["Id"], force=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
