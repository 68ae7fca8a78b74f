"""Build one environment image per EnvProfile, once, and reuse it for every commit of the profile.

Backends with real images (Docker, podman) build the profile's recipe (``recipe.py``: a
Dockerfile) with the network on and the configured CA bundle as a build input, so the image is
exactly what anyone rebuilds from the exported recipe. The local backend has no images: it runs
the same install commands in a session and records the venv. Test runs later copy each commit's
code into /repo; the editable install picks it up.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
import tarfile
import time

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.recipe import (
    CA_FILE,
    ENV_MARKER,
    PRETEND_VERSION,
    build_context,
    marker,
)
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.storage import write_bytes_atomic
from trajforge.verifiers.sandbox.base import (
    BuildResult,
    ImageBuild,
    ImageStore,
    Sandbox,
    Session,
    SessionSpec,
)
from trajforge.verifiers.sandbox.git_tree import archive

LOG_TAIL = 4000
ALREADY_BUILT = "image already built"  # the log of a reused image whose build log is not here


def build_env_image(
    sandbox: Sandbox, profile: EnvProfile, repo_path: str, params: EnvironmentParams, logs_dir: str
) -> EnvProfile:
    """The profile with status "built" (image ready) or "failed" (log says why).

    A reused image returns what its build recorded: the setup commit it was really built at (from
    its marker), which may be another commit of the same source than ``profile.setup_commit``,
    and the build's log tail (from this machine's build log; ALREADY_BUILT for an image built
    elsewhere). An image without a readable marker of this profile is built again.
    """
    if sandbox.has_image(profile.image):
        commit = image_marker(sandbox, profile)
        if commit is not None:
            log = _read_log(logs_dir, profile.profile_id)
            return dataclasses.replace(profile, status="built", setup_commit=commit, log=log)
    base = base_image_tag(profile.python)
    if not sandbox.has_image(base):
        raise UserError(
            f"{profile.repo}: base image {base} is missing; run `make setup` "
            f"or `trajforge base-image --python {profile.python}`",
            reason="no_base_image",
        )
    if isinstance(sandbox, ImageStore):
        ok, log = _build_recipe(sandbox, profile, repo_path, params)
        return _finish(profile, "built" if ok else "failed", log, logs_dir)
    log_lines: list[str] = []
    with sandbox.session(build_session_spec(base, params)) as session:
        installed = install_profile(session, profile, repo_path, params, log_lines)
        if not installed:
            return _finish(profile, "failed", "\n".join(log_lines), logs_dir)
        clean = f"find /repo -mindepth 1 -delete && rm -rf {shlex.quote(os.path.dirname(CA_FILE))}"
        session.exec(clean, timeout_s=120, workdir="/")
        marker_bytes = marker(profile.profile_id, profile.setup_commit)
        session.put_archive(_single_file_tar(os.path.basename(ENV_MARKER), marker_bytes), "/venv")
        session.commit(profile.image)
    return _finish(profile, "built", "\n".join(log_lines), logs_dir)


def _build_recipe(
    store: ImageStore, profile: EnvProfile, repo_path: str, params: EnvironmentParams
) -> tuple[bool, str]:
    """``docker build`` (or podman's) of the profile's recipe at its setup commit."""
    result = build_recipe(
        store, profile.image, profile.recipe, profile.profile_id, profile.setup_commit,
        repo_path, params,
    )  # fmt: skip
    return result.ok, result.log


def build_recipe(
    store: ImageStore,
    image: str,
    recipe: str,
    profile_id: str,
    setup_commit: str,
    repo_path: str,
    params: EnvironmentParams,
) -> BuildResult:
    """Build ``recipe`` (a Dockerfile from ``recipe.py``) at ``setup_commit`` as ``image``: what a
    profile's build does, and what rebuilds an exported task's environment from its row."""
    ca = _read(params.ca_bundle) if params.ca_bundle and _ca_exists(params.ca_bundle) else b""
    context = build_context(
        archive(repo_path, setup_commit, prefix="repo/"), ca, marker(profile_id, setup_commit)
    )
    build_args = {"PROFILE_ID": profile_id, "SETUP_COMMIT": setup_commit}
    if params.pip_index_url:
        build_args["PIP_INDEX"] = params.pip_index_url
    request = ImageBuild(
        tag=image,
        dockerfile=recipe,
        context=context,
        build_args=build_args,
        timeout_s=params.build_timeout_s,
    )
    return store.build_image(request)


def image_marker(sandbox: Sandbox, profile: EnvProfile) -> str | None:
    """The setup commit the profile's image recorded when it was built, or None when its marker
    is missing or names another profile."""
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        data = session.read_file(ENV_MARKER)
    try:
        recorded = json.loads(data or b"")
    except ValueError:
        return None
    if not isinstance(recorded, dict) or recorded.get("profile_id") != profile.profile_id:
        return None
    commit = recorded.get("setup_commit")
    return commit if isinstance(commit, str) and commit else None


def build_session_spec(image: str, params: EnvironmentParams) -> SessionSpec:
    """A networked session for installing (the only kind that gets a network)."""
    return SessionSpec(image=image, network=True, env=build_env(params))


def install_profile(
    session: Session, profile: EnvProfile, repo_path: str, params: EnvironmentParams, log: list[str]
) -> bool:
    """Put the repo at the profile's setup commit in /repo, make /venv, run the install commands.

    Shared by image builds and by anything that wants a fresh environment per task (the
    benchmark's SWE-bench-style baseline). Appends each command and its output to ``log``.
    """
    session.put_archive(archive(repo_path, profile.setup_commit, prefix="repo/"))
    if params.ca_bundle:
        session.put_archive(_single_file_tar(CA_FILE.lstrip("/"), _read(params.ca_bundle)))
    deadline = time.monotonic() + params.build_timeout_s
    steps = [("/", "python3 -m venv /venv"), *(("/repo", cmd) for cmd in profile.install)]
    for workdir, command in steps:
        remaining = deadline - time.monotonic()
        result = session.exec(command, timeout_s=max(remaining, 1), workdir=workdir)
        log.append(f"$ {command}\n{result.output}")
        if result.timed_out or result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exit {result.exit_code}"
            log.append(f"install step failed ({why}): {command}")
            return False
    return True


def build_env(params: EnvironmentParams) -> dict[str, str]:
    """Variables an install sees: the CA bundle, the index, a version for VCS-versioned builds."""
    env: dict[str, str] = dict(PRETEND_VERSION)
    if params.ca_bundle and _ca_exists(params.ca_bundle):
        env.update({"PIP_CERT": CA_FILE, "SSL_CERT_FILE": CA_FILE, "REQUESTS_CA_BUNDLE": CA_FILE})
    if params.pip_index_url:
        env["PIP_INDEX_URL"] = params.pip_index_url
    return env


def _finish(profile: EnvProfile, status: str, log: str, logs_dir: str) -> EnvProfile:
    write_bytes_atomic(_log_path(logs_dir, profile.profile_id), log.encode())
    return dataclasses.replace(profile, status=status, log=log[-LOG_TAIL:])


def _log_path(logs_dir: str, profile_id: str) -> str:
    return os.path.join(logs_dir, f"{profile_id}.log")


def _read_log(logs_dir: str, profile_id: str) -> str:
    try:
        return _read(_log_path(logs_dir, profile_id)).decode("utf-8", "replace")[-LOG_TAIL:]
    except OSError:
        return ALREADY_BUILT


def _ca_exists(path: str) -> bool:
    if not os.path.isfile(path):
        raise UserError(
            f"environment.ca_bundle: {path} does not exist; "
            "point it at your CA bundle or set it to null",
            reason="bad_params",
        )
    return True


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _single_file_tar(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
