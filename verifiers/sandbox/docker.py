"""DockerSandbox: untrusted code runs here, locked down.

Every container: no network (unless building an image), all capabilities dropped,
no-new-privileges, memory / CPU / pids limits, and a wall-clock timeout per command that kills the
container. A test session's /tmp is a size-limited tmpfs, and its writable layer is capped where
the storage driver can (overlay2 on xfs with pquota, btrfs, zfs...; elsewhere it is not). Files
read back are capped in size and never followed through a link.

Containers carry labels naming their owner (host, pid and the process's start time), so
``janitor`` removes only what a dead run left behind; a live run's containers and another host's
are left alone. A container that dies or vanishes under a session raises ``SandboxBroken``: the
caller's run is incomplete, never a verdict.
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
from dataclasses import dataclass

from trajforge.schemas.errors import SandboxUnavailable
from trajforge.schemas.params import size_bytes
from trajforge.verifiers.sandbox.base import (
    BASE_ENV,
    MISSING,
    NOT_A_FILE,
    REPO_DIR,
    TOO_LARGE,
    ExecResult,
    FileRead,
    Limits,
    OutputCapture,
    SandboxBroken,
    SessionSpec,
)

LABEL = "trajforge"
OWNER_LABEL = "trajforge.owner"  # "<host>:<pid>"
OWNER_START_LABEL = "trajforge.owner.start"  # the owner's start time: a reused pid is not it
SCRATCH = "/tmp"
READ_CHUNK = 1024 * 1024
# Go's os.FileMode type bits (dir, symlink, device, pipe, socket, char device, irregular), as the
# engine reports a path's mode: any of them set means "not a regular file".
GO_MODE_TYPE = (1 << 31) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)


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


@contextlib.contextmanager
def _engine(doing: str) -> Iterator[None]:
    """Any failure of the engine or of the container while ``doing`` is a SandboxBroken."""
    try:
        yield
    except SandboxBroken:
        raise
    except Exception as exc:  # docker.errors.*, requests' connection errors
        first = (str(exc).splitlines() or [""])[0][:300]
        raise SandboxBroken(f"docker: {doing} failed ({exc.__class__.__name__}: {first})") from exc


class DockerSession:
    def __init__(self, container, limits: Limits, env: dict[str, str]) -> None:
        self.container = container
        self.limits = limits
        self.env = env
        self.killed = False

    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None:
        with _engine("copying files into the container"):
            self.container.put_archive(dest, tar_bytes)

    def exec(self, command: str, timeout_s: float, workdir: str = REPO_DIR) -> ExecResult:
        if self.killed:
            raise SandboxBroken("docker: the container was killed by an earlier timeout")
        api = self.container.client.api
        started = time.monotonic()
        with _engine("starting a command"):
            exec_id = api.exec_create(
                self.container.id, ["/bin/sh", "-c", command], workdir=workdir, environment=self.env
            )["Id"]
        watchdog = threading.Timer(timeout_s, self._kill)
        watchdog.start()
        capture = OutputCapture(self.limits.max_output_bytes)
        try:
            with _engine("running a command"):
                for chunk in api.exec_start(exec_id, stream=True):
                    capture.add(chunk)
        except SandboxBroken:
            if not self.killed:
                raise
        finally:
            watchdog.cancel()
        exit_code = -9 if self.killed else self._exit_code(exec_id)
        return ExecResult(
            exit_code=exit_code,
            output=capture.text(),
            timed_out=self.killed,
            duration_s=time.monotonic() - started,
            output_bytes=capture.total,
        )

    def _exit_code(self, exec_id: str) -> int:
        """The command's exit code, checked: a container that stopped under it broke the run."""
        api = self.container.client.api
        with _engine("reading the command's exit code"):
            info = api.exec_inspect(exec_id)
            for _ in range(40):  # the stream may end a moment before the engine records the exit
                if not info.get("Running"):
                    break
                time.sleep(0.05)
                info = api.exec_inspect(exec_id)
            state = api.inspect_container(self.container.id)["State"]
        if self.killed:  # our own timeout fired meanwhile: a timeout, not a broken sandbox
            return -9
        if not state.get("Running"):
            says = _says(state)
            raise SandboxBroken(f"docker: the container stopped during the command ({says})")
        code = info.get("ExitCode")
        if info.get("Running") or code is None:
            raise SandboxBroken("docker: the engine lost the command's exit code")
        return int(code)

    def read_file(self, path: str) -> bytes | None:
        return self.read_file_checked(path).data

    def read_file_checked(self, path: str) -> FileRead:
        """Streamed and capped: a file over Limits.max_read_bytes is refused before it is read."""
        if self.killed:
            return FileRead(None, MISSING)
        import docker.errors

        cap = self.limits.max_read_bytes
        try:
            stream, stat = self.container.get_archive(path, chunk_size=READ_CHUNK)
        except docker.errors.NotFound as exc:
            if "no such container" in str(exc).lower():
                raise SandboxBroken(f"docker: the container vanished ({exc})") from exc
            return FileRead(None, MISSING)
        except Exception as exc:
            why = exc.__class__.__name__
            raise SandboxBroken(f"docker: reading {path} failed ({why})") from exc
        try:
            size, mode = int(stat.get("size") or 0), int(stat.get("mode") or 0)
            if mode & GO_MODE_TYPE or stat.get("linkTarget"):
                return FileRead(None, NOT_A_FILE, size)
            if size > cap:
                return FileRead(None, TOO_LARGE, size)
            with _engine(f"reading {path}"):
                return _single_file(stream, cap, size)
        finally:
            stream.close()  # stop reading: the rest is never pulled into memory

    def commit(self, tag: str) -> str:
        repository, _, version = tag.partition(":")
        with _engine("committing the container"):
            image = self.container.commit(repository=repository, tag=version or "latest")
        return image.id

    def _kill(self) -> None:
        self.killed = True
        with contextlib.suppress(Exception):
            self.container.kill()


