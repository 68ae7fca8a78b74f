"""Build one environment image per EnvProfile, once, and reuse it for every commit of the profile.

The build runs the profile's install commands in a container of the base image with the network on
(and the configured CA bundle, for TLS-intercepting proxies), then clears /repo and commits. Test
runs later copy each commit's code into /repo; the editable install picks it up.
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
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.storage import write_bytes_atomic
from trajforge.verifiers.sandbox.base import Sandbox, Session, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive

CA_PATH = "/tmp/trajforge/ca.crt"  # removed before the image is committed
LOG_TAIL = 4000
# Bump when the build recipe changes, so cached build failures are retried with the new recipe.
BUILD_RECIPE = "build-v2"
# /repo is a plain tree (no .git), so setuptools-scm / hatch-vcs cannot read a version from git.
PRETEND_VERSION = {
    "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0",
    "VCS_VERSIONING_PRETEND_VERSION": "0.0.0",
}
ALREADY_BUILT = "image already built"  # the log of a reused image that recorded none
# Written into every image's /venv after the install (the one path every backend keeps): which
# profile it is and the commit it was built at, so a reused image reports its real setup commit.
ENV_MARKER = "/venv/trajforge-env.json"


def build_env_image(
    sandbox: Sandbox, profile: EnvProfile, repo_path: str, params: EnvironmentParams, logs_dir: str
) -> EnvProfile:
    """The profile with status "built" (image ready) or "failed" (log says why).

    A reused image returns what its build recorded (read from its marker): the setup commit it
    was really built at, which may be another commit of the same source than
    ``profile.setup_commit``, and the build's log tail. An image without a readable marker of
    this profile is built again.
    """
    if sandbox.has_image(profile.image):
        recorded = image_marker(sandbox, profile)
        if recorded is not None:  # the build's own record, so a rerun writes the same bytes
            commit, tail = recorded
            return dataclasses.replace(profile, status="built", setup_commit=commit, log=tail)
    base = base_image_tag(profile.python)
    if not sandbox.has_image(base):
        raise UserError(
            f"{profile.repo}: base image {base} is missing; run `make setup` "
            f"or `trajforge base-image --python {profile.python}`",
            reason="no_base_image",
        )
    log: list[str] = []
    with sandbox.session(build_session_spec(base, params)) as session:
        installed = install_profile(session, profile, repo_path, params, log)
        if not installed:
            return _finish(profile, "failed", log, logs_dir)
        clean = f"find /repo -mindepth 1 -delete && rm -rf {shlex.quote(os.path.dirname(CA_PATH))}"
        session.exec(clean, timeout_s=120, workdir="/")
        marker = _marker(profile, log)
        session.put_archive(_single_file_tar(os.path.basename(ENV_MARKER), marker), "/venv")
        session.commit(profile.image)
    return _finish(profile, "built", log, logs_dir)


def image_marker(sandbox: Sandbox, profile: EnvProfile) -> tuple[str, str] | None:
    """What the profile's image recorded when it was built (its setup commit and build log
    tail), or None when its marker is missing or names another profile."""
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        data = session.read_file(ENV_MARKER)
    try:
        marker = json.loads(data or b"")
    except ValueError:
        return None
    if not isinstance(marker, dict) or marker.get("profile_id") != profile.profile_id:
        return None
    commit, log = marker.get("setup_commit"), marker.get("log", ALREADY_BUILT)
    if not isinstance(commit, str) or not commit or not isinstance(log, str):
        return None
    return commit, log


def _marker(profile: EnvProfile, log: list[str]) -> bytes:
    fields = {
        "profile_id": profile.profile_id,
        "setup_commit": profile.setup_commit,
        "log": "\n".join(log)[-LOG_TAIL:],  # as _finish records it
    }
    return json.dumps(fields, sort_keys=True).encode()


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
        session.put_archive(_single_file_tar(CA_PATH.lstrip("/"), _read(params.ca_bundle)))
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
    if params.ca_bundle:
        if not os.path.isfile(params.ca_bundle):
            raise UserError(
                f"environment.ca_bundle: {params.ca_bundle} does not exist; "
                "point it at your CA bundle or set it to null",
                reason="bad_params",
            )
        env.update({"PIP_CERT": CA_PATH, "SSL_CERT_FILE": CA_PATH, "REQUESTS_CA_BUNDLE": CA_PATH})
    if params.pip_index_url:
        env["PIP_INDEX_URL"] = params.pip_index_url
    return env


def _finish(profile: EnvProfile, status: str, log: list[str], logs_dir: str) -> EnvProfile:
    text = "\n".join(log)
    write_bytes_atomic(os.path.join(logs_dir, f"{profile.profile_id}.log"), text.encode())
    return dataclasses.replace(profile, status=status, log=text[-LOG_TAIL:])


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
