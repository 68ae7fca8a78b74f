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
import functools
import io
import os
import queue
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from trajforge.schemas.errors import SandboxUnavailable
from trajforge.schemas.params import size_bytes
from trajforge.verifiers.sandbox import usage
from trajforge.verifiers.sandbox.base import (
    BASE_ENV,
    GRADING_CAPABILITIES,
    MISSING,
    NOT_A_FILE,
    REPO_DIR,
    TOO_LARGE,
    BuildResult,
    ExecResult,
    FileRead,
    ImageBuild,
    ImageInfo,
    Limits,
    OutputCapture,
    RegistryError,
    SandboxBroken,
    SessionSpec,
)
from trajforge.verifiers.sandbox.build_stream import BuildLines
from trajforge.verifiers.sandbox.containers import (
    LABEL,
    LIVE,
    OTHER_HOST,
    OWNER_LABEL,
    OWNER_START_LABEL,
    SIGKILLED,
    STOP_SETTLE_S,
    Sweep,
    iso_seconds,
    needs_registry,
    owner_state,
    process_start,
    split_image,
)
from trajforge.verifiers.sandbox.containers import says as _says
from trajforge.verifiers.sandbox.ready import (
    hosts,
    not_ready,
    ready_file,
    switches_user,
    wait_argv,
)

SCRATCH = "/tmp"
READ_CHUNK = 1024 * 1024
KILL_GRACE_S = 30.0  # after a command's timeout, how long its output may take to end
REGISTRY_TIMEOUT_S = 3600.0  # a whole push or pull
REGISTRY_IDLE_S = 120.0  # the engine reports progress every moment; this much silence is a dead end
# Go's os.FileMode type bits (dir, symlink, device, pipe, socket, char device, irregular), as the
# engine reports a path's mode: any of them set means "not a regular file".
GO_MODE_TYPE = (1 << 31) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)


def connect(docker_host: str | None = None):  # -> docker.DockerClient
    """A client of the engine ``client_kwargs`` names, checked with a ping."""
    import docker  # imported here so non-Docker runs never need an engine

    try:
        client = docker.DockerClient(**client_kwargs(docker_host))
        client.ping()
    except Exception as exc:
        raise SandboxUnavailable(
            f"docker: no engine answers at {engine_address(docker_host)} ({_why(exc)}); "
            "start one there (`make setup` installs and starts dockerd) or point "
            "sandbox.docker_host or DOCKER_HOST at one"
        ) from None
    return client


def client_kwargs(docker_host: str | None) -> dict:
    """Where the engine is, read in the process that connects (each Dask worker reads its own
    environment, never the launcher's): ``sandbox.docker_host`` when set, else DOCKER_HOST, else
    the local socket. TLS comes from DOCKER_TLS_VERIFY / DOCKER_CERT_PATH either way, as for
    ``docker -H``."""
    import docker

    kwargs = docker.utils.kwargs_from_env()
    if docker_host:
        kwargs["base_url"] = docker_host
    return kwargs


def engine_address(docker_host: str | None) -> str:
    """The engine ``client_kwargs`` picks, and what picked it (for one-line errors)."""
    if docker_host:
        return f"{docker_host} (sandbox.docker_host)"
    where = socket.gethostname()
    if os.environ.get("DOCKER_HOST"):
        return f"{os.environ['DOCKER_HOST']} (DOCKER_HOST on {where})"
    return f"unix:///var/run/docker.sock (the local socket: no DOCKER_HOST on {where})"


