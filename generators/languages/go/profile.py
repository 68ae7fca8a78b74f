"""A Go site as the stages see it: an ``EnvProfile`` detected at a commit, built once.

``detect_at`` detects the commit's tree (its go.mod, go.work, go.sum and vendor/modules.txt
files and its ``.go`` files' heads, written into a scratch folder: never the working copy's
HEAD); ``go_profile`` turns the detection into a profile keyed by the source's identity and what
decides the build (the recipe, the test command, every module's go.mod and go.sum);
``build_go_profile`` builds its image through ``recipe_site.py`` (as JavaScript's), a failed
build being one line (``install_failed``, cached, so a rerun does not build it again);
``go_reading`` tells validate how the profile's runs read: the ``go test -json`` events by
``verifiers/languages/go/test_events.py``, a selection passed as its tests' package folders.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence

from trajforge.generators.environments.recipe_site import RecipeSite, detected_profile
from trajforge.generators.environments.services import services_at
from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.go import detection as project
from trajforge.generators.languages.go import sources
from trajforge.generators.languages.go.base_image import ensure_go_base_image
from trajforge.generators.languages.go.recipe import modules_in_recipe
from trajforge.generators.languages.go.recipe import recipe as go_recipe
from trajforge.generators.languages.go.runners import REPORT_PATH, test_command
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id
from trajforge.verifiers.languages.go.test_events import package_dir, parse_test_events
from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports import ReportError
from trajforge.verifiers.sandbox.git_tree import git
from trajforge.verifiers.test_runner import Reading

GO_PROFILE_FORMAT = "go-profile-v1"
BUILD_VERSION = "go-build-v1"  # the cache of failed builds
# The files detection reads, at any depth (a monorepo's modules), outside vendor/testdata.
PROJECT_FILES = ("go.mod", "go.work", "go.sum", "vendor/modules.txt")
MAX_FILE = 16 * 1024 * 1024
GO_BATCH = 512  # .go blobs read from git at once (their heads are kept)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The go command's progress lines, which say nothing about a failure.
_PROGRESS = ("go: downloading ", "go: finding ", "go: extracting ", "go: found ")


def detect_at(repo_path: str, commit: str) -> Detection:
    """Go's detection of the repository's tree at ``commit``: its project files written into
    a scratch folder, read there."""
    with tempfile.TemporaryDirectory(prefix="trajforge-go-") as tree:
        _write_project_files(repo_path, commit, tree)
        detection = project.detect(tree)
    if detection is None:
        raise UserError(f"{commit[:12]}: no go.mod, no go.work and no .go file; not a Go "
                        "project", reason="no_go")  # fmt: skip
    if not detection.runner_args:
        raise UserError(f"{commit[:12]}: go.work names no folder with a go.mod that has a module "
                        "line; no module to test", reason="no_go_module")  # fmt: skip
    return detection


def go_profile(repo_path: str, commit: str, repo: str, identity: str, params: Params) -> EnvProfile:
    """The detected (not yet built) profile of a Go project at ``commit``."""
    detection = detect_at(repo_path, commit)
    return detected_profile(
        detection, profile_format=GO_PROFILE_FORMAT, repo=repo, identity=identity,
        recipe=go_recipe(detection),
        test_cmd=test_command(detection, (), params.validate.per_test_timeout_s),
        evidence=_build_evidence(repo_path, commit, detection), params=params,
        services=services_at(repo_path, commit),
    )  # fmt: skip


def build_cause(log: str) -> str:
    """One line saying why the build failed: the go command's first error line (``go: ...``,
    not its progress lines), else the log's last line."""
    text = _ANSI.sub("", log.replace("\x1b[0m\n", ""))  # the classic builder's stderr colour
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("go: ") and not line.startswith(_PROGRESS):
            return line[:300]
    return (lines[-1] if lines else "the build said nothing")[:300]


def go_reading(profile: EnvProfile) -> Reading:
    """How a Go profile's runs read: ``go test -json`` at ``REPORT_PATH``, its packages named
    by the recipe's modules; a selection passes its tests' package folders."""
    return Reading(REPORT_PATH, reader(modules_in_recipe(profile.recipe)), select=selected_packages)


