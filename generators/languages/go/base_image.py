"""Go's base image, ``trajforge-base:go``: Debian bookworm's Python base image plus its Go
(1.19), a C toolchain for cgo and git (the go command fetches modules by version control when a
module has no proxy copy). A task that asks for a newer Go gets it from the module proxy in its
recipe's networked stage (``toolchain.py``): the go command fetches toolchains itself.

Python stays in the image: the grader's supervisor is Python."""

from __future__ import annotations

from trajforge.generators.environments.base_image import ensure_apt_layer

GO_BASE = "trajforge-base:go"
GO_RELEASE_PYTHON = "3.11"  # bookworm: its golang-go is Go 1.19
DEBIAN_GO = "1.19"
GO_PACKAGES = "golang-go gcc libc6-dev git ca-certificates"
GO_CHECK = "go version && gcc --version && python3 --version"


def ensure_go_base_image(docker_host: str | None = None, say=print) -> str:
    """Docker's ``trajforge-base:go``: present, else built on bookworm's Python base image
    (itself made on demand), once per machine under the tag's lock."""
    return ensure_apt_layer(GO_BASE, GO_RELEASE_PYTHON, GO_PACKAGES, GO_CHECK, docker_host, say)
