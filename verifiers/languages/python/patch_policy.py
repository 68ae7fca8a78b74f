"""What a model's patch may change: source. Files that load before or beside the tests are refused.

Two classes, each decided by what the file is, not by a list of known tricks:

- **start-up and metadata files**, anywhere in the tree: distribution metadata (``*.dist-info``,
  ``*.egg-info``: entry points are how pytest plugins and console scripts load), ``*.pth`` files,
  ``sitecustomize``/``usercustomize``. No fix of a project's code needs one.
- **a new top-level module the task's own tree does not have**, in a folder that Python or pytest
  puts on ``sys.path`` (the repository root, the folders of test files and conftest modules, a
  source root such as ``src/``): any name there can be imported by something that only *tries* an
  import (the standard library's ``copy`` looks for ``org.python.core``; 3.9 has no list of its
  own names), and would run before or beside the tests. Allowed by the tree, not denied by a list
  of what the image can import: a fix adds code inside the project's packages, next to code of
  the same name, never a new importable name beside them.

Test files, conftest modules and test configuration are not refused but reset to the task's own
(``schemas.test_ids.is_grading_path``), so a fix that also edits tests is judged on the fix.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")
STARTUP_NAMES = ("sitecustomize", "usercustomize")


def startup_file(path: str) -> str | None:
    """Why ``path`` is a start-up or metadata file, or None."""
    parts = path.split("/")
    for part in parts[:-1]:
        if part.endswith(METADATA_SUFFIXES):
            return f"{path}: inside distribution metadata ({part})"
    name = parts[-1]
    if name.endswith(METADATA_SUFFIXES):
        return f"{path}: distribution metadata"
    if name.endswith(".pth"):
        return f"{path}: a .pth file runs at interpreter start-up"
    if posixpath.splitext(name)[0] in STARTUP_NAMES or name in STARTUP_NAMES:
        return f"{path}: run at interpreter start-up"
    return None


# A file Python can import as a module (a folder is one too: a namespace package).
MODULE_SUFFIXES = ("py", "pyc", "pyw", "pyd", "so")


def top_level_names(tree_paths: Iterable[str], folders: Iterable[str]) -> dict[str, set[str]]:
    """The module names the tree has directly in each of ``folders`` (files and folders)."""
    names: dict[str, set[str]] = {folder: set() for folder in folders}
    for path in tree_paths:
        for folder, taken in names.items():
            name = _module_name(path, folder)
            if name:
                taken.add(name)
    return names


def new_top_level_module(path: str, names: dict[str, set[str]]) -> str | None:
    """Why the new file ``path`` adds an importable name the tree does not have, or None."""
    for folder, taken in sorted(names.items()):
        name = _module_name(path, folder)
        if name and name not in taken:
            where = folder or "the repository root"
            return (
                f"{path}: a new top-level module {name!r} in {where}, where the task's tree has "
                "none of that name (anything that tries an import would load it); put new code "
                "inside the project's package"
            )
    return None


def _module_name(path: str, folder: str) -> str:
    """The top-level module ``path`` makes importable from ``folder`` ("" for none)."""
    prefix = f"{folder}/" if folder else ""
    if not path.startswith(prefix):
        return ""
    head, _, rest = path[len(prefix) :].partition("/")
    if rest:  # a folder: a package or a namespace package
        return head if head.isidentifier() else ""
    stem, _, suffix = head.partition(".")
    if not stem.isidentifier() or suffix.rsplit(".", 1)[-1] not in MODULE_SUFFIXES:
        return ""
    return stem


def import_dirs(graded_files: Iterable[str], tree_paths: Iterable[str]) -> set[str]:
    """Folders on the tests' ``sys.path``: the root, graded tests' and conftests' folders (pytest
    puts them there), and each source root: the folder above a top-level package (``src/``)."""
    paths = list(tree_paths)
    dirs = {""} | {posixpath.dirname(p) for p in graded_files}
    dirs |= {posixpath.dirname(p) for p in paths if p.rsplit("/", 1)[-1] == "conftest.py"}
    packages = {posixpath.dirname(p) for p in paths if p.rsplit("/", 1)[-1] == "__init__.py"}
    dirs |= {posixpath.dirname(p) for p in packages if posixpath.dirname(p) not in packages}
    return dirs
