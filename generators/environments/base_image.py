"""One base image per Python version: pulled when a registry answers, else built offline.

Offline, Debian's debootstrap builds a minimal root file system whose python3 is the version asked
for (bookworm: 3.11, trixie: 3.13, bullseye: 3.9) and ``docker import`` turns it into an image.
The tag is the cache: an existing tag is never rebuilt.
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
PULL_TIMEOUT_S = 120


def base_image_tag(python: str) -> str:
    return f"trajforge-base:py{python}"


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


def _debootstrap_import(python: str, tag: str, docker_host: str | None) -> None:
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
        env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", tag],
            stdin=tar.stdout,
            capture_output=True,
            env=env,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0:
            raise UserError(
                f"base image {tag}: docker import failed: {imported.stderr.decode().strip()}",
                reason="no_base_image",
            )
