"""Commit mining: a candidate is a commit whose diff touches both non-test code and tests.

Merges are followed by first parent, so a merged pull request is mined as one change against the
mainline it landed on. The diff is split into ``patch`` (non-test files) and ``test_patch`` by
the rules of the repository's language at the parent commit (``languages/at_commit.py``,
``diff_split.rules_for``): Python's as always, JavaScript/TypeScript's test-file conventions and
generated files for a package.json project.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.mining.diff_split import FileRules, rules_for
from trajforge.generators.sources.specs import RepoRef
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import MineParams
from trajforge.schemas.records import content_id
from trajforge.schemas.rejection import Rejection
from trajforge.verifiers.sandbox.git_tree import GitError, git, resolve_commit

STAGE = "mine"


@dataclass(frozen=True)
class ChangedFile:
    path: str
    added: int
    removed: int
    binary: bool


def check_date(name: str, value: str | None) -> None:
    """A ``--since``/``--until`` git cannot read is one line, not a log that silently mines
    nothing (``git log --since`` reads any text, garbage as "now"): git's careful date parser,
    the one behind its expiry dates, says which it can read."""
    if not value:
        return
    proc = subprocess.run(
        ["git", "-c", f"trajforge.date={value}", "config", "--type=expiry-date", "trajforge.date"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ParamsError(
            f"mine: {name} {value!r} is not a date git can read; use e.g. 2024-01-31, "
            "'2024-01-31 12:00' or '3 weeks ago'"
        )


def list_commits(repo: RepoRef, params: MineParams) -> tuple[list[str], list[Rejection]]:
    """The commits to mine, newest first: the ``commits`` asked for, else the first-parent log."""
    if params.commits:
        found, rejected = [], []
        for rev in params.commits:
            sha = resolve_commit(repo.path, rev)
            if sha is None:
                detail = (
                    f"{repo.name}: no commit {rev!r}; check the SHA (git log) or drop --commits"
                )
                rejected.append(Rejection(f"{repo.name}@{rev}", STAGE, "unknown_commit", detail))
            else:
                found.append(sha)
        return found, rejected
    args = ["rev-list", "--first-parent", f"--max-count={params.max_commits}"]
    if params.since:
        args.append(f"--since={params.since}")
    if params.until:
        args.append(f"--until={params.until}")
    try:
        return git(repo.path, *args, "HEAD").decode().split(), []
    except GitError as exc:
        return [], [Rejection(repo.source, STAGE, "empty_repo", f"{repo.name}: {exc}")]


def has_tests(repo: RepoRef) -> bool:
    """Whether HEAD holds a test file by the conventions of HEAD's language."""
    try:
        names = git(repo.path, "ls-tree", "-r", "--name-only", "HEAD").decode("utf-8", "replace")
        rules = rules_for(language_at(repo.path, "HEAD"))
    except GitError:
        return False
    return any(rules.is_test(name) and not rules.is_generated(name) for name in names.splitlines())


def rules_at(repo: RepoRef, commit: str) -> FileRules:
    """The file rules of the repository's language at ``commit``."""
    return rules_for(language_at(repo.path, commit))


def changed_files(repo: RepoRef, parent: str, sha: str) -> list[ChangedFile]:
    raw = git(repo.path, "diff", "--numstat", "-z", "--no-renames", parent, sha)
    files = []
    for entry in raw.split(b"\0"):
        if not entry:
            continue
        added, removed, path = entry.decode("utf-8", "surrogateescape").split("\t", 2)
        binary = added == "-"
        files.append(
            ChangedFile(path, 0 if binary else int(added), 0 if binary else int(removed), binary)
        )
    return files


NO_OBJECT = "0" * 40  # the missing side of an added or deleted file
GITLINK = "160000"  # a submodule: a commit of another repository, no blob here