class _TooLarge(Exception):
    pass


class _CappedChunks(io.RawIOBase):
    """A file over an iterator of byte chunks that refuses to pull more than ``limit`` bytes."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self.chunks = iter(chunks)
        self.limit = limit
        self.pulled = 0
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            chunk = next(self.chunks, b"")
            if not chunk:
                return 0
            self.pulled += len(chunk)
            if self.pulled > self.limit:
                raise _TooLarge
            self.pending = chunk
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def _single_file(chunks: Iterator[bytes], cap: int, size: int) -> FileRead:
    """The one regular file of an engine's tar stream, reading at most ``cap`` bytes of it."""
    raw = _CappedChunks(chunks, cap + 64 * 1024)  # the file plus tar headers and padding
    try:
        with tarfile.open(fileobj=raw, mode="r|") as tar:
            member = tar.next()
            if member is None:
                return FileRead(None, MISSING)
            if not member.isfile():
                return FileRead(None, NOT_A_FILE, member.size)
            if member.size > cap:
                return FileRead(None, TOO_LARGE, member.size)
            extracted = tar.extractfile(member)
            data = extracted.read() if extracted else b""
    except _TooLarge:
        return FileRead(None, TOO_LARGE, max(size, cap + 1))
    return FileRead(data, "", len(data))


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
        self.owner_start = process_start(os.getpid()) or ""
        # None: not tried yet; False: the storage driver cannot cap a container's writable layer.
        self.layer_limit: bool | None = None
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
            try:
                self.background.submit(_remove, container)
            except RuntimeError:  # closed meanwhile: remove it now
                _remove(container)

    def disk_limits(self) -> str:
        """Which disk guarantees hold for test sessions here (after a session was started)."""
        tmp = f"{SCRATCH} is a {self.limits.tmp_size} tmpfs"
        if self.layer_limit:
            return f"{tmp}; the writable layer is capped at {self.limits.writable_layer_size}"
        info = self.client.info()
        fs = dict(info.get("DriverStatus") or []).get("Backing Filesystem", "?")
        return (
            f"{tmp}; the writable layer is NOT capped (storage driver {info.get('Driver')} on "
            f"{fs} cannot: storage_opt size needs overlay2 on xfs with pquota, btrfs or zfs)"
        )

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
            with _engine(f"starting a container of {spec.image}"):
                return self._start(spec)
        with self.lock:
            queue = self.spares.setdefault(spec.image, [])
            spare = queue.pop() if queue else None
            queue.append(self.background.submit(self._start, spec))
        if spare is not None:
            with contextlib.suppress(Exception):
                container = spare.result()
                if _running(container):  # a spare removed or killed meanwhile is no spare
                    return container
                _remove(container)
        with _engine(f"starting a container of {spec.image}"):
            return self._start(spec)

    def _start(self, spec: SessionSpec):
        import docker.errors
        from docker.types import DriverConfig, Mount

        options: dict = dict(
            detach=True,
            init=True,
            network_mode="bridge" if spec.network else "none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=self.limits.memory,
            memswap_limit=self.limits.memory,
            nano_cpus=int(self.limits.cpus * 1e9),
            pids_limit=self.limits.pids,
            labels={LABEL: "1", OWNER_LABEL: self.owner, OWNER_START_LABEL: self.owner_start},
            working_dir="/",
        )
        if not spec.network:  # test sessions; image builds keep their whole disk for installs
            # A tmpfs *volume* rather than --tmpfs: the engine's archive API (put_archive,
            # get_archive) sees volumes, but not --tmpfs mounts (Docker < 25).
            # In bytes: the kernel's tmpfs reads neither 1.5g nor 2gb, which params allow.
            tmp_bytes = size_bytes("sandbox.tmp_size", self.limits.tmp_size)
            scratch = DriverConfig(
                "local", {"type": "tmpfs", "device": "tmpfs", "o": f"size={tmp_bytes}"}
            )
            options["mounts"] = [Mount(SCRATCH, None, type="volume", driver_config=scratch)]
            if self.layer_limit is not False:
                try:
                    container = self.client.containers.run(
                        spec.image,
                        ["sleep", "infinity"],
                        storage_opt={"size": self.limits.writable_layer_size},
                        **options,
                    )
                except docker.errors.APIError as exc:
                    if "storage-opt" not in str(exc) and "storage_opt" not in str(exc):
                        raise
                    self.layer_limit = False  # this driver cannot: the tmpfs is the guarantee
                else:
                    self.layer_limit = True
                    return container
        return self.client.containers.run(spec.image, ["sleep", "infinity"], **options)


