"""One base image per Python version: pulled when a registry answers, else built offline.

Offline, debootstrap builds a minimal root file system of the release whose python3 is the
version asked for (``SUITES``: Debian for 3.9, 3.11, 3.13 and 3.14, Ubuntu for 3.8, 3.10 and
3.12) and ``docker import`` turns it into an image. The tag is the cache: an existing tag is never
rebuilt, and a lock per tag keeps two workers on one machine from building it twice. podman
keeps its own image store: ``ensure_podman_base_image`` fills it. ``ensure_for_sandbox`` is what
a build calls when a profile needs a Python whose image is not here yet (built once, on demand).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from trajforge.schemas.errors import UserError
from trajforge.verifiers.sandbox.docker import connect

DEBIAN = "http://deb.debian.org/debian"
UBUNTU = "http://archive.ubuntu.com/ubuntu"
SCRIPTS = "/usr/share/debootstrap/scripts"


@dataclass(frozen=True)
class Suite:
    """Where one Python's root file system comes from: a release, its mirror, and the
    debootstrap script that knows it (a newer release than this debootstrap borrows one)."""

    name: str
    mirror: str
    script: str | None = None  # None: debootstrap's own script for ``name``

    @property
    def ubuntu(self) -> bool:
        return self.mirror == UBUNTU


# The one table: Python minor -> the release whose python3 is that minor.
SUITES = {
    "3.8": Suite("focal", UBUNTU, "gutsy"),
    "3.9": Suite("bullseye", DEBIAN),
    "3.10": Suite("jammy", UBUNTU, "gutsy"),
    "3.11": Suite("bookworm", DEBIAN),
    "3.12": Suite("noble", UBUNTU, "gutsy"),
    "3.13": Suite("trixie", DEBIAN),
    "3.14": Suite("forky", DEBIAN, "sid"),
}
PACKAGES = "python3,python3-pip,python3-venv,git,ca-certificates"
UBUNTU_COMPONENTS = "main,universe"  # python3-pip is in universe
# Ubuntu's archive keys, for machines (like Debian's) without ubuntu-keyring: noble's package,
# pinned by digest (its keys are Ubuntu's 2012 and 2018 archive keys, 790BC727...C0B21F32 and
# F6ECB376...991BC93C), so the Release files debootstrap fetches are checked as on Ubuntu.
UBUNTU_KEYRING_DEB = f"{UBUNTU}/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
UBUNTU_KEYRING_SHA256 = "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"
UBUNTU_KEYRING = "usr/share/keyrings/ubuntu-archive-keyring.gpg"
# What no test run reads, removed before the import (about 170 MB of a 405 MB root file system):
# the downloaded .debs and apt lists, translations, man and info pages, docs but their copyright
# files (which redistributed images must keep). Paths are relative to the root file system.
TRIM = (
    "rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* usr/share/locale/* "
    "usr/share/man/* usr/share/info/* && "
    "find usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete && "
    "find usr/share/doc -mindepth 1 -type d -empty -delete"
)
PULL_TIMEOUT_S = 120
LOCK_DIR = os.path.join(tempfile.gettempdir(), "trajforge-base-locks")


def base_image_tag(python: str) -> str:
    return f"trajforge-base:py{python}"


def base_image_recipe(python: str) -> str:
    """The base image as a shell script anyone can run (root, debootstrap, Docker): the same
    release, mirror, keyring, packages and tag ``ensure_base_image`` uses offline."""
    suite = SUITES.get(python)
    tag = base_image_tag(python)
    if suite is None:
        return (
            f"#!/bin/sh\n# trajforge base image {tag}: no release in trajforge's table.\nexit 1\n"
        )
    keyring: list[str] = []
    if suite.ubuntu:
        keyring = [
            f'curl -fsSL -o "$work/keyring.deb" {UBUNTU_KEYRING_DEB}',
            f'echo "{UBUNTU_KEYRING_SHA256}  $work/keyring.deb" | sha256sum -c -',
            'dpkg-deb -x "$work/keyring.deb" "$work/keyring"',
        ]
    debootstrap = " ".join(
        _debootstrap_args(suite, '"$rootfs"', f'"$work/keyring/{UBUNTU_KEYRING}"')
    )
    return "\n".join(
        [
            "#!/bin/sh",
            f"# trajforge base image {tag}: {suite.name}'s python{python}, built offline.",
            "# Run as root with debootstrap and docker installed (or pipe into `podman import`).",
            "set -eu",
            'work="$(mktemp -d)"',
            'rootfs="$work/rootfs"',
            *keyring,
            debootstrap,
            f'(cd "$rootfs" && {TRIM} && {_python3_link(python)})',
            f'tar -C "$rootfs" -c . | docker import - {tag}',
            'rm -rf "$work"',
            "",
        ]
    )


def _debootstrap_args(suite: Suite, rootfs: str, keyring: str) -> list[str]:
    """debootstrap's command line for ``suite`` (Ubuntu: universe too, and its archive keys)."""
    args = ["debootstrap", "--variant=minbase", f"--include={PACKAGES}"]
    if suite.ubuntu:
        args += [f"--components={UBUNTU_COMPONENTS}", f"--keyring={keyring}"]
    args += [suite.name, rootfs, suite.mirror]
    return args + ([os.path.join(SCRIPTS, suite.script)] if suite.script else [])


