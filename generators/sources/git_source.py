"""Git repositories by local path or URL; URLs are cloned once into the cache and fetched after."""

from __future__ import annotations

import os
import shutil

from trajforge.schemas.errors import SourceError
from trajforge.schemas.records import content_id
from trajforge.schemas.redact import redact_source, redact_text
from trajforge.verifiers.sandbox.git_tree import GitError, git, is_git_repo


def is_url(spec: str) -> bool:
    return "://" in spec or spec.startswith("git@")


def repo_name_from_url(url: str) -> str:
    """SWE-bench style "owner/name" from a clone URL (credentials never part of it)."""
    tail = redact_source(url).split("?", 1)[0].split("#", 1)[0].rstrip("/").removesuffix(".git")
    parts = tail.replace(":", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else parts[-1]


def local_git_repo(path: str) -> str:
    absolute = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(absolute):
        raise SourceError(
            f"{path}: no such directory; pass a path to a git checkout or a URL",
            reason="repo_missing",
        )
    if not is_git_repo(absolute):
        raise SourceError(
            f"{path}: not a git repository; run `git init` there or pass a clone URL",
            reason="not_a_git_repo",
        )
    return absolute


def cloned_git_repo(url: str, cache_dir: str) -> str:
    """Clone ``url`` into the cache (or fetch if already there) and return the clone's path.

    The clone is keyed by the redacted URL, so a source recorded without its credentials opens
    the same clone again (fetching through the remote it was cloned with). Messages name the
    redacted URL only.
    """
    shown = redact_source(url)
    target = os.path.join(cache_dir, "git", content_id(shown))
    try:
        if is_git_repo(target):
            if url != shown:  # fresh credentials replace the ones the clone was made with
                git(target, "remote", "set-url", "origin", url)
            git(target, "fetch", "--quiet", "origin")
            git(target, "reset", "--quiet", "--hard", "FETCH_HEAD")
            return target
        tmp = f"{target}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            git(None, "clone", "--quiet", url, tmp)
        except GitError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            why = redact_text(exc.stderr_tail or "git clone failed").replace(url, shown)
            raise SourceError(
                f"{shown}: could not clone ({why}); "
                "check the URL and that this machine can reach it",
                reason="repo_unreachable",
            ) from None
        os.replace(tmp, target)
        return target
    except GitError as exc:
        why = redact_text(str(exc)).replace(url, shown)
        raise SourceError(f"{shown}: {why}", reason="repo_unreachable") from None
