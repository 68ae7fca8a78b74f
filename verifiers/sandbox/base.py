"""The Sandbox interface: a fresh, isolated environment per session, reached only through this API.

Workers on Dataflow/Flink/Spark cannot be assumed to run Docker, so everything that executes
untrusted code goes through a Sandbox (the local Docker socket, a remote engine via DOCKER_HOST, or
another backend) and nothing else.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from trajforge.schemas.errors import UserError
from trajforge.schemas.params import SandboxParams, ValidateParams

# Paths inside every sandbox (the local backend maps them under its temporary directory).
REPO_DIR = "/repo"
# The whole environment a command sees: nothing of the host's (no keys, no tokens) leaks in.
BASE_ENV = {
    "PATH": "/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str  # stdout and stderr interleaved; the head and tail when over the cap
    timed_out: bool
    duration_s: float
    output_bytes: int = 0  # how much the command printed in all


@dataclass(frozen=True)
class Limits:
    memory: str = SandboxParams.memory  # the one set of defaults: schemas/params.py
    cpus: float = SandboxParams.cpus
    pids: int = SandboxParams.pids
    max_output_bytes: int = ValidateParams.max_log_bytes
    tmp_size: str = SandboxParams.tmp_size  # /tmp of a test session: a tmpfs (a disk quota)
    writable_layer_size: str = SandboxParams.writable_layer_size
    max_read_bytes: int = SandboxParams.max_read_bytes  # a file read back above it is refused


class SandboxBroken(UserError):
    """The sandbox failed, not the code under test: the container died or vanished, the engine
    erred. Nothing computed in such a session is a verdict, so nothing of it may be cached; stages
    turn it into a ``sandbox_error`` rejection (a rerun of the stage tries again)."""

    reason = "sandbox_error"


# Why a file was not read back from a session (FileRead.problem).
MISSING = "missing"
TOO_LARGE = "too_large"  # over Limits.max_read_bytes: never read, the host's memory stays bounded
NOT_A_FILE = "not_a_file"  # a symlink, a directory, a device: never followed


@dataclass(frozen=True)
class FileRead:
    data: bytes | None  # None unless problem == ""
    problem: str = ""  # "" (read) | MISSING | TOO_LARGE | NOT_A_FILE
    size: int = 0  # the size the sandbox reported (of the link itself for a link)


# The capabilities a grading session keeps (every other one is dropped): root changes to the
# tests' user, which then holds none (verifiers/grader/). Every session of an image whose
# services run as their own user keeps them too (``ready.switches_user``).
GRADING_CAPABILITIES = ("SETUID", "SETGID")


@dataclass(frozen=True)
class SessionSpec:
    image: str
    network: bool = False  # only image builds get a network; test runs never do
    env: dict[str, str] = field(default_factory=dict)
    grading: bool = False  # keeps GRADING_CAPABILITIES, so the grader can run tests as a user


class Session(Protocol):
    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None: ...

    def exec(self, command: str, timeout_s: float, workdir: str = REPO_DIR) -> ExecResult: ...

    def read_file(self, path: str) -> bytes | None:
        """The regular file's bytes; None when missing, not a regular file, or over the cap."""
        ...

    def read_file_checked(self, path: str) -> FileRead:
        """Like ``read_file``, saying why nothing was read; reads at most Limits.max_read_bytes."""
        ...

    def commit(self, tag: str) -> str: ...


class Sandbox(Protocol):
    name: str

    def session(self, spec: SessionSpec) -> AbstractContextManager[Session]: ...

    def has_image(self, image: str) -> bool: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ImageBuild:
    """How an environment image is made: a Dockerfile and the files it copies, nothing else.

    ``context`` is a tar of the build context without the Dockerfile (the backend adds it), so
    the same recipe builds under Docker, podman, or a user's plain ``docker build``.
    """

    tag: str
    dockerfile: str
    context: bytes
    build_args: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 1200.0
    # set on the image by the builder (``--label``), over any the Dockerfile sets
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    log: str  # the builder's output, every step
    timed_out: bool = False


@dataclass(frozen=True)
class ImageInfo:
    image_id: str  # "sha256:..." of the image's config: the same wherever it is pulled
    repo_digests: tuple[str, ...]  # "<registry>/<name>@sha256:..." once pushed or pulled
    layers: tuple[tuple[str, int], ...]  # (layer diff id, bytes), base layer first
    labels: dict[str, str] = field(default_factory=dict)
    created: float = 0.0  # when the image was made (epoch seconds; 0 when the engine says none)
    # when a build last tagged it (Docker's LastTagTime; 0 where the engine keeps none): a build
    # served whole from the cache keeps the first build's ``created`` but tags the image anew
    tagged: float = 0.0


class RegistryError(UserError):
    """A registry is down, refuses a push, or serves an image whose digest does not match."""

    reason = "registry_error"


@runtime_checkable
class ImageStore(Protocol):
    """What a backend with real images offers (Docker, podman): builds from recipes, a registry.

    The local backend has none of it; it installs into a venv through a session instead.
    """

    def build_image(self, build: ImageBuild) -> BuildResult: ...

    def image_info(self, image: str) -> ImageInfo | None:
        """None when the image is not here."""
        ...

    def push_image(self, image: str) -> str:
        """Push ``image`` to the registry its name says; its repo digest (RegistryError)."""
        ...

    def pull_image(self, image: str) -> bool:
        """Pull ``image``; False when the registry does not have it (RegistryError when the
        registry cannot be reached or answers wrongly)."""
        ...

    def remove_image(self, image: str) -> None: ...

    def list_images(self, label: str) -> list[str]:
        """Tags of the local images carrying ``label``."""
        ...

    def storage_path(self) -> str | None:
        """Where the engine keeps images, when that is on this machine (its free space is
        measured before a build: ``faults.check_free_space``); None for a remote engine."""
        ...


class OutputCapture:
    """Keeps the head and the tail of a command's output: errors sit at both ends of a long log."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(len(self.tail) - self.half, 0)]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {cut} bytes cut ...]\n".encode() if cut > 0 else b""
        return bytes(self.head + marker + self.tail).decode("utf-8", "replace")