def _python3_link(python: str) -> str:
    """Shell (run in the root file system) making ``python3`` the asked minor: nothing when the
    release's python3 already is; else a link in /usr/local/bin, which comes first on PATH."""
    binary = f"python{python}"
    return (
        f"test -x usr/bin/{binary} && "
        f'{{ [ "$(readlink usr/bin/python3)" = {binary} ] || '
        f"ln -sf /usr/bin/{binary} usr/local/bin/python3; }}"
    )


def ensure_base_image(python: str, docker_host: str | None = None, say=print) -> str:
    """Docker's ``trajforge-base:pyX``: present, else pulled, else built offline (once per
    machine: the lock makes a second worker wait, then find it present)."""
    tag = base_image_tag(python)
    client = connect(docker_host)
    if client.images.list(name=tag):
        say(f"base image {tag}: present")
        return tag
    with _build_lock(tag):
        if client.images.list(name=tag):
            say(f"base image {tag}: present (another worker built it)")
            return tag
        if _pull(client, f"python:{python}-slim", tag):
            say(f"base image {tag}: pulled python:{python}-slim")
            return tag
        say(f"base image {tag}: building with debootstrap (about a minute)")
        _debootstrap_import(python, tag, docker_host)
    say(f"base image {tag}: built")
    return tag


def ensure_for_sandbox(sandbox, python: str, say: Callable[[str], None] = print) -> str:
    """The base image a build in ``sandbox`` needs, made on demand the first time a profile asks
    for this Python (Docker's store; podman's is copied from Docker's, or built). The local
    backend has no images; anything else cannot get one here: ``no_base_image``."""
    kind = getattr(sandbox, "name", "")
    if kind == "docker":
        return ensure_base_image(python, getattr(sandbox, "docker_host", None), say)
    if kind == "podman":
        with _build_lock(base_image_tag(python) + "-podman"):
            return ensure_podman_base_image(python, say)
    raise UserError(
        f"base image {base_image_tag(python)}: the {kind or 'given'} sandbox cannot build one; "
        f"run `trajforge base-image --python {python}`",
        reason="no_base_image",
    )


def ensure_apt_layer(
    tag: str, python: str, packages: str, check: str, docker_host: str | None = None, say=print
) -> str:
    """Docker's ``tag``: the Python base image of ``python``'s Debian release plus that
    release's ``packages`` (a language's toolchain: node, Go), made once per machine under the
    tag's lock; ``check`` is a shell command the build runs to prove the layer works. The
    archive is reached over plain http, as debootstrap reached it: no CA bundle is needed."""
    client = connect(docker_host)
    if client.images.list(name=tag):
        return tag
    with _build_lock(tag):
        if client.images.list(name=tag):
            return tag
        ensure_base_image(python, docker_host, say)
        say(f"base image {tag}: installing Debian's {packages} (a minute or two)")
        dockerfile = apt_layer_recipe(python, packages, check).encode()
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))
        context.seek(0)
        try:
            client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
        except Exception as exc:  # docker.errors.BuildError, APIError: the cause is its text
            raise _no_base(
                tag, f"apt could not install {packages}: {str(exc).splitlines()[-1:]}",
                "check that deb.debian.org is reachable",
            ) from None  # fmt: skip
    say(f"base image {tag}: built")
    return tag


def apt_layer_recipe(python: str, packages: str, check: str) -> str:
    """The Dockerfile of an apt layer on ``python``'s base image (``ensure_apt_layer``)."""
    return "\n".join(
        [
            f"FROM {base_image_tag(python)}",
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            f"--no-install-recommends {packages} && rm -rf /var/lib/apt/lists/* && {check}",
            "",
        ]
    )


@contextmanager
def _build_lock(tag: str) -> Iterator[None]:
    """An exclusive lock per tag across this machine's processes (released when they die)."""
    os.makedirs(LOCK_DIR, exist_ok=True)
    path = os.path.join(LOCK_DIR, tag.replace(":", "_").replace("/", "_") + ".lock")
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pull(client, reference: str, tag: str) -> bool:
    """Pull with a time limit: with no registry this must fail fast, not hang."""
    result: dict[str, object] = {}

    def pull() -> None:
        try:
            result["image"] = client.images.pull(reference)
        except Exception as exc:
            result["error"] = exc

    thread = threading.Thread(target=pull, daemon=True)
    thread.start()
    thread.join(PULL_TIMEOUT_S)
    image = result.get("image")
    if image is None:
        return False
    repository, _, version = tag.partition(":")
    image.tag(repository, version)  # type: ignore[attr-defined]
    return True


