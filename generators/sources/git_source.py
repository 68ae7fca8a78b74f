"""Git repositories by local path or URL; URLs are cloned once into the cache and fetched after.

Credentials in a clone URL (``https://user:TOKEN@host/...``, a secret query parameter) reach git
only through its environment, never its arguments or a file: git is given the redacted URL, and
``url.<URL as given>.insteadOf <redacted URL>`` in ``GIT_CONFIG_*`` variables puts them back for
the transport alone. So the clone's ``.git/config`` names the redacted URL, FETCH_HEAD is not
written, and nothing under the cache holds the token.
"""

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
    inside = git(absolute, "rev-parse", "--show-prefix").decode().strip().rstrip("/")
    if inside:  # a folder of a checkout: its paths would be read against the wrong root
        top = absolute[: -len(inside)].rstrip(os.sep) if absolute.endswith(inside) else "its top"
        raise SourceError(
            f"{path}: a folder ({inside}) inside the git checkout {top}; pass the checkout's top",
            reason="not_a_repo_root",
        )
    return absolute


def cloned_git_repo(url: str, cache_dir: str) -> str:
    """Clone ``url`` into the cache (or fetch if already there) and return the clone's path.

    The clone is keyed by the redacted URL, so a source recorded without its credentials opens
    the same clone again; its remote is the redacted URL, so such a spec fetches without them,
    and where the host refuses (a private repository) the clone is used as it is (it holds what
    the earlier stage read). Messages name the redacted URL only.
    """
    shown = redact_source(url)
    target = os.path.join(cache_dir, "git", content_id(shown))
    env = _credentials(url, shown)
    try:
        if is_git_repo(target):
            if git(target, "config", "remote.origin.url").decode().strip() != shown:
                git(target, "remote", "set-url", "origin", shown)  # a token an older run left
            try:
                git(target, "fetch", "--quiet", "--no-write-fetch-head", "origin", env=env)
            except GitError:
                if url != shown:
                    raise
                return target  # nothing to fetch with: the clone as the earlier stage left it
            git(target, "reset", "--quiet", "--hard", "@{upstream}")
            return target
        tmp = f"{target}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            git(None, "clone", "--quiet", shown, tmp, env=env)
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


def _credentials(url: str, shown: str) -> dict[str, str]:
    """git's environment that turns ``shown`` back into ``url`` for the transport only (an
    ``insteadOf`` rewrite in ``GIT_CONFIG_*``, after any the environment already sets)."""
    if url == shown:
        return {}
    count = os.environ.get("GIT_CONFIG_COUNT") or "0"
    index = int(count) if count.isdigit() else 0
    return {
        "GIT_CONFIG_COUNT": str(index + 1),
        f"GIT_CONFIG_KEY_{index}": f"url.{url}.insteadOf",
        f"GIT_CONFIG_VALUE_{index}": shown,
    }