def _says(state: dict) -> str:
    parts = [f"status {state.get('Status')}", f"exit {state.get('ExitCode')}"]
    if state.get("OOMKilled"):
        parts.append("OOM-killed")
    if state.get("Error"):
        parts.append(str(state["Error"])[:200])
    return ", ".join(parts)


def _running(container) -> bool:
    try:
        container.reload()
    except Exception:
        return False
    return container.status == "running"


def _remove(container) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True, v=True)  # v: its /tmp volume too


# --- owners and leftovers ----------------------------------------------------------------------

LIVE, DEAD, OTHER_HOST = "live", "dead", "other_host"


@dataclass(frozen=True)
class Sweep:
    """What one janitor pass did."""

    removed: int = 0  # containers of dead runs on this host
    live: int = 0  # containers of runs still alive on this host: kept
    other_hosts: int = 0  # containers of another host's runs: kept, not judged from here

    def line(self) -> str:
        return (
            f"removed {self.removed} container(s) of dead runs; kept {self.live} of live runs "
            f"and {self.other_hosts} of other hosts (their runs cannot be checked from here)"
        )


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, /proc/<pid>/stat field 22).

    None when no such process runs. Where /proc is missing, psutil's creation time if installed,
    else "" (unknown: the pid alone decides).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        if os.path.isdir("/proc/self"):
            return None
        return _start_elsewhere(pid)
    except OSError:
        return ""  # exists, unreadable: alive, start unknown
    # The name (field 2) may hold spaces and parentheses: count fields after its last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


def _start_elsewhere(pid: int) -> str | None:
    try:
        import psutil
    except ImportError:
        return "" if _alive(pid) else None
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        return ""


def owner_state(labels: dict[str, str], host: str | None = None) -> str:
    """LIVE when the process that started the container still runs, DEAD when not (or its pid now
    belongs to another process), OTHER_HOST when it ran on another machine (or is unreadable)."""
    owner_host, _, pid = labels.get(OWNER_LABEL, "").partition(":")
    if owner_host != (host or socket.gethostname()):
        return OTHER_HOST
    if not pid.isdigit():
        return DEAD
    started = process_start(int(pid))
    if started is None:
        return DEAD
    expected = labels.get(OWNER_START_LABEL, "")
    if expected and started and expected != started:
        return DEAD  # the pid was reused by a process that started later
    return LIVE


def janitor(docker_host: str | None = None, only_dead_owners: bool = True) -> int:
    """Remove trajforge containers left by dead runs; return how many were removed."""
    return remove_leftovers(connect(docker_host), only_dead_owners).removed


def sweep(docker_host: str | None = None) -> Sweep:
    """The janitor's pass, with what it kept and why (``trajforge janitor``)."""
    return remove_leftovers(connect(docker_host))


def remove_leftovers(client, only_dead_owners: bool = True) -> Sweep:
    """Remove the containers of dead runs on this host (every trajforge container when
    ``only_dead_owners`` is False: only for when no run is alive anywhere on this engine)."""
    host = socket.gethostname()
    removed = live = other = 0
    # The low-level listing returns labels without inspecting each container, so a container
    # that another run removes while we list cannot end this one (docker.errors.NotFound).
    for container in client.api.containers(all=True, filters={"label": LABEL}):
        if only_dead_owners:
            state = owner_state(container.get("Labels") or {}, host)
            if state == LIVE:
                live += 1
                continue
            if state == OTHER_HOST:
                other += 1
                continue
        try:
            client.api.remove_container(container["Id"], force=True, v=True)
        except Exception:  # already gone: its owner removed it meanwhile
            continue
        removed += 1
    return Sweep(removed, live, other)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