def _debootstrap_import(
    python: str, tag: str, docker_host: str | None, engine: str = "docker"
) -> None:
    suite = SUITES.get(python)
    if suite is None:
        known = ", ".join(sorted(SUITES, key=lambda v: tuple(map(int, v.split(".")))))
        raise _no_base(
            tag, f"no release in trajforge's table ships Python {python} (offline builds: {known})",
            "set environment.pythons accordingly or make a registry reachable",
        )  # fmt: skip
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise _no_base(tag, "building it offline needs root and debootstrap", "run `make setup`")
    with tempfile.TemporaryDirectory(prefix="trajforge-rootfs-") as work:
        rootfs = os.path.join(work, "rootfs")
        keyring = _ubuntu_keyring(work, tag) if suite.ubuntu else ""
        build = _run(_debootstrap_args(suite, rootfs, keyring))
        if build.returncode != 0:
            tail = build.stdout.strip().splitlines()[-3:] + build.stderr.strip().splitlines()[-3:]
            raise _no_base(
                tag, f"debootstrap {suite.name} from {suite.mirror} failed: {' | '.join(tail)}",
                "check that the mirror is reachable, or make a registry reachable",
            )  # fmt: skip
        subprocess.run(["sh", "-c", TRIM], cwd=rootfs, check=True)
        if _run(["sh", "-c", _python3_link(python)], cwd=rootfs).returncode != 0:
            raise _no_base(
                tag, f"{suite.name} has no python{python}",
                "fix the release for it in base_image.SUITES",
            )  # fmt: skip
        env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [engine, "import", "-", tag],
            stdin=tar.stdout,
            capture_output=True,
            env=env,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0:
            raise _no_base(
                tag, f"{engine} import failed: {imported.stderr.decode().strip()}",
                f"check that {engine} runs",
            )  # fmt: skip


def _ubuntu_keyring(work: str, tag: str) -> str:
    """Ubuntu's archive keyring, from its pinned package (checked by digest) into ``work``."""
    deb = os.path.join(work, "ubuntu-keyring.deb")
    try:
        with urllib.request.urlopen(UBUNTU_KEYRING_DEB, timeout=PULL_TIMEOUT_S) as response:
            data = response.read()
    except OSError as exc:
        raise _no_base(
            tag, f"cannot fetch Ubuntu's keyring ({exc})", f"check that {UBUNTU} is reachable"
        ) from exc
    if hashlib.sha256(data).hexdigest() != UBUNTU_KEYRING_SHA256:
        raise _no_base(tag, "Ubuntu's keyring package is not the pinned one", "report it")
    with open(deb, "wb") as handle:
        handle.write(data)
    extracted = os.path.join(work, "keyring")
    subprocess.run(["dpkg-deb", "-x", deb, extracted], check=True, capture_output=True)
    return os.path.join(extracted, UBUNTU_KEYRING)


def _run(args: list[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False, cwd=cwd)


def _no_base(tag: str, cause: str, remedy: str) -> UserError:
    return UserError(f"base image {tag}: {cause}; {remedy}", reason="no_base_image")


# --- podman --------------------------------------------------------------------------------------


def ensure_podman_base_image(python: str, say=print) -> str:
    """The base image in podman's store, which shares nothing with Docker's: Docker's copy when
    Docker has one (``docker save | podman load``: the very same image), else pulled, else the
    same debootstrap root file system through ``podman import``. podman names it
    ``localhost/trajforge-base:pyX``; the short name resolves to it, in FROM too."""
    tag = base_image_tag(python)
    if _podman("image", "exists", tag).returncode == 0:
        say(f"base image {tag} (podman): present")
        return tag
    if _copy_from_docker(tag):
        say(f"base image {tag} (podman): copied from Docker")
        return tag
    slim = f"docker.io/library/python:{python}-slim"
    if (
        _podman("pull", "--quiet", slim).returncode == 0
        and _podman("tag", slim, tag).returncode == 0
    ):
        say(f"base image {tag} (podman): pulled {slim}")
        return tag
    say(f"base image {tag} (podman): building with debootstrap (about a minute)")
    _debootstrap_import(python, tag, None, engine="podman")
    say(f"base image {tag} (podman): built")
    return tag


def _podman(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("podman") is None:
        raise UserError("podman: no podman binary on PATH; run `make setup`", reason="no_podman")
    try:
        return subprocess.run(
            ["podman", *args], capture_output=True, timeout=PULL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, b"", b"timed out")


def _copy_from_docker(tag: str) -> bool:
    """``docker save TAG | podman load``; False when Docker is not here or has no such image."""
    if shutil.which("docker") is None:
        return False
    inspect = ["docker", "image", "inspect", tag]
    if subprocess.run(inspect, capture_output=True, check=False).returncode != 0:
        return False
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
    load = subprocess.run(["podman", "load", "--quiet"], stdin=save.stdout, capture_output=True)
    assert save.stdout is not None
    save.stdout.close()
    saved = save.wait() == 0
    return saved and load.returncode == 0 and _podman("image", "exists", tag).returncode == 0
