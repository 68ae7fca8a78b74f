"""One entry point for every kind of source: a local path, a git URL, or ``pypi:NAME``.

A source spec is all a worker needs to materialise the same repository again, so candidates carry
it and any Beam worker can rebuild its own copy (PyPI histories are deterministic).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.sources.git_source import (
    cloned_git_repo,
    is_url,
    local_git_repo,
    repo_name_from_url,
)
from trajforge.generators.sources.pypi_source import pypi_history
from trajforge.schemas.errors import SourceError
from trajforge.schemas.params import Params, SourcesParams
from trajforge.schemas.redact import redact_source
from trajforge.verifiers.sandbox.git_tree import resolve_commit

PYPI_PREFIX = "pypi:"


@dataclass(frozen=True)
class RepoRef:
    name: str  # display name: "owner/name", "pypi/toolz", "local/mylib"
    source: str  # the spec it came from, credentials removed (what records and logs carry)
    path: str  # a local git repository
    origin: str  # what mined changes are: "commit" or "release"
    # Where the code really comes from (the redacted URL, the real path, the package and its
    # index), never a display name: environments are keyed by it, so two sources that share a
    # name never share an image.
    identity: str = ""


@dataclass(frozen=True)
class SourceOptions:
    cache_dir: str
    max_releases: int | None = SourcesParams.max_releases  # the one default: schemas/params.py
    pypi_url: str = SourcesParams.pypi_url

    @classmethod
    def from_params(cls, params: Params) -> SourceOptions:
        return cls(
            cache_dir=params.cache_dir,
            max_releases=params.sources.max_releases,
            pypi_url=params.sources.pypi_url,
        )


def pypi_spec(name: str) -> str:
    return f"{PYPI_PREFIX}{name}"


def display_name(spec: str) -> str:
    """The name a source's records carry, read from its spec alone (nothing fetched)."""
    if spec.startswith(PYPI_PREFIX):
        return f"pypi/{spec.removeprefix(PYPI_PREFIX)}"
    if is_url(spec):
        return repo_name_from_url(redact_source(spec))
    return f"local/{os.path.basename(_local_path(spec))}"


def distinct_sources(specs: list[str], warn: Callable[[str], None]) -> list[str]:
    """A stage's sources, each once (the same checkout named twice is one source). Two
    different sources that carry one name (``/a/repo`` and ``/b/repo`` are both
    ``local/repo``) stay two sources, their tasks and images apart (keyed by where each comes
    from); ``warn`` hears one line naming both, since per-repository figures merge by name."""
    places: dict[str, str] = {}  # name -> where it comes from
    for spec in specs:
        name, where = display_name(spec), _where(spec)
        if places.setdefault(name, where) != where:
            warn(
                f"sources: {places[name]} and {where} are both named {name}: their tasks stay "
                "apart, their per-repository figures merge; give one checkout another folder "
                "name to tell them apart"
            )
    unique: dict[str, str] = {}
    for spec in specs:
        unique.setdefault(_where(spec), spec)
    return list(unique.values())


def _where(spec: str) -> str:
    """What tells two sources apart: the package, the URL (credentials removed), the real path."""
    if spec.startswith(PYPI_PREFIX):
        return spec
    if is_url(spec):
        return redact_source(spec)
    return os.path.realpath(_local_path(spec))


def _local_path(spec: str) -> str:
    return os.path.abspath(os.path.expanduser(spec))


@functools.lru_cache(maxsize=64)
def open_source(spec: str, options: SourceOptions) -> RepoRef:
    """Materialise a source (cached per process: Beam calls this once per bundle); a repository
    without a commit (an unborn HEAD) is a ``SourceError`` that says so."""
    repo = _materialise(spec, options)
    if resolve_commit(repo.path, "HEAD") is None:
        raise SourceError(
            f"{repo.source}: has no commits (HEAD is unborn); commit to it first, or pass "
            "another repository",
            reason="no_commits",
        )
    return repo


def _materialise(spec: str, options: SourceOptions) -> RepoRef:
    if spec.startswith(PYPI_PREFIX):
        name = spec.removeprefix(PYPI_PREFIX)
        path = pypi_history(
            name, options.cache_dir, max_releases=options.max_releases, pypi_url=options.pypi_url
        )
        identity = f"{spec}@{redact_source(options.pypi_url)}"
        return RepoRef(display_name(spec), spec, path, "release", identity)
    if is_url(spec):
        path = cloned_git_repo(spec, options.cache_dir)
        shown = redact_source(spec)
        return RepoRef(display_name(spec), shown, path, "commit", shown)
    path = local_git_repo(spec)
    identity = f"file://{os.path.realpath(path)}"
    return RepoRef(display_name(spec), path, path, "commit", identity)
