"""One base image per Python version: pulled when a registry answers, else built offline.

Offline, Debian's debootstrap builds a minimal root file system whose python3 is the version asked
for (bookworm: 3.11, trixie: 3.13, bullseye: 3.9) and ``docker import`` turns it into an image.
The tag is the cache: an existing tag is never rebuilt. podman keeps its own image store:
``ensure_podman_base_image`` fills it (``trajforge base-image --sandbox podman``, ``make setup``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading

from trajforge.schemas.errors import UserError
from trajforge.verifiers.sandbox.docker import connect

DEBIAN_SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
PACKAGES = "python3,python3-pip,python3-venv,git,ca-certificates"
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


def base_image_tag(python: str) -> str:
    return f"trajforge-base:py{python}"


def base_image_recipe(python: str) -> str:
    """The base image as a shell script anyone can run (root, Debian's debootstrap, Docker):
    the same release, packages and tag ``ensure_base_image`` uses offline."""
    suite = DEBIAN_SUITES.get(python, "?")
    tag = base_image_tag(python)
    return "\n".join(
        [
            "#!/bin/sh",
            f"# trajforge base image {tag}: Debian {suite}'s python3, built offline.",
            "# Run as root with debootstrap and docker installed (or pipe into `podman import`).",
            "set -eu",
            'rootfs="$(mktemp -d)"',
            f'debootstrap --variant=minbase --include={PACKAGES} {suite} "$rootfs"',
            f'(cd "$rootfs" && {TRIM})',
            f'tar -C "$rootfs" -c . | docker import - {tag}',
            'rm -rf "$rootfs"',
            "",
        ]
    )


def ensure_base_image(python: str, docker_host: str | None = None, say=print) -> str:
    tag = base_image_tag(python)
    client = connect(docker_host)
    if client.images.list(name=tag):
        say(f"base image {tag}: present")
        return tag
    if _pull(client, f"python:{python}-slim", tag):
        say(f"base image {tag}: pulled python:{python}-slim")
        return tag
    say(f"base image {tag}: no registry answers; building with debootstrap (about a minute)")
    _debootstrap_import(python, tag, docker_host)
    say(f"base image {tag}: built")
    return tag


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
    suite = DEBIAN_SUITES.get(python)
    if suite is None:
        known = ", ".join(sorted(DEBIAN_SUITES))
        raise UserError(
            f"base image {tag}: no Debian release ships Python {python} (offline builds: {known}); "
            "set environment.pythons accordingly or make a registry reachable",
            reason="no_base_image",
        )
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise UserError(
            f"base image {tag}: building it offline needs root and debootstrap; run `make setup`",
            reason="no_base_image",
        )
    with tempfile.TemporaryDirectory(prefix="trajforge-rootfs-") as rootfs:
        build = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={PACKAGES}", suite, rootfs],
            capture_output=True,
            text=True,
            check=False,
        )
        if build.returncode != 0:
            tail = build.stdout.strip().splitlines()[-3:] + build.stderr.strip().splitlines()[-3:]
            raise UserError(
                f"base image {tag}: debootstrap {suite} failed: {' | '.join(tail)}",
                reason="no_base_image",
            )
        subprocess.run(["sh", "-c", TRIM], cwd=rootfs, check=True)
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
            raise UserError(
                f"base image {tag}: {engine} import failed: {imported.stderr.decode().strip()}",
                reason="no_base_image",
            )


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
    say(f"base image {tag} (podman): no registry answers; building with debootstrap")
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
