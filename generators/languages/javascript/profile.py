"""A JavaScript site as the stages see it: an ``EnvProfile`` detected at a commit, built once.

The stages key items by profile (``pipelines/stages/environment.py``); this adapter gives a JS
repository's commit the same record a Python one gets: ``detect_at`` detects the commit's tree
(never the working copy's HEAD), ``js_profile`` turns the detection into a profile keyed by the
source's identity and what decides the install (the recipe, the runner's command,
package.json's dependency tables, the lock file), and ``build_js_profile`` builds its image
through ``recipe_site.py`` (as Go's), a failed install being one line
(``install_failed``, cached, so a rerun does not build it again). ``js_reading`` tells validate
how the profile's runs read: the runner's report, and a selection passed as files.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence

from trajforge.generators.environments.recipe_site import RecipeSite, detected_profile
from trajforge.generators.environments.services import services_at
from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.javascript import detection as project
from trajforge.generators.languages.javascript.base_image import ensure_node_base_image
from trajforge.generators.languages.javascript.detection import LOCKS, test_file
from trajforge.generators.languages.javascript.environment import JS_PROFILE_FORMAT, _reader
from trajforge.generators.languages.javascript.install_cause import install_cause
from trajforge.generators.languages.javascript.runners import REPORT_PATH
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id
from trajforge.verifiers.sandbox.git_tree import GitError, git, read_file_at
from trajforge.verifiers.test_runner import Reading

BUILD_VERSION = "js-build-v1"  # the cache of failed installs
MAX_TOP_FILE = 64 * 1024 * 1024  # a top-level file larger than this is no project file
# Workspace packages read for detection: folders this deep at most, this many at most, never
# inside installed or VCS folders.
PACKAGE_DEPTH = 4
MAX_PACKAGES = 500
SKIPPED_FOLDERS = frozenset({"node_modules", ".git", ".yarn"})
# package.json's tables that decide what the install puts in node_modules
INSTALL_TABLES = (
    "dependencies", "devDependencies", "optionalDependencies", "peerDependencies",
    "workspaces", "packageManager", "engines", "overrides", "resolutions",
)  # fmt: skip


def detect_at(repo_path: str, commit: str) -> Detection:
    """JavaScript's detection of the repository's tree at ``commit`` (its top-level files,
    whole: the lock file's format picks pnpm's major), read with the commit's own date (its
    era's Node) through a throwaway repository whose HEAD is ``commit`` (objects borrowed, not
    copied). Which language the commit is stays ``at_commit.language_at``'s answer."""
    with tempfile.TemporaryDirectory(prefix="trajforge-js-") as tree:
        _write_top_files(repo_path, commit, tree)
        _borrow_commit(repo_path, commit, tree)
        detection = project.detect(tree)
    if detection is None:
        raise UserError(f"{commit[:12]}: no package.json at the top; not a JavaScript project",
                        reason="no_js")  # fmt: skip
    return detection


def js_profile(repo_path: str, commit: str, repo: str, identity: str, params: Params) -> EnvProfile:
    """The detected (not yet built) profile of a JS project at ``commit``; a UserError with one
    line for a runner trajforge cannot run yet (``unsupported_runner``)."""
    detection = detect_at(repo_path, commit)
    return detected_profile(
        detection, profile_format=JS_PROFILE_FORMAT, repo=repo, identity=identity,
        recipe=project.recipe(detection),
        test_cmd=project.test_command(detection, (), params.validate.per_test_timeout_s),
        evidence=_install_evidence(repo_path, commit, detection.lockfile), params=params,
        services=services_at(repo_path, commit),
    )  # fmt: skip


def js_reading(profile: EnvProfile) -> Reading:
    """How a JS profile's runs read: its runner's report at ``REPORT_PATH``, a missing or
    unreadable one being the run's collection error; a selection passes its tests' files."""
    return Reading(REPORT_PATH, _reader(profile.runner), select=selected_files)


