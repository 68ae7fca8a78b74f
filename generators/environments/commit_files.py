"""Files at a commit, read from git's object store: the tree, the blobs, a symlink's target.

Detection reads a commit's packaging files without a checkout (``git ls-tree`` and one
``git cat-file --batch``), so a worktree in any state gives the same answer; nothing here knows a
language, which decides what to read. A git failure is the user's (a bad path or commit) and
says so in one line.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence

from trajforge.schemas.errors import UserError
from trajforge.verifiers.sandbox.git_tree import GitError, git

_SYMLINK_MODE = "120000"


class ProfileError(UserError):
    """The commit cannot get an environment here: no supported Python, or git cannot read it."""

    reason = "no_supported_python"


def _git(repo_path: str, commit: str, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git in the repository; a failure is the user's (bad path or commit), so say so."""
    try:
        return git(repo_path, *args, input=stdin)
    except GitError as error:
        raise ProfileError(
            f"{repo_path}@{commit}: git cannot read this commit ({error.detail}); "
            "check the repository path and the commit id",
            reason="unreadable_commit",
        ) from error
    except OSError as error:
        raise ProfileError(
            f"{repo_path}@{commit}: cannot run git ({error}); install git",
            reason="unreadable_commit",
        ) from error


def ls_tree(repo_path: str, commit: str) -> dict[str, tuple[str, str]]:
    """Every blob path at the commit, with its mode and object id (one git process)."""
    if commit.startswith("-"):
        raise ProfileError(f"{repo_path}@{commit}: not a commit id", reason="unreadable_commit")
    out = _git(repo_path, commit, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: dict[str, tuple[str, str]] = {}
    for entry in out.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) == 3 and fields[1] == "blob":
            entries[path.decode("utf-8", "surrogateescape")] = (fields[0], fields[2])
    return entries


def cat_blobs(repo_path: str, commit: str, shas: Iterable[str]) -> dict[str, bytes]:
    """Blob contents by object id, all through one ``git cat-file --batch``."""
    unique = list(dict.fromkeys(shas))
    if not unique:
        return {}
    out = _git(
        repo_path, commit, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique).encode()
    )
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:  # "<sha> missing"
            continue
        size = int(header[2])
        blobs[sha] = out[pos : pos + size]
        pos += size + 1
    return blobs


def read_paths(
    repo_path: str, commit: str, tree: dict[str, tuple[str, str]], paths: Sequence[str]
) -> dict[str, bytes]:
    """Read ``paths``; a symlink (requirements.txt -> requirements/base.txt) reads its target."""
    blobs = cat_blobs(repo_path, commit, (tree[p][1] for p in paths))
    files = {p: blobs[tree[p][1]] for p in paths if tree[p][1] in blobs}
    targets: dict[str, str] = {}
    for path in [p for p in files if tree[p][0] == _SYMLINK_MODE]:
        link = files.pop(path).decode("utf-8", "surrogateescape")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
        if target in tree and tree[target][0] != _SYMLINK_MODE:
            targets[path] = target
    linked = cat_blobs(repo_path, commit, (tree[t][1] for t in targets.values()))
    for path, target in targets.items():
        if tree[target][1] in linked:
            files[path] = linked[tree[target][1]]
    return files


def commit_date(repo_path: str, commit: str) -> str | None:
    """The commit's date (YYYY-MM-DD, committer's), or None when git cannot say."""
    try:
        out = git(repo_path, "show", "-s", "--format=%cs", commit)
    except (GitError, OSError):
        return None
    text = out.decode("ascii", "replace").strip()
    return text if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else None


def decode_all(files: dict[str, bytes]) -> dict[str, str]:
    return {p: data.decode("utf-8", "replace") for p, data in files.items()}
