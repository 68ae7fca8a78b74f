"""Monorepos: the workspace packages of an npm/yarn/pnpm workspace, and the one to test.

The install runs at the root (its lock file covers every package); when the root's ``test``
script names no runner, the suite that runs is the first workspace package (in path order)
whose own ``test`` script names one, from that package's folder (``runners.py``), with test
ids still relative to the repository root. Workspace globs are package.json's ``workspaces``
(a list, or yarn's ``{"packages": [...]}``) or pnpm-workspace.yaml's ``packages`` list; a
pattern is matched folder by folder (``*`` one level, ``**`` any), never outside the tree.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from typing import Any

MAX_PACKAGES = 500  # a workspace larger than this is read no further


def workspace_dirs(repo_dir: str, package: dict[str, Any]) -> list[str]:
    """The workspace packages' folders (repository paths, sorted) holding a package.json."""
    patterns = [p for p in _patterns(repo_dir, package) if isinstance(p, str)]
    include = [p.strip("./") for p in patterns if not p.startswith("!")]
    exclude = [p[1:].strip("./") for p in patterns if p.startswith("!")]
    if not include:
        return []
    found: list[str] = []
    root = os.path.realpath(repo_dir)
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("node_modules", ".git"))
        rel = os.path.relpath(current, root).replace(os.sep, "/")
        if rel == "." or "package.json" not in files:
            continue
        if any(_match(rel, p) for p in include) and not any(_match(rel, p) for p in exclude):
            found.append(rel)
        if len(found) >= MAX_PACKAGES:
            break
    return sorted(found)


def read_package(repo_dir: str, rel: str) -> dict[str, Any] | None:
    """A workspace package's package.json, or None when it does not parse as an object."""
    try:
        with open(os.path.join(repo_dir, rel, "package.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _patterns(repo_dir: str, package: dict[str, Any]) -> list[Any]:
    workspaces = package.get("workspaces")
    if isinstance(workspaces, dict):
        workspaces = workspaces.get("packages")
    if isinstance(workspaces, list):
        return workspaces
    path = os.path.join(repo_dir, "pnpm-workspace.yaml")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read(65536)
    block = re.search(r"^packages:\s*\n((?:\s+-.*\n?)+)", text, re.MULTILINE)
    if block is None:
        return []
    return [m.strip().strip("'\"") for m in re.findall(r"^\s+-\s*(.+?)\s*$", block.group(1), re.M)]


def _match(rel: str, pattern: str) -> bool:
    """``rel`` matches ``pattern`` part by part: ``*`` within one folder name, ``**`` any."""
    return _match_parts(rel.split("/"), pattern.rstrip("/").split("/"))


def _match_parts(parts: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_match_parts(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and _match_parts(parts[1:], pattern[1:])
    )
