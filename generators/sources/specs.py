"""One entry point for every kind of source: a local path, a git URL, or ``pypi:NAME``.

A source spec is all a worker needs to materialise the same repository again, so candidates carry
it and any Beam worker can rebuild its own copy (PyPI histories are deterministic).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from trajforge.generators.sources.git_source import (
    cloned_git_repo,
    is_url,
    local_git_repo,
    repo_name_from_url,
)
from trajforge.generators.sources.pypi_source import pypi_history
from trajforge.schemas.params import Params, SourcesParams

PYPI_PREFIX = "pypi:"


@dataclass(frozen=True)
class RepoRef:
    name: str  # display name: "owner/name", "pypi/toolz", "local/mylib"
    source: str  # the spec it came from
    path: str  # a local git repository
    origin: str  # what mined changes are: "commit" or "release"


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


@functools.lru_cache(maxsize=64)
def open_source(spec: str, options: SourceOptions) -> RepoRef:
    """Materialise a source (cached per process: Beam calls this once per bundle)."""
    if spec.startswith(PYPI_PREFIX):
        name = spec.removeprefix(PYPI_PREFIX)
        path = pypi_history(
            name, options.cache_dir, max_releases=options.max_releases, pypi_url=options.pypi_url
        )
        return RepoRef(name=f"pypi/{name}", source=spec, path=path, origin="release")
    if is_url(spec):
        path = cloned_git_repo(spec, options.cache_dir)
        return RepoRef(name=repo_name_from_url(spec), source=spec, path=path, origin="commit")
    path = local_git_repo(spec)
    return RepoRef(name=f"local/{os.path.basename(path)}", source=path, path=path, origin="commit")
