"""PodmanSandbox: the Docker sandbox's guarantees without a daemon, through the ``podman`` CLI.

For hosts (CI runners, HPC nodes, locked-down workers) where no dockerd may run. Every container:
no network (unless building an image), all capabilities dropped, no-new-privileges, memory (swap
included) / CPU / pids limits, an init process, and a wall-clock timeout per command that kills
the container. A test session's /tmp is a size-limited tmpfs, and its writable layer is capped
where the storage driver can (overlay on xfs with pquota). Files read back are capped in size and
never followed through a link. Containers carry Docker's owner labels (``containers.py``), so
leftovers of dead runs are removed the same way; a container that dies or vanishes under a
session raises ``SandboxBroken``.

Environment images are built FROM ``trajforge-base:pyX``; podman keeps its own image store, so
``trajforge base-image --sandbox podman`` (run by ``make setup``) copies or imports it there.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

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
from trajforge.verifiers.sandbox.containers import (
    LABEL,
    SIGKILLED,
    STOP_SETTLE_S,
    Sweep,
    iso_seconds,
    needs_registry,
    owner_labels,
    process_start,
    registry_host,
    says,
    split_image,
    sweep_owned,
)

# The registry naming rules are Docker's own (a name's registry host, its tag).
from trajforge.verifiers.sandbox.ready import (
    WAIT_S,
    hosts,
    not_ready,
    ready_file,
    switches_user,
    wait_argv,
)

PODMAN = "podman"
SCRATCH = "/tmp"
CLI_TIMEOUT_S = 120.0  # one podman call that is not a user's command (run, inspect, rm, cp)
READ_TIMEOUT_S = 300.0  # reading one file back
KILL_GRACE_S = 10.0  # after killing the container, how long `podman exec` may take to notice
REGISTRY_TIMEOUT_S = 3600.0  # a whole push or pull
READ_CHUNK = 1024 * 1024
# runc refuses rlimits above the host's hard limits ("error setting rlimit type 7"), and podman's
# defaults are above them on many hosts: each is min(this, the host's hard limit).
RLIMIT_DEFAULT = 1024 * 1024
# The read, done inside the container: stat does not follow a link, dd opens with O_NOFOLLOW (a
# file swapped for a link after the stat is refused) and O_NONBLOCK (nor does one swapped for a
# FIFO hang the read), and no more than cap + 1 bytes are sent.
READ_SCRIPT = """t=$(stat -c '%F:%s' -- "$1") || exit 3
echo "$t"
case "$t" in "regular file:"*|"regular empty file:"*) ;; *) exit 0 ;; esac
[ "${t##*:}" -le "$2" ] || exit 0
exec dd if="$1" iflag=nofollow,nonblock,count_bytes count=$(($2 + 1)) bs=65536 status=none
"""
# The container's main process. podman's overlay gives every container's / mode 0555 (Docker's is
# 0755), which root without capabilities cannot write to; root owns /, so it may chmod it back.
# This runs well before any `podman exec` can start a command.
MAIN = "chmod 755 / 2>/dev/null; exec sleep infinity"
STAT_FAILED = 3
NOT_THERE = ("No such file", "Not a directory", "Permission denied")  # stat's words: missing
PODMAN_FAILED = (125, 126, 127, 255)  # podman's own exit codes (and runc's, passed through)
LOCAL_REGISTRIES = ("localhost", "127.0.0.1", "[::1]")  # plain HTTP registries: no TLS to verify
# How podman says its storage driver cannot cap a container's writable layer.
NO_LAYER_CAP = ("storage option", "storage-opt", "overlay.size", "quota")
REQUIRED_CONTROLLERS = ("memory", "pids", "cpu")  # memory and swap, pids, cpus
LOCAL_PREFIX = "localhost/"  # what podman puts before a name without a registry


@functools.cache
def scratch_cwd() -> str:
    """Where podman runs: conmon writes files into its working directory (an ``oom`` file when
    the OOM killer fires), which must never be the user's."""
    return tempfile.mkdtemp(prefix="trajforge-podman-")


