"""A clone URL's credentials are used and never written: not in the cache's ``.git/config``, not
in FETCH_HEAD or a reflog, nowhere under the cache.

A real private repository host (``git http-backend`` behind http.server, basic auth: nothing is
served without the token) and the real clone path every stage takes (``open_source``): the clone
and a later fetch must use the token, and afterwards no file under the cache holds it (nor its
base64 form, as an Authorization header would carry it). A later stage opens the clone again by
the redacted URL its records carry, without credentials.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest
from git_http_server import git_http_server
from repo_factory import GIT_ENV, RepoBuilder
from trajforge.generators.sources.git_source import cloned_git_repo
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.errors import SourceError
from trajforge.schemas.redact import redact_source
from trajforge.verifiers.sandbox.git_tree import git, resolve_commit

pytestmark = [pytest.mark.docker, pytest.mark.podman]

USER = "bot"
TOKEN = "ghp_s3cr3tTOKENvalue42"


def _leaks(root: Path) -> list[str]:
    """Files under ``root`` that hold the token, as text or as a basic-auth header's base64."""
    forms = [TOKEN.encode(), base64.b64encode(f"{USER}:{TOKEN}".encode())]
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and any(f in p.read_bytes() for f in forms)
    ]


@pytest.fixture
def private_host(tmp_path: Path):
    """(host, the requests it saw, a working clone that pushes to the served bare repo)."""
    work = RepoBuilder(tmp_path / "work")
    work.commit(
        "first", {"lib/__init__.py": "", "lib/ops.py": "def add(a, b):\n    return a + b\n"}
    )
    served = tmp_path / "served"
    served.mkdir()
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "clone", "-q", "--bare", str(work.path), str(served / "lib.git")],
                   check=True, env=env)  # fmt: skip
    work.git("remote", "add", "origin", str(served / "lib.git"))
    with git_http_server(served, USER, TOKEN) as (host, seen):
        yield host, seen, work


def test_a_clone_and_a_fetch_use_the_token_and_write_it_nowhere(private_host, tmp_path):
    host, seen, work = private_host
    cache = tmp_path / "cache"
    url = f"http://{USER}:{TOKEN}@{host}/lib.git"
    shown = redact_source(url)
    assert shown == f"http://{host}/lib.git"

    with pytest.raises(SourceError):  # the host is private: no token, no clone
        cloned_git_repo(shown, str(cache / "anonymous"))

    repo = open_source(url, SourceOptions(cache_dir=str(cache)))
    assert repo.source == shown and resolve_commit(repo.path, "HEAD") == work.git(
        "rev-parse", "HEAD"
    )
    assert any(r["authorization"] for r in seen)  # the token was sent, and accepted
    assert git(repo.path, "config", "remote.origin.url").decode().strip() == shown
    assert _leaks(cache) == []

    # a new commit upstream; fresh credentials fetch it, and still nothing is written
    second = work.commit("second", {"lib/ops.py": "def add(a, b):\n    return b + a\n"})
    work.git("push", "-q", "origin", "HEAD:main")
    again = cloned_git_repo(url, str(cache))
    assert again == repo.path and resolve_commit(again, "HEAD") == second
    assert _leaks(cache) == []

    # a later stage opens it by the redacted URL its records carry: no token, the clone as it is
    requests = len(seen)
    later = cloned_git_repo(shown, str(cache))
    assert later == repo.path and resolve_commit(later, "HEAD") == second
    assert len(seen) > requests  # it did ask (and was refused), and went on with the clone
    assert _leaks(cache) == []


def test_a_clone_an_older_trajforge_left_with_the_token_is_scrubbed(private_host, tmp_path):
    """Older clones kept the URL as given in .git/config; opening them again cleans it."""
    host, _, _ = private_host
    cache = tmp_path / "cache"
    url = f"http://{USER}:{TOKEN}@{host}/lib.git"
    path = cloned_git_repo(url, str(cache))
    subprocess.run(["git", "-C", path, "remote", "set-url", "origin", url], check=True)
    assert _leaks(cache)
    cloned_git_repo(url, str(cache))
    assert _leaks(cache) == []


def test_a_bad_token_is_one_line_that_names_the_redacted_url(private_host, tmp_path):
    host, _, _ = private_host
    url = f"http://{USER}:wrong-{TOKEN}@{host}/lib.git"
    with pytest.raises(SourceError) as info:
        cloned_git_repo(url, str(tmp_path / "cache"))
    message = str(info.value)
    assert "\n" not in message and TOKEN not in message and f"http://{host}/lib.git" in message
    assert info.value.reason == "repo_unreachable"
    assert _leaks(tmp_path / "cache") == [] if (tmp_path / "cache").exists() else True
