"""What a model's patch may change: source. Files that load before or beside the tests are refused.

Two classes, each decided by what the file is, not by a list of known tricks:

- **start-up and metadata files**, anywhere in the tree: distribution metadata (``*.dist-info``,
  ``*.egg-info``: entry points are how pytest plugins and console scripts load), ``*.pth`` files,
  ``sitecustomize``/``usercustomize``. No fix of a project's code needs one.
- **a new top-level module whose name the image can already import** (the standard library, the
  image's site-packages, the interpreter's built-ins), placed where pytest may put a folder ahead
  of them on ``sys.path`` (the repository root, the folders of test files and conftest modules):
  it would stand in for the real one. The names come from the task's image itself
  (``supervisor.py probe``), so a new dependency of a project is covered without a list.

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


def shadowing_module(
    path: str, import_dirs: Iterable[str], importable: frozenset[str]
) -> str | None:
    """Why the new file ``path`` would shadow an importable module, or None."""
    for folder in import_dirs:
        prefix = f"{folder}/" if folder else ""
        if not path.startswith(prefix):
            continue
        head = path[len(prefix) :].split("/", 1)[0]
        module = head.split(".", 1)[0]
        if module in importable:
            where = folder or "the repository root"
            return f"{path}: a new module {module!r} in {where} would stand in for the image's"
    return None


def import_dirs(graded_files: Iterable[str], tree_paths: Iterable[str]) -> set[str]:
    """Folders pytest may put ahead of site-packages: the root, graded tests' and conftests'."""
    dirs = {""} | {posixpath.dirname(p) for p in graded_files}
    dirs |= {posixpath.dirname(p) for p in tree_paths if p.rsplit("/", 1)[-1] == "conftest.py"}
    return dirs