def podman(*args: str, stdin: bytes | None = None, timeout: float = CLI_TIMEOUT_S):
    """One podman call, its output captured; a hung podman is a SandboxBroken, not a hung run."""
    try:
        return subprocess.run(
            [PODMAN, *args], input=stdin, capture_output=True, timeout=timeout, check=False,
            cwd=scratch_cwd(),
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxBroken(f"podman {args[0]}: {exc.__class__.__name__}: {exc}") from exc


def _start(args: list[str], stderr: int, doing: str) -> subprocess.Popen:
    """A podman call whose output is streamed (exec, read): started, or a SandboxBroken."""
    try:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
            cwd=scratch_cwd(),
        )  # fmt: skip
    except OSError as exc:
        raise SandboxBroken(f"podman: {doing} failed ({exc})") from exc


def _reap(proc: subprocess.Popen) -> None:
    """Never leave a podman call behind: killed if it still runs, always waited for."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _last_line(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]  # podman's error is its last line


def _checked(doing: str, *args: str, stdin: bytes | None = None) -> bytes:
    """stdout of a podman call that must succeed; any failure is a SandboxBroken."""
    proc = podman(*args, stdin=stdin)
    if proc.returncode != 0:
        raise SandboxBroken(f"podman: {doing} failed ({_last_line(proc.stderr)})")
    return proc.stdout


def ulimits() -> list[str]:
    """--ulimit flags runc can set here: within the host's hard limits, and nproc within the
    kernel's pid_max (some kernels refuse more; no more processes can exist anyway)."""
    flags = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(which)[1]
        value = RLIMIT_DEFAULT if hard == resource.RLIM_INFINITY else min(hard, RLIMIT_DEFAULT)
        if name == "nproc":
            value = min(value, _pid_max())
        flags += ["--ulimit", f"{name}={value}:{value}"]
    return flags


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return RLIMIT_DEFAULT


def container_state(cid: str) -> dict | None:
    """The container's State (Status, Running, ExitCode, OOMKilled, Error); None when it is gone."""
    proc = podman("container", "inspect", "--format", "{{json .State}}", cid)
    if proc.returncode != 0:
        if b"no such" in proc.stderr.lower():
            return None
        raise SandboxBroken(f"podman: inspecting the container failed ({_last_line(proc.stderr)})")
    return json.loads(proc.stdout)


def _check_limits_hold() -> None:
    """podman ignores, with a mere warning, a limit whose cgroup controller it cannot use
    (rootless podman on cgroup v1, or v2 without delegation): refuse to run without them."""
    said = _checked("reading podman info", "info", "--format", "{{json .Host.CgroupControllers}}")
    missing = sorted(set(REQUIRED_CONTROLLERS) - set(json.loads(said or b"[]") or ()))
    if missing:
        raise SandboxUnavailable(
            f"podman: cannot enforce the sandbox's limits here (no {', '.join(missing)} cgroup "
            "controller for podman); run it as root or delegate them (cgroup v2)"
        )


def _remove(cid: str) -> bool:
    """Kill and remove the container and its anonymous volumes; False when it was gone."""
    with contextlib.suppress(SandboxBroken):
        return podman("rm", "--force", "--time", "0", "--volumes", cid).returncode == 0
    return False


