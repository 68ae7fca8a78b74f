"""A lock file as pins pip can install: the releases the project itself last resolved to.

``uv.lock``, ``poetry.lock`` and ``pdm.lock`` each list every package with its version; the
project's own entry and anything not from an index (git, a path, a URL, an editable) are left
out. Where a lock holds several versions of one package for different Pythons, the one whose
markers hold for the chosen Python is kept. Read at detection time, with no network: the
exported pins become the first install set (``profile.py``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.utils import canonicalize_name

EXPORTABLE_LOCKS = ("uv.lock", "poetry.lock", "pdm.lock")  # in the order one is preferred
_NOT_FROM_AN_INDEX = frozenset({"git", "url", "path", "directory", "file", "editable", "virtual"})


def locked_pins(path: str, text: str, python: str, own_name: str | None) -> list[str]:
    """``name==version`` for every locked package from an index, one per name, sorted; empty
    when the file does not parse or locks nothing installable."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    packages = data.get("package")
    if not isinstance(packages, list):
        return []
    own = canonicalize_name(own_name) if own_name else None
    needed = _needed_here(packages, python)
    chosen: dict[str, str] = {}
    for package in packages:
        if not isinstance(package, dict) or not _from_an_index(path, package):
            continue
        name, version = package.get("name"), package.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            continue
        key = canonicalize_name(name)
        if key == own or key not in needed or not _fits(_markers(package), python):
            continue
        chosen.setdefault(key, f"{name}=={version}")
    return sorted(chosen.values(), key=str.lower)


def _needed_here(packages: list[Any], python: str) -> set[str]:
    """The names some dependency edge asks for on Linux with ``python`` (uv.lock puts markers
    on its edges: ``colorama`` only on Windows, ``pywin32`` never here), plus every package no
    edge names (the roots). Locks without edges (pdm's flat lists) keep everything."""
    asked: dict[str, bool] = {}
    for package in packages:
        for edge in _edges(package):
            name = edge.get("name")
            if isinstance(name, str):
                marker = edge.get("marker")
                fits = _fits([marker] if isinstance(marker, str) else [], python)
                key = canonicalize_name(name)
                asked[key] = asked.get(key, False) or fits
    every = {
        canonicalize_name(p["name"])
        for p in packages
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    }
    return {name for name in every if asked.get(name, True)}


def _edges(package: Any) -> list[dict[str, Any]]:
    """uv.lock's dependency edges of one package (``dependencies`` and those of its extras and
    groups), as tables with a name and maybe a marker."""
    if not isinstance(package, dict):
        return []
    edges = package.get("dependencies")
    found = list(edges) if isinstance(edges, list) else []
    for key in ("optional-dependencies", "dev-dependencies"):
        table = package.get(key)
        for values in table.values() if isinstance(table, dict) else []:
            found += values if isinstance(values, list) else []
    return [e for e in found if isinstance(e, dict)]


def _from_an_index(path: str, package: dict[str, Any]) -> bool:
    """Whether the package comes from an index (PyPI or a mirror of it), not git or a path."""
    source = package.get("source")
    if path == "uv.lock":
        return isinstance(source, dict) and "registry" in source
    if path == "poetry.lock":
        kind = source.get("type") if isinstance(source, dict) else None
        return kind is None  # a "legacy" source is a private index
    return not _NOT_FROM_AN_INDEX & set(package)  # pdm.lock: git/url/path/editable keys


def _markers(package: dict[str, Any]) -> list[str]:
    found = package.get("resolution-markers") or package.get("markers") or []
    values: Iterable[Any] = [found] if isinstance(found, str) else found
    return [m for m in values if isinstance(m, str) and m.strip()]


def _fits(markers: list[str], python: str) -> bool:
    """Whether any of the markers holds on Linux x86-64 with ``python`` (none: it always does)."""
    if not markers:
        return True
    env = {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    for marker in markers:
        try:
            if Marker(marker).evaluate(env):
                return True
        except (InvalidMarker, ValueError, KeyError):
            return True
    return False