JS_SITE = RecipeSite(
    js_profile, js_reading, BUILD_VERSION,
    ensure_base=lambda profile, host, say: ensure_node_base_image(profile.runtime, host, say),
    banner=lambda p: f"{p.repo}: node {p.runtime}, {p.install_set}, {p.runner}",
    failure=lambda profile, log: f"{profile.install_set} install failed: {install_cause(log)}",
)  # fmt: skip
# The profile's image (``recipe_site.py``); a failed install's line is the package manager's
# first error line.
build_js_profile = JS_SITE.build


def selected_files(selection: Sequence[str]) -> list[str]:
    """The files that hold the selected tests, each once, in order."""
    return sorted({test_file(test_id) for test_id in selection})


def _write_top_files(repo_path: str, commit: str, into: str) -> None:
    """The commit's top-level regular files (not links, not folders) written into ``into``,
    and the files beside every nested package.json (a workspace package's own manifest and
    configuration: a monorepo's tested package is found from them), read in one
    ``git cat-file --batch``."""
    listing = git(repo_path, "ls-tree", "-r", "-z", "--long", "--end-of-options", commit).decode(
        "utf-8", "surrogateescape"
    )
    files: dict[str, list[tuple[str, str]]] = {}  # folder -> [(blob, path)]
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, blob, size = meta.split()
        parts = path.split("/")
        regular = kind == "blob" and mode in ("100644", "100755")
        if regular and int(size) <= MAX_TOP_FILE and not set(parts) & SKIPPED_FOLDERS:
            files.setdefault("/".join(parts[:-1]), []).append((blob, path))
    packages = [f for f in files if f and len(f.split("/")) <= PACKAGE_DEPTH and any(
        p.endswith("/package.json") for _, p in files[f])]  # fmt: skip
    wanted = [*files.get("", []), *(w for f in sorted(packages)[:MAX_PACKAGES] for w in files[f])]
    if not wanted:
        return
    out = git(repo_path, "cat-file", "--batch", input="".join(f"{b}\n" for b, _ in wanted).encode())
    at = 0
    for _, path in wanted:  # each: "<sha> blob <size>\n<bytes>\n"
        header_end = out.index(b"\n", at)
        length = int(out[at:header_end].split()[2])
        target = os.path.join(into, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(out[header_end + 1 : header_end + 1 + length])
        at = header_end + 1 + length + 1


def _borrow_commit(repo_path: str, commit: str, tree: str) -> None:
    """Make ``tree`` a repository whose HEAD is ``commit``, its objects read from ``repo_path``
    (git's alternates), so what a language reads of the commit (its date) is the commit's."""
    objects = git(repo_path, "rev-parse", "--path-format=absolute", "--git-path", "objects")
    sha = git(repo_path, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}")
    dot_git = os.path.join(tree, ".git")
    os.makedirs(os.path.join(dot_git, "objects", "info"))
    os.makedirs(os.path.join(dot_git, "refs", "heads"))
    with open(os.path.join(dot_git, "objects", "info", "alternates"), "wb") as handle:
        handle.write(objects.strip() + b"\n")
    with open(os.path.join(dot_git, "HEAD"), "wb") as handle:
        handle.write(sha.strip() + b"\n")


def _install_evidence(repo_path: str, commit: str, lockfile: str) -> str:
    """A digest of what decides the install at ``commit``: package.json's install tables and
    the lock file's blob (a commit that changes neither shares the image)."""
    try:
        data = json.loads(read_file_at(repo_path, commit, "package.json"))
    except (GitError, ValueError):
        data = {}
    tables = {k: data.get(k) for k in INSTALL_TABLES} if isinstance(data, dict) else {}
    lock = b""  # the lock file's blob id
    if lockfile in dict(LOCKS):
        lock = git(repo_path, "rev-parse", "--verify", "--end-of-options", f"{commit}:{lockfile}")
    return content_id(tables, lock.decode().strip())
