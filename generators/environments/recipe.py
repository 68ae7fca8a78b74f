"""An environment's recipe: the Dockerfile every image of a profile is built from.

The recipe is the profile's install commands rendered once, hashed into ``profile_id`` and
exported with the dataset, so anyone can rebuild the environment with plain ``docker build`` and
no trajforge. Two stages: the install runs in ``build`` with the network and the CA bundle, and
only ``/venv`` is copied into the final image, so the bundle (and pip's caches, and the source
tree) never reach a layer anyone pulls. Index and CA are build inputs, never baked in.

Build context (what ``build_context`` makes)::

    repo/                 the repository at the setup commit (``git archive``), no .git
    trajforge/ca.crt      a CA bundle for TLS-intercepting proxies; empty for none
    trajforge/env.json    the marker: profile id and setup commit (copied to /venv)
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Sequence

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.verifiers.sandbox.base import BASE_ENV

# bump when the template changes: every profile id changes too (v2: generated files are kept)
RECIPE_FORMAT = "dockerfile-v2"
PROFILE_LABEL = "trajforge.profile_id"  # on every environment image: what `images` lists
SETUP_COMMIT_LABEL = "trajforge.setup_commit"
# Set by trajforge at build time (``docker build --label``, never by the recipe's text, and a
# build's own labels override the recipe's): what the image was built from, and which namespace.
RECIPE_LABEL = "trajforge.recipe"  # recipe_hash() of the Dockerfile and its build context
KIND_LABEL = "trajforge.image"  # ENV_KIND (validate's images) | EVAL_KIND (a task row's recipe)
ENV_KIND = "env"
EVAL_KIND = "eval"
EVAL_REPOSITORY = "trajforge-eval"  # a row's recipe is built only here, as trajforge-eval:<hash>
RECIPE_HASH_VERSION = "recipe-hash-v1"
CA_FILE = "/tmp/trajforge/ca.crt"
MARKER_SOURCE = "trajforge/env.json"
ENV_MARKER = "/venv/trajforge-env.json"  # read back to learn a reused image's setup commit
# /repo is a plain tree (no .git), so setuptools-scm / hatch-vcs cannot read a version from git.
PRETEND_VERSION = {
    "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0",
    "VCS_VERSIONING_PRETEND_VERSION": "0.0.0",
}
# The install sees the CA bundle only when one was given, and the index only when one is named.
INSTALL_PRELUDE = (
    f"if [ -s {CA_FILE} ]; then export PIP_CERT={CA_FILE} SSL_CERT_FILE={CA_FILE} "
    f"REQUESTS_CA_BUNDLE={CA_FILE}; fi",
    'if [ -n "$PIP_INDEX" ]; then export PIP_INDEX_URL="$PIP_INDEX"; fi',
)


# Files the install wrote under /repo (hatch-vcs / setuptools-scm version files, in-place
# extensions): the test's /repo is the git tree, which lacks them, so the image carries them in
# /repo (and a copy in /venv, for a session that empties /repo and puts a tree back). Metadata
# (*.egg-info lists file names) and caches stay behind.
STAMP = "/tmp/trajforge/stamp"
GENERATED = "/venv/trajforge-generated"
CARRY = (
    f"mkdir -p {GENERATED} && find . \\( -name __pycache__ -o -name '*.egg-info' "
    "-o -name '*.dist-info' -o -name .eggs -o -name build \\) -prune "
    f"-o -type f -newer {STAMP} -print0 | xargs -0 -r cp --parents -t {GENERATED}"
)


def image_name(registry: str | None, profile_id: str) -> str:
    """Where a profile's image lives: in the registry when one is configured, else locally."""
    return f"{registry.rstrip('/')}/env:{profile_id}" if registry else f"trajforge-env:{profile_id}"


def eval_image_name(recipe_hash: str) -> str:
    """Where a task row's own recipe is built (evaluate, serve-rewards, the reward API): a name
    only trajforge gives, by content, never a name the row chooses nor a profile's image."""
    return f"{EVAL_REPOSITORY}:{recipe_hash}"


def recipe_hash(dockerfile: str, tree: str, profile_id: str, setup_commit: str) -> str:
    """What an image is by its recipe: sha256 of the Dockerfile and of its build context (the
    repository's git tree at the setup commit, and the marker's profile id and commit).

    The CA bundle and the index URL are build inputs that never reach the final image, so they
    are not part of it: the same recipe built behind another proxy is the same recipe.
    """
    fields = [RECIPE_HASH_VERSION, dockerfile, tree, marker(profile_id, setup_commit).decode()]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def render_dockerfile(python: str, install: Sequence[str]) -> str:
    """The Dockerfile for a profile: a pure function of its Python and install commands."""
    # One shell script: -e stops at the first failing step, -x puts each step in the build log.
    script = "\n".join(
        [*INSTALL_PRELUDE, f"touch {STAMP}", "set -x", "python3 -m venv /venv", *install, CARRY]
    )
    env = " ".join(f"{key}={value}" for key, value in BASE_ENV.items())
    pretend = " ".join(f"{key}={value}" for key, value in PRETEND_VERSION.items())
    return "\n".join(
        [
            f"# trajforge environment recipe ({RECIPE_FORMAT}). Build context: repo/ (the",
            "# repository at the setup commit, `git archive`), trajforge/ca.crt (a CA bundle, or",
            "# an empty file), trajforge/env.json (a marker). Build args: PIP_INDEX (an index",
            "# URL, optional), PROFILE_ID and SETUP_COMMIT (labels).",
            f"ARG BASE={base_image_tag(python)}",
            "FROM ${BASE} AS build",
            "ARG PIP_INDEX=",
            f"ENV {env} {pretend}",
            "COPY trajforge/ca.crt " + CA_FILE,
            "COPY repo/ /repo/",
            "WORKDIR /repo",
            f"RUN {json.dumps(['/bin/sh', '-ec', script])}",
            "",
            "FROM ${BASE}",
            "ARG PROFILE_ID=",
            "ARG SETUP_COMMIT=",
            f"ENV {env}",
            "COPY --from=build /venv /venv",
            f"COPY --from=build {GENERATED}/ /repo/",
            f"COPY {MARKER_SOURCE} {ENV_MARKER}",
            "WORKDIR /repo",
            f'LABEL {PROFILE_LABEL}="${{PROFILE_ID}}" {SETUP_COMMIT_LABEL}="${{SETUP_COMMIT}}"',
            "",
        ]
    )


def marker(profile_id: str, setup_commit: str) -> bytes:
    """What an image says about itself: the profile it is and the commit it was built at."""
    fields = {"profile_id": profile_id, "setup_commit": setup_commit}
    return json.dumps(fields, sort_keys=True).encode()


def build_context(repo_tar: bytes, ca_bundle: bytes, marker_bytes: bytes) -> bytes:
    """The build context as one tar: the repo tree (already under ``repo/``) and trajforge/."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        with tarfile.open(fileobj=io.BytesIO(repo_tar), mode="r") as repo:
            for member in repo.getmembers():
                tar.addfile(member, repo.extractfile(member) if member.isfile() else None)
        for name, content in (("trajforge/ca.crt", ca_bundle), (MARKER_SOURCE, marker_bytes)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()