GO_SITE = RecipeSite(
    go_profile, go_reading, BUILD_VERSION,
    ensure_base=lambda profile, host, say: ensure_go_base_image(host, say),
    banner=lambda profile: f"{profile.repo}: go {profile.runtime}, {profile.install_set}",
    failure=lambda profile, log: f"go build of the environment failed: {build_cause(log)}",
)  # fmt: skip
# The profile's image (``recipe_site.py``), the tests compiled once in the build; a failed
# build's line is the go command's first error line.
build_go_profile = GO_SITE.build


def reader(modules: Mapping[str, str]) -> Callable[[bytes | None, str], ParsedLog]:
    """The run's events as statuses; no report, or one that does not read, is no statuses and
    the cause as the run's collection error, so the suite counts as not run."""

    def parse(report: bytes | None, log: str) -> ParsedLog:
        if not report:
            return ParsedLog({}, ("go test wrote no report",))
        try:
            return parse_test_events(report.decode("utf-8", "replace"), modules)
        except ReportError as exc:
            return ParsedLog({}, (f"go test report: {exc}",))

    return parse


def selected_packages(selection: Sequence[str]) -> list[str]:
    """The package folders of the selected tests, each once, in order."""
    return sorted({package_dir(test_id) for test_id in selection})


def _write_project_files(repo_path: str, commit: str, into: str) -> None:
    """The commit's go.mod, go.work, go.sum and vendor/modules.txt files (regular files, not
    links, outside testdata and nested vendor folders), and the heads of its ``.go`` files
    (what their build constraints, imports and import comments ask), written into ``into``."""
    listing = git(repo_path, "ls-tree", "-r", "-z", "--long", "--end-of-options", commit).decode(
        "utf-8", "surrogateescape"
    )
    wanted: list[tuple[str, str]] = []
    heads: list[tuple[str, str]] = []
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, blob, size = meta.split()
        if kind != "blob" or mode not in ("100644", "100755") or not size.isdigit():
            continue  # a link, a submodule, a blob a partial clone lacks (size ``BAD``)
        if int(size) > MAX_FILE:
            continue
        parts = path.split("/")
        name = "/".join(parts[-2:]) if parts[-1] == "modules.txt" else parts[-1]
        inside = parts[:-2] if name == "vendor/modules.txt" else parts[:-1]
        if name in PROJECT_FILES and not set(inside) & {"vendor", "testdata", ".git"}:
            wanted.append((blob, path))
        elif _is_go_source(parts) and len(heads) < sources.MAX_GO_FILES:
            heads.append((blob, path))
    _write_blobs(repo_path, wanted, into, MAX_FILE)
    for at in range(0, len(heads), GO_BATCH):
        _write_blobs(repo_path, heads[at : at + GO_BATCH], into, sources.HEAD_BYTES)


def _is_go_source(parts: list[str]) -> bool:
    """A ``.go`` file the go command would build: not in a folder it skips (``SKIPPED``,
    hidden, ``_``-prefixed), not itself hidden or ``_``-prefixed."""
    skipped = any(p in project.SKIPPED or p.startswith((".", "_")) for p in parts[:-1])
    return parts[-1].endswith(".go") and not parts[-1].startswith((".", "_")) and not skipped


def _write_blobs(repo_path: str, blobs: list[tuple[str, str]], into: str, limit: int) -> None:
    """Each ``(blob, path)``'s first ``limit`` bytes written at ``into/path``."""
    if not blobs:
        return
    out = git(repo_path, "cat-file", "--batch", input="".join(f"{b}\n" for b, _ in blobs).encode())
    at = 0
    for _, path in blobs:  # each: "<sha> blob <size>\n<bytes>\n", or "<sha> missing\n"
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) != 3:  # a blob the clone lacks (a partial mirror): nothing to read
            at = header_end + 1
            continue
        length = int(header[2])
        target = os.path.join(into, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(out[header_end + 1 : header_end + 1 + min(length, limit)])
        at = header_end + 1 + length + 1


def _build_evidence(repo_path: str, commit: str, detection: Detection) -> str:
    """A digest of what decides the build at ``commit``: every module's go.mod and go.sum
    blob (a commit that changes none of them shares the image)."""
    names = []
    for module in project.modules(detection):
        prefix = "" if module.folder == "." else f"{module.folder}/"
        names += [f"{prefix}go.mod", f"{prefix}go.sum"]
    names += ["go.work", "go.work.sum"]
    blobs = git(repo_path, "ls-tree", "-z", "--end-of-options", commit, "--", *names)
    return content_id(blobs.decode("utf-8", "surrogateescape"))