def _why(exc: Exception) -> str:
    """Why an engine did not answer, in a few words: the operating system's error beneath
    docker-py's and requests' wrappers when there is one (refused, no such file, timed out)."""
    said = (str(exc).splitlines() or [""])[0]
    if "paramiko" in said:  # docker-py reaches ssh:// hosts through paramiko only
        return "ssh:// needs paramiko: pip install 'docker[ssh]'"
    seen: set[int] = set()
    causes: list[BaseException] = [exc]
    while causes:
        cause = causes.pop(0)
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            return f"{cause.__class__.__name__}: {cause.strerror}"
        if isinstance(cause, TimeoutError) or "timed out" in str(cause).lower():
            return "timed out"
        nested = [cause.__cause__, cause.__context__, getattr(cause, "reason", None), *cause.args]
        causes.extend(c for c in nested if isinstance(c, BaseException))
    return f"{exc.__class__.__name__}: {said[:200]}" if said else exc.__class__.__name__


def _api_client(docker_host: str | None, timeout_s: int):  # -> docker.APIClient
    """A low-level client of the same engine with its own read timeout (for long builds)."""
    import docker

    return docker.APIClient(timeout=timeout_s, **client_kwargs(docker_host))


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
        stream, cutter, cut = None, None, threading.Event()
        try:
            with _engine("running a command"):
                stream = api.exec_start(exec_id, socket=True)
                # A killed command's output ends at once. One that does not (the engine, or the
                # way to it, went silent) is cut: nobody waits past timeout_s + KILL_GRACE_S.
                cutter = threading.Timer(timeout_s + KILL_GRACE_S, _cut, (stream, cut))
                cutter.start()
                for _, chunk in _frames(stream):
                    capture.add(chunk)
        except SandboxBroken:
            if not self.killed:
                raise
        finally:
            watchdog.cancel()
            if cutter is not None:
                cutter.cancel()
            _close_stream(stream)
        if cut.is_set():
            raise SandboxBroken(
                f"docker: the command's output had not ended {KILL_GRACE_S:.0f} s after its "
                f"{timeout_s:.0f} s timeout killed it (the engine, or the way to it, went silent)"
            )
        exit_code = -9 if self.killed else self._exit_code(exec_id)
        usage.record(usage.RUN, time.monotonic() - started)
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
            # A command SIGKILLed (137) with its container may end a moment before the engine
            # records the container stopped: look again before calling it the command's own exit.
            settle = time.monotonic() + (STOP_SETTLE_S if info.get("ExitCode") == SIGKILLED else 0)
            while state.get("Running") and time.monotonic() < settle:
                time.sleep(0.1)
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


def _frames(stream) -> Iterator[tuple[int, bytes]]:
    """(stream id, bytes) of an exec's multiplexed output, until the engine ends it.

    The first frames may already sit in the HTTP response's read buffer, read with the upgrade's
    headers (through a TCP engine the two often arrive in one segment); docker-py hands back the
    raw socket behind that buffer, so they are taken from the buffer first, then from the socket.
    """
    from docker.utils.socket import read

    pending = bytearray(_buffered(stream))

    def fill(size: int) -> bool:
        while len(pending) < size:
            chunk = read(stream, 65536)
            if not chunk:
                return False
            pending.extend(chunk)
        return True

    while fill(8):
        kind, size = struct.unpack(">BxxxL", bytes(pending[:8]))
        del pending[:8]
        if not fill(size):
            if pending:
                yield kind, bytes(pending)
            return
        yield kind, bytes(pending[:size])
        del pending[:size]


def _buffered(stream) -> bytes:
    """What the exec's HTTP response read past its headers and holds in its buffer (never waits:
    the socket is read without blocking, and what is not there yet is left to ``_frames``)."""
    response = getattr(stream, "_response", None)
    reader = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    sock = getattr(stream, "_sock", None)
    if reader is None or sock is None:
        return b""
    timeout = sock.gettimeout()
    try:
        sock.setblocking(False)
        return reader.read1(1 << 20) or b""
    except (BlockingIOError, OSError, ValueError):
        return b""
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)


def _cut(stream, cut: threading.Event) -> None:
    """End a read of ``stream`` that the engine never ends (a blocked read returns at once)."""
    cut.set()
    with contextlib.suppress(Exception):
        getattr(stream, "_sock", stream).shutdown(socket.SHUT_RDWR)