def changed_sizes(repo: RepoRef, parent: str, sha: str) -> dict[str, int]:
    """Each changed path's size in bytes (the larger of its old and new blob), read from the
    object headers only: nothing of the contents is loaded, however large."""
    raw = git(repo.path, "diff-tree", "-r", "-z", "--no-renames", "--no-abbrev", parent, sha)
    fields = raw.split(b"\0")
    blobs: dict[str, list[str]] = {}
    for header, path in zip(fields[0::2], fields[1::2], strict=False):
        old_mode, new_mode, old_id, new_id, _status = header.decode().lstrip(":").split(" ")
        ids = [
            oid
            for mode, oid in ((old_mode, old_id), (new_mode, new_id))
            if mode != GITLINK and oid != NO_OBJECT
        ]
        blobs[path.decode("utf-8", "surrogateescape")] = ids
    wanted = sorted({oid for ids in blobs.values() for oid in ids})
    if not wanted:
        return {path: 0 for path in blobs}
    listing = git(
        repo.path,
        "cat-file",
        "--batch-check=%(objectname) %(objectsize)",
        input="".join(f"{oid}\n" for oid in wanted).encode(),
    )
    size = {}
    for line in listing.decode().splitlines():
        oid, _, value = line.partition(" ")
        size[oid] = int(value) if value.isdigit() else 0  # "missing": a shallow or partial clone
    return {path: max((size.get(oid, 0) for oid in ids), default=0) for path, ids in blobs.items()}


def mine_commit(repo: RepoRef, sha: str, params: MineParams) -> Candidate | Rejection:
    """Turn one commit into a Candidate, or say why it is not one."""
    key = f"{repo.name}@{sha[:12]}"

    def reject(reason: str, detail: str) -> Rejection:
        return Rejection(key, STAGE, reason, f"{key}: {detail}")

    parents = git(repo.path, "rev-list", "--parents", "-n", "1", sha).decode().split()[1:]
    if not parents:
        return reject("root_commit", "first commit; nothing to diff against")
    parent = parents[0]
    rules = rules_at(repo, parent)
    # Sizes before any diff: a 300 MB one-line file passes max_lines, but its diff would be read
    # whole (by git for --numstat, then here). Skipped files never reach a diff read here.
    sizes = {
        path: size
        for path, size in changed_sizes(repo, parent, sha).items()
        if not rules.skipped(path, params.skip_globs)
    }
    biggest = max(sizes, key=lambda path: sizes[path], default=None)
    if biggest is not None and sizes[biggest] > params.max_file_bytes:
        return reject(
            "too_large",
            f"{biggest} is {sizes[biggest]} bytes > mine.max_file_bytes={params.max_file_bytes}",
        )
    if sum(sizes.values()) > params.max_bytes:
        return reject(
            "too_large",
            f"{sum(sizes.values())} bytes of changed files > mine.max_bytes={params.max_bytes}",
        )
    files = changed_files(repo, parent, sha)
    kept = [f for f in files if not f.binary and not rules.skipped(f.path, params.skip_globs)]
    skipped = tuple(sorted(f.path for f in files if f not in kept))
    tests = [f.path for f in kept if rules.is_test(f.path)]
    fixes = [f.path for f in kept if not rules.is_test(f.path)]
    if not tests:
        return reject("no_test_change", "touches no test file")
    if not any(rules.is_code(path) for path in fixes):
        return reject("no_source_change", "touches only tests (or docs)")
    lines = sum(f.added + f.removed for f in kept)
    if len(kept) > params.max_files:
        return reject("too_many_files", f"{len(kept)} files > mine.max_files={params.max_files}")
    if lines > params.max_lines:
        return reject("too_large", f"{lines} changed lines > mine.max_lines={params.max_lines}")
    try:
        patch = _diff(repo, parent, sha, fixes)
        test_patch = _diff(repo, parent, sha, tests)
    except UnicodeDecodeError:
        return reject("non_utf8_diff", "the diff is not UTF-8 text")
    message = git(repo.path, "log", "-1", "--format=%B", sha).decode("utf-8", "replace").strip()
    date = git(repo.path, "log", "-1", "--format=%aI", sha).decode().strip()
    meta = CandidateMeta(
        commit=sha,
        message=message,
        author_date=date,
        files_changed=len(kept),
        lines_added=sum(f.added for f in kept),
        lines_removed=sum(f.removed for f in kept),
        skipped_files=skipped,
    )
    return Candidate(
        candidate_id=content_id(repo.name, parent, patch, test_patch),
        repo=repo.name,
        source=repo.source,
        base_commit=parent,
        patch=patch,
        test_patch=test_patch,
        origin=repo.origin,
        created_at=date,
        meta=meta,
    )


def _diff(repo: RepoRef, parent: str, sha: str, paths: list[str]) -> str:
    literal = [f":(literal){path}" for path in paths]  # file names are not globs
    raw = git(
        repo.path,
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-renames",
        parent,
        sha,
        "--",
        *literal,
    )
    return raw.decode("utf-8")
