"""What a model's patch may change in a Go task: its source, nothing that decides how the tests
build or run.

- **refused by name** (``forbidden_file``): anything under a ``vendor/`` folder (the module's
  copies of its dependencies: the tests would build against the patch's copy) and a workspace
  file (``go.work``, ``go.work.sum``: it adds modules, and their ``replace``s, to the build).
- **refused by content** (``refused_changes``): a new ``*_test.go`` (a test file the task's
  tree lacks is compiled into the test binary: a ``TestMain`` or an ``init`` there runs before
  and around every graded test); a ``go.mod`` whose ``replace`` points into a folder the patch
  adds (the build would take a dependency, ``testing``'s neighbours included, from the patch);
  an added ``//go:linkname`` (it reaches any package's unexported functions and variables:
  the ``testing`` package's state, ``os``'s exit hook, the runtime's; narrowing it to "into
  testing or runtime" is bypassed through any package in between, and a fix never needs one)
  and an added ``//go:embed`` (the grader's sentinel file lies in the package's folder while
  the test binary is built: an embed pattern would compile its source, outcomes included, into
  the code under test).
- **reset to the task's own** (``is_grading_path``): test files (``*_test.go``), anything under
  a ``testdata/`` folder, every ``go.mod`` and ``go.sum``: nothing is fetched at test time, so a
  fix never needs a new requirement, and a ``replace`` or ``toolchain`` line would change what
  builds.
- everything else is source, and counts.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from trajforge.verifiers.languages.base import TaskTree

TEST_SUFFIX = "_test.go"
MODULE_FILES = frozenset({"go.mod", "go.sum"})
WORKSPACE_FILES = frozenset({"go.work", "go.work.sum"})
DIRECTIVES = ("//go:linkname", "//go:embed")
# go.mod's replace lines, one or in a block: ``old [v] => new [v]``; a new that starts with ./
# or ../ (or /) is a folder, not a module.
_REPLACE_BLOCK = re.compile(r"^\s*replace\s*\((.*?)^\s*\)", re.MULTILINE | re.DOTALL)
_REPLACE_LINE = re.compile(r"^\s*replace\s+(.+)$", re.MULTILINE)


def forbidden_file(path: str) -> str | None:
    """Why the patch may not hold ``path`` at all, or None."""
    parts = path.split("/")
    if "vendor" in parts[:-1]:
        return f"{path}: inside vendor/ (the module's copies of its dependencies)"
    if parts[-1] in WORKSPACE_FILES:
        return f"{path}: a Go workspace file (it adds modules and replacements to the build)"
    return None


def is_test_file(path: str) -> bool:
    return path.endswith(TEST_SUFFIX) and not path.rsplit("/", 1)[-1].startswith(("_", "."))


def is_grading_path(path: str) -> bool:
    """A test file, a testdata file or a module file, by name."""
    parts = path.split("/")
    return path.endswith(TEST_SUFFIX) or "testdata" in parts[:-1] or parts[-1] in MODULE_FILES


def refused_changes(
    clean: TaskTree, changed: TaskTree, kept: list[str], new: set[str]
) -> list[str]:  # fmt: skip
    """Why the patch's changes are refused before anything runs (the module doc's second
    class); empty when they are not."""
    why = [f"{p}: a new Go test file (compiled into the test binary)" for p in sorted(new)
           if p.endswith(TEST_SUFFIX)]  # fmt: skip
    for path in kept:
        if not path.endswith(".go"):
            continue
        before, after = clean.blob(path) or b"", changed.blob(path) or b""
        for directive in DIRECTIVES:
            if after.count(directive.encode()) > before.count(directive.encode()):
                why.append(f"{path}: adds a {directive} directive")
    added = {p for p in changed.paths() if clean.blob(p) is None}
    for module in sorted(p for p in changed.paths() if p.rsplit("/", 1)[-1] == "go.mod"):
        text = (changed.blob(module) or b"").decode("utf-8", "replace")
        if text == (clean.blob(module) or b"").decode("utf-8", "replace"):
            continue
        for target in replaced_folders(text):
            folder = posixpath.normpath(posixpath.join(posixpath.dirname(module), target))
            if any(p.startswith(folder + "/") for p in added):
                why.append(f"{module}: replaces a module with {target}, a folder the patch adds")
    return why


def replaced_folders(go_mod: str) -> list[str]:
    """The local folders ``go_mod``'s replace directives point to."""
    lines: list[str] = []
    for block in _REPLACE_BLOCK.finditer(go_mod):
        lines += block.group(1).splitlines()
    lines += [m.group(1) for m in _REPLACE_LINE.finditer(go_mod) if not m.group(1).startswith("(")]
    folders = []
    for line in lines:
        _, arrow, target = line.partition("=>")
        words = target.split()
        target = words[0].strip('"`') if words else ""
        if arrow and target.startswith(("./", "../", "/")):
            folders.append(target)
    return folders


def test_files_in(paths: Iterable[str], folder: str) -> list[str]:
    """The test files directly inside ``folder`` (``"."``: the repository's root)."""
    return sorted(p for p in paths if is_test_file(p) and (posixpath.dirname(p) or ".") == folder)