def _close_stream(stream) -> None:
    """Close an exec's socket and the HTTP response it came with (docker-py keeps it on it)."""
    if stream is None:
        return
    for closable in (stream, getattr(stream, "_response", None)):
        with contextlib.suppress(Exception):
            if closable is not None:
                closable.close()


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
    """Fresh containers on demand; ``spares`` per image (default one; 0: none) are started
    ahead so nobody waits for them (a reward service keeps one per concurrent request).

    A spare is a container nobody has used: handing it out is the same as starting it then. It
    is handed out once, and every used container is removed (in the background); one is never
    returned to the pool, since what a patch wrote outside the repository would outlive it
    (docs/security.md). ``close`` removes the spares, those still starting included.
    """

    name = "docker"

    def __init__(
        self, limits: Limits | None = None, docker_host: str | None = None, spares: int = 1
    ) -> None:
        self.limits = limits or Limits()
        self.spares_per_image = max(0, spares)
        self.docker_host = docker_host
        self.client = connect(docker_host)
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.owner_start = process_start(os.getpid()) or ""
        # None: not tried yet; False: the storage driver cannot cap a container's writable layer.
        self.layer_limit: bool | None = None
        remove_leftovers(self.client)  # a killed earlier run must not hold resources
        self.background = ThreadPoolExecutor(
            max_workers=max(2, self.spares_per_image), thread_name_prefix="docker-bg"
        )
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

    def build_image(self, build: ImageBuild) -> BuildResult:
        """``docker build`` of the recipe; the build is cancelled past ``build.timeout_s``.

        The stream is read in a thread the caller waits for at most the timeout: a build that
        prints nothing does not always trip the read timeout (seen under load), and a caller
        must never wait longer than it asked."""
        context = with_dockerfile(build.context, build.dockerfile)
        deadline = time.monotonic() + build.timeout_s
        # The read timeout also bounds a build that prints nothing for that long.
        api = _api_client(self.docker_host, timeout_s=int(build.timeout_s) + 1)
        lines = BuildLines()  # each stream's pieces joined into its own lines
        state = {"ok": False, "timed_out": False}

        def read() -> None:
            try:
                stream = api.build(
                    fileobj=io.BytesIO(context), custom_context=True, tag=build.tag,
                    buildargs=build.build_args, labels=build.labels or None, rm=True,
                    forcerm=True, decode=True,
                    container_limits={
                        "memory": size_bytes("sandbox.memory", self.limits.memory)
                    },
                )  # fmt: skip
                for chunk in stream:
                    if "stream" in chunk:
                        lines.add(chunk["stream"])
                    if "error" in chunk:
                        lines.say(f"error: {chunk['error']}")
                        state["ok"] = False  # an ID seen before was a stage's, not the image's
                        break
                    if "aux" in chunk and "ID" in chunk["aux"]:
                        state["ok"] = True  # (a multi-stage recipe reports one per stage)
                    if time.monotonic() > deadline:
                        state["timed_out"] = True
                        break
            except Exception as exc:  # the engine, or the read timeout of a silent build
                state["ok"] = False
                state["timed_out"] = time.monotonic() > deadline
                lines.say(f"docker build failed: {exc.__class__.__name__}: {str(exc)[:300]}")

        reader = threading.Thread(target=read, name=f"build {build.tag}", daemon=True)
        reader.start()
        reader.join(build.timeout_s + 5)
        if reader.is_alive():  # given up on: the engine may finish it, nobody uses it
            state["ok"], state["timed_out"] = False, True
        api.close()  # a build still running is cancelled when its client goes
        log = [line for line in lines.text() if not _builder_noise(line)]
        if state["timed_out"]:
            log.append(f"build timed out after {build.timeout_s:.0f} s")
        ok = bool(state["ok"]) and not state["timed_out"]
        usage.record(usage.BUILD, time.monotonic() - (deadline - build.timeout_s))
        return BuildResult(ok=ok, log="\n".join(log), timed_out=bool(state["timed_out"]))

    def image_info(self, image: str) -> ImageInfo | None:
        import docker.errors

        try:
            attrs = self.client.api.inspect_image(image)
            history = self.client.api.history(image)
        except docker.errors.ImageNotFound:
            return None
        return ImageInfo(
            image_id=attrs["Id"],
            repo_digests=tuple(attrs.get("RepoDigests") or ()),
            layers=layer_sizes(attrs, history),
            labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
            created=iso_seconds(attrs.get("Created")),
            tagged=iso_seconds((attrs.get("Metadata") or {}).get("LastTagTime")),
        )

    def push_image(self, image: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> str:
        """``docker push`` within ``timeout_s``; the repo digest the registry gave the image, so a
        task can name its environment by content."""
        repository, tag = split_image(image)
        needs_registry(image, "push")
        if not self.has_image(image):
            raise RegistryError(
                f"registry: cannot push {image}: no such image here; build or pull it first"
            )
        push = functools.partial(self.client.api.push, repository, tag, stream=True, decode=True)
        said = self._registry_stream("pushing", image, push, timeout_s)
        error = _stream_error(said)
        if error:
            raise _registry_error("pushing", image, error)
        pushed = next((c["aux"]["Digest"] for c in said if "Digest" in (c.get("aux") or {})), "")
        with _engine(f"reading the digest of {image}"):
            digests = self.client.api.inspect_image(image).get("RepoDigests") or []
        ours = [d for d in digests if d.partition("@")[0] == repository]
        digest = next((d for d in ours if d.endswith(f"@{pushed}")), ours[0] if ours else "")
        if not digest and pushed:
            digest = f"{repository}@{pushed}"
        if not digest:
            raise _registry_error("pushing", image, "the registry answered without a digest")
        return digest

    def pull_image(self, image: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> bool:
        """``docker pull`` within ``timeout_s``; False when the registry has no such manifest.

        Only names with a registry host are pulled: ``trajforge-env:<id>`` is never looked up
        on Docker Hub, where anyone could have published an image under that name.
        """
        import docker.errors

        repository, tag = split_image(image)
        needs_registry(image, "pull")
        pull = functools.partial(self.client.api.pull, repository, tag, stream=True, decode=True)
        try:
            said = self._registry_stream("pulling", image, pull, timeout_s)
        except docker.errors.NotFound as exc:  # raised before any stream: no such manifest
            if _refused(str(exc)):
                raise _registry_error("pulling", image, _engine_says(exc)) from None
            return False
        error = _stream_error(said)
        if error and _unknown(error) and not _refused(error):
            return False
        if error:
            raise _registry_error("pulling", image, error)
        return self.has_image(image)

    def remove_image(self, image: str) -> None:
        """Untag ``image`` (the image itself goes with its last tag); nothing if it is not here.
        An image a container still uses is refused by the engine (SandboxBroken)."""
        import docker.errors

        try:
            with _engine(f"removing {image}"):
                self.client.api.remove_image(image)
        except SandboxBroken as exc:
            if isinstance(exc.__cause__, docker.errors.ImageNotFound):
                return
            raise

    def list_images(self, label: str) -> list[str]:
        """Tags of the local images that carry ``label`` (any value), sorted."""
        with _engine("listing images"):
            found = self.client.api.images(filters={"label": label})
        tags = {tag for image in found for tag in image.get("RepoTags") or ()}
        return sorted(tags - {"<none>:<none>"})

    def storage_path(self) -> str | None:
        """The engine's data root when the engine is on this machine (a unix socket)."""
        base_url = client_kwargs(self.docker_host).get("base_url") or "unix://"
        if not str(base_url).startswith(("unix://", "http+unix://")):
            return None
        with _engine("reading the engine's data root"):
            root = self.client.info().get("DockerRootDir") or ""
        return root if root and os.path.isdir(root) else None

    def container_image_ids(self) -> set[str]:
        """Ids of the images any container here uses, running or stopped: never removed."""
        with _engine("listing containers"):
            return {c["ImageID"] for c in self.client.api.containers(all=True) if c.get("ImageID")}

    def image_layers(self) -> dict[str, tuple[str, ...]]:
        """Every local image's layers (diff ids, base first) by image id: an image whose layers
        begin with all of another's is built on it."""
        import docker.errors

        with _engine("listing images"):
            ids = sorted({image["Id"] for image in self.client.api.images()})
        layers: dict[str, tuple[str, ...]] = {}
        for image_id in ids:
            try:
                with _engine(f"inspecting {image_id}"):
                    attrs = self.client.api.inspect_image(image_id)
            except SandboxBroken as exc:
                if isinstance(exc.__cause__, docker.errors.ImageNotFound):
                    continue  # removed meanwhile
                raise
            layers[image_id] = tuple((attrs.get("RootFS") or {}).get("Layers") or ())
        return layers

    def _registry_stream(
        self, doing: str, image: str, start: Callable[[], Iterator[dict]], timeout_s: float
    ) -> list[dict]:
        """What the engine said while ``doing`` (pushing, pulling), read within the time limits;
        an engine error or a timeout is a RegistryError (docker.errors.NotFound passes through:
        the caller knows what a missing manifest means)."""
        import docker.errors

        try:
            return list(_within(start, timeout_s))
        except TimeoutError as exc:
            raise RegistryError(
                f"registry: {doing} {image} {exc}; check that the registry answers "
                "(environment.registry) or retry"
            ) from None
        except docker.errors.NotFound:
            raise
        except Exception as exc:  # the engine refused before streaming (docker.errors.APIError)
            raise _registry_error(doing, image, _engine_says(exc)) from None

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
            self.closed = True  # from here on no spare is started (``_fresh_container``)
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
            queue = self.spares.setdefault(f"{spec.image}\0{spec.grading}", [])
            spare = queue.pop(0) if queue else None
            while len(queue) < self.spares_per_image and not self.closed:
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
        """A container of ``spec``, handed out once its image's entrypoint says it is ready."""
        container = self._run(spec)
        path = ready_file((container.attrs.get("Config") or {}).get("Labels"))
        if path is not None:
            code, _ = container.exec_run(wait_argv(path), user="root")
            if code != 0:
                _remove(container)
                raise SandboxBroken(not_ready(spec.image, path))
        return container

    def _image_labels(self, image: str) -> dict[str, str]:
        """An image's labels ({} when it is not here: the run says what is missing)."""
        import docker.errors

        try:
            with _engine("reading an image's labels"):
                found = self.client.images.get(image)
        except docker.errors.ImageNotFound:
            return {}
        return dict((found.attrs.get("Config") or {}).get("Labels") or {})

    def _run(self, spec: SessionSpec):
        import docker.errors
        from docker.types import DriverConfig, Mount

        labels = self._image_labels(spec.image)
        # A grading session, or any of an image whose entrypoint starts a service as its own
        # user, keeps GRADING_CAPABILITIES (read from the image: a tag names one).
        switches = spec.grading or switches_user(labels)
        options: dict = dict(
            detach=True,
            init=True,
            network_mode="bridge" if spec.network else "none",
            cap_drop=["ALL"],
            cap_add=list(GRADING_CAPABILITIES) if switches else None,
            extra_hosts=hosts(labels) or None,  # the names its suite reaches services by
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


def with_dockerfile(context: bytes, dockerfile: str) -> bytes:
    """The build context tar with ``Dockerfile`` added at its root."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        with tarfile.open(fileobj=io.BytesIO(context), mode="r") as source:
            for member in source.getmembers():
                tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _builder_noise(line: str) -> bool:
    """The legacy builder's bookkeeping lines (container and layer ids): different every build."""
    text = line.strip()
    return not text or text.startswith(("---> ", "Removing intermediate container"))


def layer_sizes(attrs: dict, history: list[dict]) -> tuple[tuple[str, int], ...]:
    """(diff id, bytes) per layer, base first.

    ``history`` lists the build steps newest first; the steps that made a layer, oldest first,
    line up with ``RootFS.Layers``. A step made one when it wrote bytes, ran a command, copied
    files or set a work directory; metadata steps (ENV, LABEL, ARG...) made none.
    """
    diff_ids = list((attrs.get("RootFS") or {}).get("Layers") or [])
    steps = [step for step in reversed(history) if _made_layer(step)]
    if len(steps) != len(diff_ids):  # an engine that records steps otherwise: the sized ones
        sized = iter(step for step in reversed(history) if step.get("Size", 0) > 0)
        steps = [{"Size": 0} if d == EMPTY_LAYER else next(sized, {"Size": 0}) for d in diff_ids]
    return tuple(
        (diff_id, int(step.get("Size") or 0))
        for diff_id, step in zip(diff_ids, steps, strict=False)
    )


EMPTY_LAYER = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"


def _made_layer(step: dict) -> bool:
    created_by = step.get("CreatedBy") or ""
    if step.get("Size", 0) > 0 or "#(nop)" not in created_by:
        return True
    return any(f"#(nop) {word}" in created_by for word in ("COPY", "ADD", "WORKDIR"))


def _running(container) -> bool:
    try:
        container.reload()
    except Exception:
        return False
    return container.status == "running"


def _remove(container) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True, v=True)  # v: its /tmp volume too


# --- registries --------------------------------------------------------------------------------

_DONE = object()


def _within(start: Callable[[], Iterator[dict]], timeout_s: float) -> Iterator[dict]:
    """The engine's messages, read in a thread (as base_image's pull): TimeoutError when it says
    nothing for REGISTRY_IDLE_S or the whole takes over ``timeout_s``. A dead registry fails
    fast; the engine's own retries and dial timeouts do not hold the caller."""
    messages: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for message in start():
                messages.put(message)
        except Exception as exc:
            messages.put(exc)
        messages.put(_DONE)

    threading.Thread(target=pump, daemon=True, name="docker-registry").start()
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            message = messages.get(timeout=max(min(REGISTRY_IDLE_S, left), 0.0))
        except queue.Empty:
            if left <= REGISTRY_IDLE_S:
                raise TimeoutError(f"timed out after {timeout_s:.0f} s") from None
            raise TimeoutError(f"got no word for {REGISTRY_IDLE_S:.0f} s") from None
        if message is _DONE:
            return
        if isinstance(message, Exception):
            raise message
        yield message


def _stream_error(said: list[dict]) -> str:
    """The first error the engine reported inside a push or pull stream, or ""."""
    for message in said:
        error = message.get("error") or (message.get("errorDetail") or {}).get("message")
        if error:
            return str(error)
    return ""


def _engine_says(exc: Exception) -> str:
    """The engine's own words of an APIError (its explanation), else the exception's first line."""
    said = str(getattr(exc, "explanation", None) or "").strip()
    if said:
        return said.splitlines()[0]
    return f"{exc.__class__.__name__}: {(str(exc).splitlines() or [''])[0]}"


def _unknown(error: str) -> bool:
    text = error.lower()
    return "manifest unknown" in text or "not found" in text or "name unknown" in text


def _refused(error: str) -> bool:
    text = error.lower()
    return "denied" in text or "unauthorized" in text or "forbidden" in text


def _registry_error(doing: str, image: str, why: str) -> RegistryError:
    first = (why.strip().splitlines() or [""])[0][:300]
    if _refused(first):
        hint = "log in to the registry (docker login) or check its permissions"
    else:
        hint = "check that the registry answers and accepts it (environment.registry)"
    return RegistryError(f"registry: {doing} {image} failed ({first}); {hint}")


# --- owners and leftovers ----------------------------------------------------------------------


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