class PodmanSession:
    def __init__(self, cid: str, limits: Limits, env: dict[str, str]) -> None:
        self.cid = cid
        self.limits = limits
        self.env = env
        self.killed = False

    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None:
        """``podman cp`` from the host: needs no tar in the image and sees the /tmp tmpfs."""
        proc = podman("cp", "-", f"{self.cid}:{dest}", stdin=unpadded(tar_bytes))
        if proc.returncode != 0:
            self._broken("copying files into the container", proc.stderr)

    def exec(self, command: str, timeout_s: float, workdir: str = REPO_DIR) -> ExecResult:
        if self.killed:
            raise SandboxBroken("podman: the container was killed by an earlier timeout")
        started = time.monotonic()
        env = [flag for key, value in self.env.items() for flag in ("-e", f"{key}={value}")]
        args = [PODMAN, "exec", "-w", workdir, *env, self.cid, "/bin/sh", "-c", command]
        proc = _start(args, subprocess.STDOUT, "starting a command")
        watchdog = threading.Timer(timeout_s, self._kill, args=(proc,))
        watchdog.start()
        capture = OutputCapture(self.limits.max_output_bytes)
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read(READ_CHUNK):
                capture.add(chunk)
            code = proc.wait()
        finally:
            watchdog.cancel()
            _reap(proc)
        if not self.killed:
            code = self._exit_code(code)
        usage.record(usage.RUN, time.monotonic() - started)
        return ExecResult(
            exit_code=-9 if self.killed else code,
            output=capture.text(),
            timed_out=self.killed,
            duration_s=time.monotonic() - started,
            output_bytes=capture.total,
        )

    def _exit_code(self, code: int) -> int:
        """The command's exit code, checked: a container that stopped under it broke the run."""
        state = container_state(self.cid)
        # A command SIGKILLed (137) with its container may end a moment before the engine sees
        # the container stopped: look again before calling it the command's own exit.
        deadline = time.monotonic() + (STOP_SETTLE_S if code == SIGKILLED else 0)
        while state is not None and state.get("Running") and time.monotonic() < deadline:
            time.sleep(0.1)
            state = container_state(self.cid)
        if self.killed:  # our own timeout fired meanwhile: a timeout, not a broken sandbox
            return -9
        if state is None:
            raise SandboxBroken("podman: the container vanished during the command")
        if not state.get("Running"):
            raise SandboxBroken(f"podman: the container stopped during the command ({says(state)})")
        return code  # as Docker: a command runc could not start (no such workdir) exits 126/127

    def read_file(self, path: str) -> bytes | None:
        return self.read_file_checked(path).data

    def read_file_checked(self, path: str) -> FileRead:
        """Checked and read inside the container (READ_SCRIPT); at most cap + 1 bytes come out."""
        if self.killed:
            return FileRead(None, MISSING)
        cap = self.limits.max_read_bytes
        args = [PODMAN, "exec", self.cid, "/bin/sh", "-c", READ_SCRIPT, "sh", path, str(cap)]
        proc = _start(args, subprocess.PIPE, f"reading {path}")
        watchdog = threading.Timer(READ_TIMEOUT_S, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None and proc.stderr is not None
            kind, _, size_text = proc.stdout.readline(256).decode(errors="replace").rpartition(":")
            size = int(size_text) if size_text.strip().isdigit() else 0
            data = bytearray()
            while len(data) <= cap and (chunk := proc.stdout.read(READ_CHUNK)):
                data += chunk
            if len(data) > cap:  # it grew past the cap after its size was taken: stop pulling
                proc.kill()
            error = proc.stderr.read().decode(errors="replace")
            code = proc.wait()
        finally:
            watchdog.cancel()
            _reap(proc)
        if kind and kind not in ("regular file", "regular empty file"):
            return FileRead(None, NOT_A_FILE, size)
        if size > cap or len(data) > cap:
            return FileRead(None, TOO_LARGE, max(size, len(data)))
        if code == 0 and kind:
            return FileRead(bytes(data), "", len(data))
        if code == STAT_FAILED and not kind and any(why in error for why in NOT_THERE):
            return FileRead(None, MISSING)
        if kind and code not in PODMAN_FAILED:  # dd failed: the file changed after its stat
            links = "symbolic links" in error
            return FileRead(None, NOT_A_FILE if links else MISSING, size)
        self._broken(f"reading {path}", error)  # podman failed, or the shell could not fork

    def commit(self, tag: str) -> str:
        out = _checked("committing the container", "commit", "--quiet", self.cid, tag)
        return f"sha256:{_last_line(out)}"

    def _broken(self, doing: str, error: bytes | str) -> NoReturn:
        """``doing`` failed (``error``: podman's words): a SandboxBroken that says whether the
        container itself is gone or stopped."""
        state = container_state(self.cid)
        if state is None:
            raise SandboxBroken(f"podman: the container vanished ({doing})")
        if not state.get("Running") and not self.killed:
            raise SandboxBroken(f"podman: the container stopped ({says(state)}; {doing})")
        raise SandboxBroken(f"podman: {doing} failed ({_last_line(error)})")

    def _kill(self, proc: subprocess.Popen) -> None:
        self.killed = True
        with contextlib.suppress(SandboxBroken):
            podman("kill", self.cid)
        try:
            proc.wait(KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # podman did not notice the container died: stop waiting for it


class PodmanSandbox:
    """A fresh container per session, removed in the background after it; no daemon, no pool."""

    name = "podman"

    def __init__(self, limits: Limits | None = None) -> None:
        if shutil.which(PODMAN) is None:
            raise SandboxUnavailable(
                "podman: no podman binary on PATH; run `make setup` (installs podman) "
                "or choose another sandbox.kind"
            )
        self.limits = limits or Limits()
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.owner_start = process_start(os.getpid()) or ""
        # None: not tried yet; False: the storage driver cannot cap a container's writable layer.
        self.layer_limit: bool | None = None
        try:
            _check_limits_hold()
            remove_leftovers()  # a killed earlier run must not hold resources
        except SandboxBroken as exc:
            raise SandboxUnavailable(f"{exc}; run `make setup` (installs podman)") from None
        self.background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="podman-bg")
        self.closed = False
        self.lock = threading.Lock()
        atexit.register(self.close)

    def has_image(self, image: str) -> bool:
        return podman("image", "exists", image).returncode == 0

    @contextlib.contextmanager
    def session(self, spec: SessionSpec) -> Iterator[PodmanSession]:
        cid = self._start(spec)
        try:
            yield PodmanSession(cid, self.limits, {**BASE_ENV, **spec.env})
        finally:
            try:
                self.background.submit(_remove, cid)
            except RuntimeError:  # closed meanwhile: remove it now
                _remove(cid)

    def close(self) -> None:
        """Wait for the background removals (safe to call twice)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.background.shutdown(wait=True)

    def disk_limits(self) -> str:
        """Which disk guarantees hold for test sessions here (after a session was started)."""
        tmp = f"{SCRATCH} is a {self.limits.tmp_size} tmpfs"
        if self.layer_limit:
            return f"{tmp}; the writable layer is capped at {self.limits.writable_layer_size}"
        store = '{{.Store.GraphDriverName}} on {{index .Store.GraphStatus "Backing Filesystem"}}'
        driver = _last_line(podman("info", "--format", store).stdout) or "?"
        return (
            f"{tmp}; the writable layer is NOT capped (storage driver {driver} cannot: "
            "--storage-opt size needs overlay on xfs with pquota)"
        )

    def _start(self, spec: SessionSpec) -> str:
        """A container of ``spec``, handed out once its image's entrypoint says it is ready."""
        cid = self._create(spec)
        path = ready_file(self._labels(cid))
        if path is None:
            return cid
        if podman("exec", cid, *wait_argv(path), timeout=WAIT_S + 30).returncode != 0:
            _remove(cid)
            raise SandboxBroken(not_ready(spec.image, path))
        return cid

    @staticmethod
    def _labels(cid: str) -> dict[str, str]:
        """A container's labels: its image's and ours (read from the container, never from a
        tag that may have moved since)."""
        said = _checked("reading a container's labels", "container", "inspect", "--format",
                        "{{json .Config.Labels}}", cid)  # fmt: skip
        labels = json.loads(said or b"null")
        return labels if isinstance(labels, dict) else {}

    @staticmethod
    def _image_labels(image: str) -> dict[str, str]:
        """An image's labels ({} when it is not here: the run says what is missing)."""
        said = podman("image", "inspect", "--format", "{{json .Config.Labels}}", image)
        labels = json.loads(said.stdout or b"null") if said.returncode == 0 else None
        return labels if isinstance(labels, dict) else {}

    def _create(self, spec: SessionSpec) -> str:
        memory = str(size_bytes("sandbox.memory", self.limits.memory))
        args = [
            "run", "--detach", "--init",
            "--network", "bridge" if spec.network else "none",
            "--cap-drop", "all", "--security-opt", "no-new-privileges",
            "--memory", memory, "--memory-swap", memory,
            "--cpus", str(self.limits.cpus), "--pids-limit", str(self.limits.pids),
            *ulimits(), "--workdir", "/",
            # What podman adds to every container's environment and Docker does not.
            "--unsetenv", "TERM", "--unsetenv", "container",
        ]  # fmt: skip
        labels = self._image_labels(spec.image)
        if spec.grading or switches_user(labels):
            args += [arg for cap in GRADING_CAPABILITIES for arg in ("--cap-add", cap)]
        for name, address in hosts(labels).items():  # the names its suite reaches services by
            args += ["--add-host", f"{name}:{address}"]
        for key, value in owner_labels(self.owner, self.owner_start).items():
            args += ["--label", f"{key}={value}"]
        if not spec.network:  # test sessions; image builds keep their whole disk for installs
            # In bytes: the kernel's tmpfs reads neither 1.5g nor 2gb, which params allow.
            tmp_bytes = size_bytes("sandbox.tmp_size", self.limits.tmp_size)
            args += ["--tmpfs", f"{SCRATCH}:rw,exec,nosuid,nodev,size={tmp_bytes},mode=1777"]
            if self.layer_limit is not False:
                layer = ["--storage-opt", f"size={self.limits.writable_layer_size}"]
                try:
                    cid = self._run(spec.image, [*args, *layer])
                except SandboxBroken as exc:
                    if not any(word in str(exc).lower() for word in NO_LAYER_CAP):
                        raise
                    self.layer_limit = False  # this driver cannot: the tmpfs is the guarantee
                else:
                    self.layer_limit = True
                    return cid
        return self._run(spec.image, args)

    def _run(self, image: str, args: list[str]) -> str:
        """``podman run`` under a name of ours: a container that failed to start is removed."""
        name = f"trajforge-{uuid.uuid4().hex[:16]}"
        proc = podman(*args, "--name", name, image, "/bin/sh", "-c", MAIN)
        if proc.returncode == 0:
            return _last_line(proc.stdout)
        _remove(name)
        error = _last_line(proc.stderr)
        if "catatonit" in error or "container-init" in error:
            raise SandboxUnavailable(
                f"podman: no init binary for --init ({error}); "
                "run `make setup` (installs catatonit)"
            )
        raise SandboxBroken(f"podman: starting a container of {image} failed ({error})")

    # --- images (the ImageStore protocol) ------------------------------------------------------

    def build_image(self, build: ImageBuild) -> BuildResult:
        """``podman build`` of the recipe; the build is stopped past ``build.timeout_s``."""
        with tempfile.TemporaryDirectory(prefix="trajforge-build-") as workdir:
            context = os.path.join(workdir, "context")
            os.mkdir(context)
            if build.context:  # b"": a recipe that copies nothing
                with tarfile.open(fileobj=io.BytesIO(build.context), mode="r") as tar:
                    tar.extractall(context, filter="tar")  # nothing lands outside the context
            dockerfile = os.path.join(workdir, "Dockerfile")  # beside it: never shadows a file
            with open(dockerfile, "w") as handle:
                handle.write(build.dockerfile)
            memory = str(size_bytes("sandbox.memory", self.limits.memory))
            # --layers=false: one layer per stage and no cached intermediate images; with layers,
            # each build would leave its build stage (the source tree, pip's caches) behind as an
            # untagged image no prune of ours sees. A profile's image is built once anyway.
            args = [PODMAN, "build", "--layers=false", "-f", dockerfile, "--memory", memory]
            args += ulimits()
            for key, value in build.build_args.items():
                args += ["--build-arg", f"{key}={value}"]
            for key, value in build.labels.items():
                args += ["--label", f"{key}={value}"]
            args += ["-t", build.tag, context]
            started = time.monotonic()
            output, code, timed_out = _run_bounded(args, build.timeout_s)
            usage.record(usage.BUILD, time.monotonic() - started)
        lines = [line for line in output.splitlines() if not _builder_noise(line)]
        if timed_out:
            lines.append(f"build timed out after {build.timeout_s:.0f} s")
        ok = code == 0 and not timed_out
        return BuildResult(ok=ok, log="\n".join(lines), timed_out=timed_out)

    def image_info(self, image: str) -> ImageInfo | None:
        proc = podman("image", "inspect", image)
        if proc.returncode != 0:
            if not self.has_image(image):
                return None
            raise SandboxBroken(f"podman: inspecting {image} failed ({_last_line(proc.stderr)})")
        attrs = json.loads(proc.stdout)[0]
        history = json.loads(
            _checked(f"reading the history of {image}", "history", "--format", "json", image)
        )
        return ImageInfo(
            image_id=f"sha256:{attrs['Id']}",
            # podman also lists a digest under "localhost/<name>" for images no registry has.
            repo_digests=tuple(
                d for d in attrs.get("RepoDigests") or () if not d.startswith(LOCAL_PREFIX)
            ),
            layers=layer_sizes(attrs, history),
            labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
            created=iso_seconds(attrs.get("Created")),
        )

    def push_image(self, image: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> str:
        """``podman push``; the digest of the manifest the registry now serves, as
        ``<repository>@sha256:...`` (podman's local digests differ: layers are compressed)."""
        needs_registry(image, "push")
        if not self.has_image(image):
            raise RegistryError(
                f"registry: cannot push {image}: no such image here; build or pull it first"
            )
        with tempfile.TemporaryDirectory(prefix="trajforge-push-") as workdir:
            digest_file = os.path.join(workdir, "digest")
            args = ["push", *_tls(image), "--digestfile", digest_file, image]
            _registry_call("pushing", image, args, timeout_s)
            with open(digest_file) as handle:
                digest = handle.read().strip()
        if not digest:
            raise RegistryError(f"registry: pushing {image} failed (podman gave no digest)")
        return f"{split_image(image)[0]}@{digest}"

    def pull_image(self, image: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> bool:
        """``podman pull``; False when the registry has no such manifest. Only names with a
        registry host are pulled (``trajforge-env:<id>`` is never looked up anywhere)."""
        needs_registry(image, "pull")
        try:
            _registry_call("pulling", image, ["pull", "--quiet", *_tls(image), image], timeout_s)
        except _NotThere:
            return False
        return self.has_image(image)

    def remove_image(self, image: str) -> None:
        """Untag ``image`` (the image goes with its last tag); nothing if it is not here. An image
        a container still uses is refused (SandboxBroken)."""
        proc = podman("rmi", image)
        if proc.returncode != 0 and self.has_image(image):
            raise SandboxBroken(f"podman: removing {image} failed ({_last_line(proc.stderr)})")

    def list_images(self, label: str) -> list[str]:
        """Tags of the local images that carry ``label``, named as they were tagged (podman's
        ``localhost/`` prefix dropped: ``trajforge-env:<id>`` resolves to it)."""
        out = _checked("listing images", "images", "--filter", f"label={label}", "--format", "json")
        names = {name for image in json.loads(out or b"[]") for name in image.get("Names") or ()}
        return sorted(name.removeprefix(LOCAL_PREFIX) for name in names)

    def storage_path(self) -> str | None:
        """podman's graph root (its images); podman runs on this machine."""
        root = _checked("reading the storage root", "info", "--format", "{{.Store.GraphRoot}}")
        path = root.decode().strip()
        return path if path and os.path.isdir(path) else None

    def container_image_ids(self) -> set[str]:
        """Ids of the images any container here uses, running or stopped: never removed."""
        out = _checked("listing containers", "ps", "--all", "--format", "json")
        return {f"sha256:{c['ImageID']}" for c in json.loads(out or b"[]") if c.get("ImageID")}

    def image_layers(self) -> dict[str, tuple[str, ...]]:
        """Every local image's layers (diff ids, base first) by image id: an image whose layers
        begin with all of another's is built on it."""
        listed = json.loads(_checked("listing images", "images", "--format", "json") or b"[]")
        ids = sorted({image["Id"] for image in listed if image.get("Id")})
        if not ids:
            return {}
        proc = podman("image", "inspect", *ids)  # one removed meanwhile fails the rest: one by one
        found = json.loads(proc.stdout or "[]") if proc.returncode == 0 else None
        if found is None:
            found = []
            for image_id in ids:
                one = podman("image", "inspect", image_id)
                if one.returncode == 0:
                    found += json.loads(one.stdout or "[]")
        return {
            f"sha256:{attrs['Id']}": tuple((attrs.get("RootFS") or {}).get("Layers") or ())
            for attrs in found
        }


def remove_leftovers(only_dead_owners: bool = True) -> Sweep:
    """Remove the containers of dead runs on this host (every trajforge container when
    ``only_dead_owners`` is False: only for when no run is alive anywhere on this host)."""
    out = _checked(
        "listing containers", "ps", "--all", "--filter", f"label={LABEL}", "--format", "json"
    )
    listed = [(c["Id"], c.get("Labels") or {}) for c in json.loads(out or b"[]")]
    return sweep_owned(listed, _remove, only_dead_owners)


def _run_bounded(args: list[str], timeout_s: float) -> tuple[str, int, bool]:
    """(output, exit code, timed out) of a long podman call, killed past ``timeout_s`` with
    everything it started."""
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        cwd=scratch_cwd(),
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        return output.decode("utf-8", "replace"), proc.returncode, False
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        output, _ = proc.communicate()
        return output.decode("utf-8", "replace"), proc.returncode, True


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and all its descendants. A build's RUN step runs in its own session and
    PID namespace under podman (buildah-oci-runtime), so neither a signal to podman (it does not
    stop the step) nor to its process group reaches it; killing a namespace's first process ends
    the whole namespace. The build's storage-only working container stays (podman ps --external):
    nothing names it after this build."""
    for _ in range(3):  # a process forked while we looked is found on the next pass
        tree = _descendants(pid)
        for each in [pid, *tree]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(each, signal.SIGKILL)
        if not tree:
            return


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        parent = int(stat[stat.rfind(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _builder_noise(line: str) -> bool:
    """podman's bookkeeping lines (layer ids, copy progress): different every build."""
    text = line.strip()
    progress = (
        "--> ",
        "Getting image source",
        "Copying blob",
        "Copying config",
        "Writing manifest",
    )
    is_id = len(text) == 64 and all(c in "0123456789abcdef" for c in text)
    return not text or is_id or text.startswith(progress) or text == "Storing signatures"


def layer_sizes(attrs: dict, history: list[dict]) -> tuple[tuple[str, int], ...]:
    """(diff id, bytes) per layer, base first. The image config's history marks the steps that
    made no layer (``empty_layer``); ``podman history`` has every step's size, newest first."""
    diff_ids = list((attrs.get("RootFS") or {}).get("Layers") or [])
    steps = attrs.get("History") or []
    sizes = [int(step.get("size") or 0) for step in reversed(history)]
    if len(steps) == len(sizes):
        made = [
            size for step, size in zip(steps, sizes, strict=True) if not step.get("empty_layer")
        ]
    else:  # a history podman could not match up: the steps that wrote bytes, in order
        made = [size for size in sizes if size > 0]
    made += [0] * (len(diff_ids) - len(made))
    return tuple(zip(diff_ids, made, strict=False))


class _NotThere(Exception):
    """The registry answered that it has no such manifest."""


def _tls(image: str) -> list[str]:
    """A registry on this machine speaks plain HTTP; any other is verified."""
    host = registry_host(image) or ""
    name = host.rsplit(":", 1)[0] if ":" in host.split("]")[-1] else host  # without its port
    return ["--tls-verify=false"] if name in LOCAL_REGISTRIES else []


def _registry_call(doing: str, image: str, args: list[str], timeout_s: float) -> None:
    """A push or pull within ``timeout_s``; RegistryError with podman's words when it fails
    (_NotThere when the registry says it has no such image)."""
    try:
        proc = podman(*args, timeout=timeout_s)
    except SandboxBroken as exc:  # podman hung or could not run
        raise RegistryError(
            f"registry: {doing} {image} failed ({exc}); check the registry"
        ) from None
    if proc.returncode == 0:
        return
    error = _last_line(proc.stderr)
    text = error.lower()
    refused = any(word in text for word in ("denied", "unauthorized", "forbidden"))
    if not refused and any(w in text for w in ("manifest unknown", "name unknown", "not found")):
        raise _NotThere(error)
    hint = (
        "log in to the registry (podman login) or check its permissions"
        if refused
        else "check that the registry answers and accepts it (environment.registry)"
    )
    raise RegistryError(f"registry: {doing} {image} failed ({error}); {hint}")


def unpadded(tar_bytes: bytes) -> bytes:
    """``tar_bytes`` ending at its two end-of-archive blocks, without the padding to a whole
    record after them: ``podman cp`` from a pipe stops reading at the end blocks and fails on
    bytes still coming ("read/write on closed pipe") once an archive outgrows one 32 KiB read.
    An archive that does not parse is sent as it is (podman then names the fault)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
            tar.getmembers()  # reads up to the end blocks: the offset stops at the first of them
            end = tar.offset + 2 * tarfile.BLOCKSIZE
    except tarfile.TarError:
        return tar_bytes
    return tar_bytes[:end]
