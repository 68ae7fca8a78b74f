"""Which distribution provides a module a test could not import.

The answer comes from the project's own declarations first (any extra, dependency group, tox deps
or requirements file, so its pins are kept), then from ``IMPORT_TO_DIST``: a short, documented
map of the import names that differ from their distribution's name. Nothing else is guessed: a
module no declaration and no map entry explains is left to exclusion (or the setup agent), never
installed by its bare name, because a PyPI project of that name may be unrelated. The one
exception is a conftest's import (``prepare.py``, ``_undeclared``): it stops the whole suite, so
a name PyPI has and the repository has no folder or file of is installed by that name.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

# Import name -> distribution, for the common cases where they differ. Keep it short and
# obvious: every entry is a project whose import name is famous for not matching.
IMPORT_TO_DIST = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "cv2": "opencv-python",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "attr": "attrs",
    "jwt": "PyJWT",
    "OpenSSL": "pyOpenSSL",
    "Crypto": "pycryptodome",
    "serial": "pyserial",
    "git": "GitPython",
    "dotenv": "python-dotenv",
    "magic": "python-magic",
    "railroad": "railroad-diagrams",
    "zmq": "pyzmq",
    "socks": "PySocks",
    "docx": "python-docx",
    "multipart": "python-multipart",
    "jose": "python-jose",
    "pkg_resources": "setuptools",
    "google.protobuf": "protobuf",
    "markdown": "Markdown",
    "Levenshtein": "python-Levenshtein",
    "mpl_toolkits": "matplotlib",
    "xdist": "pytest-xdist",
    "pytest_mock": "pytest-mock",
    "pytest_asyncio": "pytest-asyncio",
    "pytest_benchmark": "pytest-benchmark",
    "pytest_timeout": "pytest-timeout",
}


# A pytest option from the project's addopts -> the plugin that defines it: pytest refuses the
# whole run ("unrecognized arguments: --cov=parse") until the plugin is installed.
OPTION_TO_DIST = {
    "--cov": "pytest-cov",
    "--no-cov": "pytest-cov",
    "-n": "pytest-xdist",
    "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist",
    "--timeout": "pytest-timeout",
    "--benchmark": "pytest-benchmark",
    "--hypothesis": "hypothesis",
    "--reruns": "pytest-rerunfailures",
    "--randomly": "pytest-randomly",
    "--asyncio-mode": "pytest-asyncio",
    "--mypy": "pytest-mypy",
    "--doctest-plus": "pytest-doctestplus",
    "--html": "pytest-html",
    "--snapshot": "syrupy",
}


def requirement_for_option(option: str, declared: Iterable[str]) -> tuple[str, str] | None:
    """(requirement, where) for the plugin that defines a pytest ``option``, or None."""
    flag = option.split("=", 1)[0]
    dist = next(
        (
            d
            for prefix, d in OPTION_TO_DIST.items()
            if flag == prefix or flag.startswith(prefix + "-")
        ),
        None,
    )
    if dist is None:
        return None
    wanted = canonicalize_name(dist)
    for requirement in declared:
        if _name(requirement) == wanted:
            return requirement, "declared by the project"
    return dist, "pytest option map"


def _name(requirement: str) -> str | None:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return None


def requirement_for(
    module: str, declared: Iterable[str], python: str = "3.11"
) -> tuple[str, str] | None:
    """(requirement to install, where it came from) for ``module``, or None when unknown.

    ``module`` may be dotted (``google.protobuf.message``): the longest mapped prefix wins, and
    the top-level name is what is matched against distribution names. A declaration whose
    marker excludes ``python`` (``hypothesis==3.1.0; python_version < '3.8'``) still names the
    distribution, but pip would skip it: the bare name is installed instead.
    """
    found = _declared_or_mapped(module, declared)
    if found is None:
        return None
    requirement, where = found
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return found
    if parsed.marker is not None and not parsed.marker.evaluate(_environment(python)):
        return parsed.name, f"{where}, for another Python"
    return requirement, where


def _environment(python: str) -> dict[str, str]:
    """Marker variables of the environment's interpreter (CPython on Linux)."""
    return {"python_version": python, "python_full_version": f"{python}.0"}


def _declared_or_mapped(module: str, declared: Iterable[str]) -> tuple[str, str] | None:
    top = module.split(".")[0]
    mapped = next(
        (IMPORT_TO_DIST[p] for p in _prefixes(module) if p in IMPORT_TO_DIST),
        None,
    )
    wanted = {canonicalize_name(top), canonicalize_name(f"python-{top}")}
    if mapped:
        wanted.add(canonicalize_name(mapped))
    by_name: dict[str, str] = {}
    for requirement in declared:
        name = _name(requirement)
        if name is not None:
            by_name.setdefault(name, requirement)
    for name in sorted(wanted):
        if name in by_name:
            return by_name[name], "declared by the project"
    stem = canonicalize_name(top)
    prefixed = sorted(n for n in by_name if n.startswith(f"{stem}-") or n.endswith(f"-{stem}"))
    if len(prefixed) == 1:  # railroad -> railroad-diagrams; more than one is a guess
        return by_name[prefixed[0]], "declared by the project"
    if mapped:
        return mapped, "import-name map"
    return None


def _prefixes(module: str) -> list[str]:
    """``a.b.c`` -> ["a.b.c", "a.b", "a"]: longest first."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
