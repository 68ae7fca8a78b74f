"""Build one environment image per EnvProfile, once, and reuse it for every commit of the profile.

Backends with real images (Docker, podman) build the profile's recipe (``recipe.py``: a
Dockerfile) with the network on and the configured CA bundle as a build input, so the image is
exactly what anyone rebuilds from the exported recipe. The local backend has no images: it runs
the same install commands in a session and records the venv. Test runs later copy each commit's
code into /repo; the editable install picks it up.

An image is trusted by content, never by its name: every build labels its image with the hash of
the recipe and build context it was built from (``trajforge.recipe``, set by the builder over
anything the recipe says), and an image found under a profile's name is reused only when that
label equals the hash trajforge computes for the profile itself (``trusted_commit``). Anything
else under the name (an older trajforge's image, a user's, one a tasks file got built) is rebuilt.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
import sys
import tarfile
import time
from collections.abc import Callable

from trajforge.generators.environments.base_image import base_image_tag, ensure_for_sandbox
from trajforge.generators.environments.dependency_layer import dependency_files
from trajforge.generators.environments.recipe import (
    CA_FILE,
    ENV_KIND,
    ENV_MARKER,
    KIND_LABEL,
    PRETEND_VERSION,
    PROFILE_LABEL,
    RECIPE_LABEL,
    SETUP_COMMIT_LABEL,
    build_context,
    marker,
    recipe_hash,
    recipe_install,
)
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams, Params, size_bytes
from trajforge.schemas.storage import ContentCache, write_bytes_atomic
from trajforge.verifiers.sandbox.base import (
    BuildResult,
    ImageBuild,
    ImageStore,
    Sandbox,
    Session,
    SessionSpec,
)
from trajforge.verifiers.sandbox.faults import (
    MachineFault,
    check_free_space,
    free_bytes,
    machine_fault,
)
from trajforge.verifiers.sandbox.git_tree import GitError, archive, git

LOG_TAIL = 4000
ALREADY_BUILT = "image already built"  # the log of a reused image whose build log is not here
GIB = 1024**3


class ImageTooLarge(UserError):
    """An environment image over ``environment.max_image_size``: removed, never kept, and its
    sites rejected. Not a failed install (the install worked), so no install rung is tried."""

    reason = "image_too_large"


def image_sizes(params: Params) -> ContentCache:
    """What each recipe's image measured when it was over the cap, by recipe hash: a rerun
    refuses it before building again, and a higher cap builds it again."""
    return ContentCache(params.results_cache, "image-sizes")


def image_bytes(store: ImageStore, image: str) -> int:
    """The image's size on disk: every layer once, the base image's included (0: not here)."""
    info = store.image_info(image)
    return sum(size for _, size in info.layers) if info is not None else 0


def build_env_image(
    sandbox: Sandbox,
    profile: EnvProfile,
    repo_path: str,
    params: EnvironmentParams,
    logs_dir: str,
    note: Callable[[str], None] | None = None,
    sizes: ContentCache | None = None,
) -> EnvProfile:
    """The profile with status "built" (image ready) or "failed" (log says why).

    An image already here is reused only when it is trusted by content (``trusted_commit``: its
    recipe label equals the recipe hash trajforge computes for this profile; on the local
    backend, which has no labels and builds nothing anyone else can name, its marker). Then it
    returns what its build recorded: the setup commit it was really built at, which may be
    another commit of the same source than ``profile.setup_commit``, and the build's log tail
    (from this machine's build log; ALREADY_BUILT for an image built elsewhere). Any other image
    under the profile's name is built again, and ``note`` hears one line saying why.
    ``sizes`` remembers an image over the cap (``build_recipe``).
    """
    if sandbox.has_image(profile.image):
        if isinstance(sandbox, ImageStore):
            commit, why = trusted_commit(sandbox, profile, repo_path)
        else:
            commit, why = image_marker(sandbox, profile), "its marker names no setup commit of it"
        if commit is not None:
            log = _read_log(logs_dir, profile.profile_id)
            return dataclasses.replace(profile, status="built", setup_commit=commit, log=log)
        if note is not None:
            note(refused_line(profile, why))
    base = base_image_tag(profile.python)
    if not sandbox.has_image(base):  # built on demand, once per machine (base_image.py's lock)
        try:
            ensure_for_sandbox(sandbox, profile.python, say=_tell)
        except UserError as exc:
            raise UserError(f"{profile.repo}: {exc}", reason="no_base_image") from None
    started = time.monotonic()
    if isinstance(sandbox, ImageStore):
        ok, log = _build_recipe(sandbox, profile, repo_path, params, sizes)
        return _finish(profile, "built" if ok else "failed", log, logs_dir, started)
    log_lines: list[str] = []
    with sandbox.session(build_session_spec(base, params)) as session:
        installed = install_profile(session, profile, repo_path, params, log_lines)
        if not installed:
            return _finish(profile, "failed", "\n".join(log_lines), logs_dir, started)
        clean = f"find /repo -mindepth 1 -delete && rm -rf {shlex.quote(os.path.dirname(CA_FILE))}"
        session.exec(clean, timeout_s=120, workdir="/")
        marker_bytes = marker(profile.profile_id, profile.setup_commit)
        session.put_archive(_single_file_tar(os.path.basename(ENV_MARKER), marker_bytes), "/venv")
        session.commit(profile.image)
    return _finish(profile, "built", "\n".join(log_lines), logs_dir, started)


def _build_recipe(
    store: ImageStore,
    profile: EnvProfile,
    repo_path: str,
    params: EnvironmentParams,
    sizes: ContentCache | None,
) -> tuple[bool, str]:
    """``docker build`` (or podman's) of the profile's recipe at its setup commit."""
    result = build_recipe(
        store, profile.image, profile.recipe, profile.profile_id, profile.setup_commit,
        repo_path, params, sizes=sizes,
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
    kind: str = ENV_KIND,
    sizes: ContentCache | None = None,
) -> BuildResult:
    """Build ``recipe`` (a Dockerfile from ``recipe.py``) at ``setup_commit`` as ``image``: what a
    profile's build does (``kind`` ENV_KIND), and what rebuilds a task row's environment from the
    row (EVAL_KIND, always as ``trajforge-eval:<recipe hash>``: ``task_image.py``).

    The image is labelled by the builder, over anything the recipe's text says: its recipe hash
    (``recipe_digest``), its kind, profile id and setup commit. What trusts an image later
    (``trusted_commit``, ``task_image.py``) compares that hash with one it computes itself.

    A fault of the machine is raised, never returned as a failed build (a caller caches those):
    ``DiskFull`` before a build when the engine's storage is below ``params.min_free_gb``, a
    ``MachineFault`` when the build failed on a full disk or an engine error (``faults.py``).

    An image over ``params.max_image_size`` is removed and ``ImageTooLarge`` raised; ``sizes``
    remembers its size by recipe hash, so the next run refuses it without building.
    """
    digest = recipe_digest(repo_path, recipe, profile_id, setup_commit)
    limit = params.max_image_size
    cap = size_bytes("environment.max_image_size", limit) if limit else 0
    known = sizes.get(digest) if sizes is not None and cap else None
    if known is not None and int(known.get("bytes", 0)) > cap:
        raise too_large(image, int(known["bytes"]), params, "measured so before; not built again")
    where = store.storage_path()
    free = free_bytes(where) if where else None
    check_free_space(free, where or "", params.min_free_gb, image)
    ca = _read(params.ca_bundle) if params.ca_bundle and _ca_exists(params.ca_bundle) else b""
    deps = dependency_files(repo_path, setup_commit, recipe_install(recipe))
    context = build_context(
        archive(repo_path, setup_commit, prefix="repo/"), ca, marker(profile_id, setup_commit), deps
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
        labels={
            RECIPE_LABEL: digest,
            KIND_LABEL: kind,
            PROFILE_LABEL: profile_id,
            SETUP_COMMIT_LABEL: setup_commit,
        },
    )
    result = store.build_image(request)
    fault = "" if result.ok or result.timed_out else machine_fault(result.log)
    if fault:
        raise MachineFault(f"{image}: the machine failed the build, not the project: {fault}")
    if result.ok and cap and (size := image_bytes(store, image)) > cap:
        store.remove_image(image)
        if sizes is not None:
            sizes.put(digest, {"bytes": size, "image": image})
        raise too_large(image, size, params, "removed")
    return result


def too_large(image: str, size: int, params: EnvironmentParams, done: str) -> ImageTooLarge:
    """The one line for an image over the cap: how big, the cap, and what a user can do."""
    return ImageTooLarge(
        f"{image}: the environment image is {size / GIB:.2f} GiB, over "
        f"environment.max_image_size ({params.max_image_size}); {done}. Raise the cap, or pin "
        "a CPU build of what brings the weight (a CUDA torch is several GB)"
    )


def recipe_digest(repo_path: str, recipe: str, profile_id: str, setup_commit: str) -> str:
    """``recipe_hash`` of ``recipe`` built at ``setup_commit`` of the repository at ``repo_path``
    (its git tree is the build context's content); a GitError when the commit is not there."""
    if not setup_commit or setup_commit.startswith("-"):
        raise GitError(f"{setup_commit!r} is no commit", stderr_tail="not a commit")
    tree = git(repo_path, "rev-parse", "--verify", "--end-of-options", f"{setup_commit}^{{tree}}")
    return recipe_hash(recipe, tree.decode().strip(), profile_id, setup_commit)


def refused_line(profile: EnvProfile, why: str) -> str:
    """The one line that says why an image under a profile's name is rebuilt, not reused."""
    return f"profile {profile.profile_id}: {profile.image} here is rebuilt, not reused: {why}"


def trusted_commit(
    store: ImageStore, profile: EnvProfile, repo_path: str
) -> tuple[str | None, str]:
    """(the setup commit it was built at, "") when the image under ``profile.image`` was built
    from the profile's own recipe, by content: its recipe label equals the hash trajforge
    computes for the profile's recipe at the commit the image records (a commit of this same
    source, so the image may come from another commit of the profile than ``setup_commit``).
    Else (None, why): no label (an older trajforge, or not trajforge), another recipe, a commit
    this repository does not have. A name is not trust: a tasks file could have named any image
    this one, and an image's marker is whatever its recipe copied in."""
    info = store.image_info(profile.image)
    if info is None:
        return None, "it is not here"
    recorded = info.labels.get(RECIPE_LABEL, "")
    commit = info.labels.get(SETUP_COMMIT_LABEL, "")
    if not recorded:
        return None, f"it carries no {RECIPE_LABEL} label (not built by this trajforge)"
    if info.labels.get(PROFILE_LABEL) != profile.profile_id:
        return None, f"its {PROFILE_LABEL} label names another profile"
    try:
        expected = recipe_digest(repo_path, profile.recipe, profile.profile_id, commit)
    except GitError:
        return None, f"its setup commit {commit[:12]!r} is not a commit of this repository"
    if expected != recorded:
        return None, (
            f"it was built from another recipe ({RECIPE_LABEL} {recorded[:12]}, the profile's "
            f"recipe is {expected[:12]})"
        )
    return commit, ""


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


def _finish(
    profile: EnvProfile, status: str, log: str, logs_dir: str, started: float
) -> EnvProfile:
    """The profile after its build: status, log tail and the build's seconds (``build_s``)."""
    write_bytes_atomic(_log_path(logs_dir, profile.profile_id), log.encode())
    seconds = round(time.monotonic() - started, 2)
    return dataclasses.replace(profile, status=status, log=log[-LOG_TAIL:], build_s=seconds)


def _log_path(logs_dir: str, profile_id: str) -> str:
    return os.path.join(logs_dir, f"{profile_id}.log")


def _read_log(logs_dir: str, profile_id: str) -> str:
    try:
        return _read(_log_path(logs_dir, profile_id)).decode("utf-8", "replace")[-LOG_TAIL:]
    except OSError:
        return ALREADY_BUILT


def _tell(line: str) -> None:
    """One line to the user, on stderr (stdout may be a command's answer)."""
    print(line, file=sys.stderr, flush=True)


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
