"""Node's base images: ``trajforge-base:nodeN``, a Debian release's Python base image plus that
release's nodejs and npm, made on demand (Docker's store) under the tag's lock."""

from __future__ import annotations

import re
from collections.abc import Callable

from trajforge.generators.environments.base_image import _no_base as no_base
from trajforge.generators.environments.base_image import apt_layer_recipe, ensure_apt_layer
from trajforge.verifiers.sandbox.base import ImageStore

# Node major -> the Python base image of the Debian release whose archive ships that nodejs (one
# per release: an era ladder). The node image is that image plus Debian's nodejs and npm, so a
# project's node-gyp finds python3 too, and so does the grader's Python supervisor in a JS task's
# image (checked by the build). Versions as Debian ships them, for engines ranges.
NODE_RELEASES = {"12": "3.9", "18": "3.11", "20": "3.13"}
NODE_VERSIONS = {"12": (12, 22, 12), "18": (18, 20, 4), "20": (20, 19, 2)}
NODE_PACKAGES = "nodejs npm"
NODE_CHECK = "node --version && npm --version && python3 --version"
NODE_BASE = re.compile(r"^ARG BASE=trajforge-base:node(\d+)$", re.MULTILINE)  # recipe.py's line


def node_image_tag(node: str) -> str:
    return f"trajforge-base:node{node}"


def node_image_recipe(node: str) -> str:
    """The node base image's Dockerfile: its release's Python base plus Debian's nodejs and npm
    (so the grader's Python supervisor runs in a JS task's image too: checked by the build)."""
    return apt_layer_recipe(NODE_RELEASES[node], NODE_PACKAGES, NODE_CHECK)


def ensure_node_base_image(node: str, docker_host: str | None = None, say=print) -> str:
    """Docker's ``trajforge-base:nodeN``: present, else built on its release's Python base image
    (itself made on demand), once per machine under the tag's lock."""
    if node not in NODE_RELEASES:
        known = ", ".join(sorted(NODE_RELEASES, key=int))
        raise no_base(
            node_image_tag(node), f"no release in trajforge's table ships node {node} ({known})",
            "choose one of those majors",
        )  # fmt: skip
    return ensure_apt_layer(
        node_image_tag(node), NODE_RELEASES[node], NODE_PACKAGES, NODE_CHECK, docker_host, say
    )


def ensure_recipe_base(store: ImageStore, recipe: str, say: Callable[[str], None] | None) -> None:
    """A JS task's recipe builds FROM ``trajforge-base:nodeN``, which Docker's store makes on
    demand rather than pulls: made before a rebuild, as ``prepare_js_environment`` does."""
    match = NODE_BASE.search(recipe)
    if match is not None and getattr(store, "name", "") == "docker":
        ensure_node_base_image(
            match.group(1), getattr(store, "docker_host", None), say or (lambda line: None)
        )
