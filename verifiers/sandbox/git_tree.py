"""Thin, fast access to git through its CLI (one subprocess per question, bytes in and out).

``git()`` is trajforge's one way to run git: mining, sources (clones, PyPI histories), environment
profiles and the sandbox all call it, so every git process gets the same hermetic environment.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence

from trajforge.schemas.errors import SourceError

# A fixed, hermetic environment: no user or system config changes what git prints or writes.
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


class GitError(SourceError):
    """git exited non-zero. ``stderr_tail`` is the last line git wrote to stderr ("" if none)."""

    reason = "git_error"

    def __init__(
        self, message: str, reason: str | None = None, stderr_tail: str = "", returncode: int = 1
    ) -> None:
        super().__init__(message, reason)
        self.stderr_tail = stderr_tail
        self.returncode = returncode

    @property
    def detail(self) -> str:
        """What went wrong, for a caller's own message: git's last line, else the exit status."""
        return self.stderr_tail or f"exit {self.returncode}"


def git(
    repo: str | None,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    config: Sequence[str] = (),
    inherit_env: bool = True,
) -> bytes:
    """Run ``git -C repo args`` and return stdout; a failure raises GitError with git's message.

    ``repo`` None runs git where the process is (``clone``, ``init <path>``). ``config`` is
    ``key=value`` settings passed as ``-c``. The environment is this process's with ``GIT_ENV``
    and then ``env`` on top; ``inherit_env=False`` leaves this process's out, so nothing but
    ``GIT_ENV`` and ``env`` reaches git (a build that must not depend on the machine). A git that
    cannot be started raises OSError, as ``subprocess`` does.
    """
    full_env = {**(os.environ if inherit_env else {}), **GIT_ENV, **(env or {})}
    where = [] if repo is None else ["-C", repo]
    settings = [flag for setting in config for flag in ("-c", setting)]
    proc = subprocess.run(
        ["git", *where, "-c", "core.quotepath=false", *settings, *args],
        input=input,
        capture_output=True,
        env=full_env,
        check=False,
    )
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        tail = message[-1] if message else ""
        place = f" in {repo}" if repo is not None else ""
        raise GitError(
            f"git {args[0]}{place}: {tail or 'failed'}",
            stderr_tail=tail,
            returncode=proc.returncode,
        )
    return proc.stdout


def is_git_repo(path: str) -> bool:
    if not os.path.isdir(path):
        return False
    try:
        return git(path, "rev-parse", "--is-inside-work-tree").strip() == b"true" or bool(
            git(path, "rev-parse", "--git-dir")
        )
    except GitError:
        return False


def resolve_commit(repo: str, rev: str) -> str | None:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except GitError:
        return None


def read_file_at(repo: str, rev: str, path: str) -> str:
    """One file's text at a commit or tree (undecodable bytes survive a round trip)."""
    return git(repo, "cat-file", "blob", f"{rev}:{path}").decode("utf-8", "surrogateescape")


def changed_files(repo: str, before: str, after: str) -> dict[str, str]:
    """path -> "A", "D" or "M" between two trees or commits; a rename is its delete and its add."""
    out = git(repo, "diff", "--no-renames", "--name-status", "-z", before, after).decode(
        "utf-8", "surrogateescape"
    )
    fields = out.split("\0")
    return {fields[i + 1]: fields[i][:1] for i in range(0, len(fields) - 1, 2)}


@contextlib.contextmanager
def scratch_objects(repo: str) -> Iterator[dict[str, str]]:
    """An environment for git calls whose new objects never reach ``repo``'s object store.

    Inside the block, pass the yielded mapping as ``env`` to every git call that writes objects
    (``apply_patches``, ``git(... "write-tree" ...)``, ``update-index``) and to those that read
    what they wrote (``archive``, ``diff-tree``, ``ls-tree``): git writes blobs and trees into a
    throwaway object directory (``GIT_OBJECT_DIRECTORY``) and reads the repository's own objects
    (and, through them, its alternates) as an alternate. The directory is removed when the block
    ends, so grading a patch leaves the repository's ``.git`` exactly as it was; ids written
    inside stay valid only inside the block.
    """
    objects = _object_directory(repo)
    with tempfile.TemporaryDirectory(prefix="trajforge-objects-") as scratch:
        alternates = [_quoted(objects)]
        inherited = os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        if inherited:
            alternates.append(inherited)
        yield {
            "GIT_OBJECT_DIRECTORY": scratch,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(alternates),
        }


def _object_directory(repo: str) -> str:
    """The absolute path of ``repo``'s object store (a worktree's: its common one)."""
    found = git(repo, "rev-parse", "--git-path", "objects").decode("utf-8", "surrogateescape")
    return os.path.abspath(os.path.join(repo, found.strip()))


def _quoted(path: str) -> str:
    """One entry of GIT_ALTERNATE_OBJECT_DIRECTORIES: C-quoted where it holds ":" or a quote."""
    if ":" not in path and not path.startswith('"'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def apply_patches(
    repo: str, base_commit: str, patches: list[str], env: Mapping[str, str] | None = None
) -> str:
    """The tree of ``base_commit`` with ``patches`` applied, computed in a throwaway index.

    Nothing is checked out, so this is cheap and safe to run concurrently; the returned tree id is a
    content hash of the exact files a test run sees. ``env`` goes to every git call (e.g. the
    mapping ``scratch_objects`` yields, to keep the new blobs and trees out of ``repo``).
    """
    with tempfile.TemporaryDirectory(prefix="trajforge-index-") as tmp:
        env = {**(env or {}), "GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(repo, "read-tree", base_commit, env=env)
        for number, patch in enumerate(patches):
            if not patch.strip():
                continue
            try:
                git(
                    repo,
                    "apply",
                    "--cached",
                    "--whitespace=nowarn",
                    "-",
                    input=patch.encode(),
                    env=env,
                )
            except GitError as exc:
                raise SourceError(
                    f"patch {number + 1} does not apply to {base_commit[:12]}: {exc}",
                    reason="patch_does_not_apply",
                ) from None
        return git(repo, "write-tree", env=env).decode().strip()


def archive(repo: str, tree: str, prefix: str, env: Mapping[str, str] | None = None) -> bytes:
    """A tar of ``tree`` with every path under ``prefix`` (e.g. "repo/"); ``env`` as in
    ``apply_patches`` (a tree written under ``scratch_objects`` is only found with its env)."""
    return git(repo, "archive", "--format=tar", f"--prefix={prefix}", tree, env=env)
