"""Test ids are pytest node ids (``tests/t.py::TestX::test_a[1]``); the parts every stage reads.

Also which paths are tests (``is_test_path``: mining's split into patch and test_patch) and which
paths decide how a test run goes (``is_grading_path``: what verification never takes from a model).
"""

from __future__ import annotations

import posixpath

TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__"})
# Files pytest or the interpreter read before or around a run, wherever they sit: pytest's config
# files (pytest looks for them from the common ancestor of the test paths upward, so a nested one
# counts too), conftest modules, and what Python's ``site`` runs at start-up.
GRADING_FILES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        ".coveragerc",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
# .pth files run at start-up; bytecode may run in place of its source (an unchecked-hash .pyc does)
GRADING_SUFFIXES = (".pth", ".pyc", ".pyo")


def short_test_name(test_id: str) -> str:
    """The function name inside a test id: ``tests/t.py::TestX::test_a[1]`` -> ``test_a``; a
    JavaScript id's title: ``test/a.test.js > sum > adds (2)`` -> ``adds (2)``."""
    if "::" not in test_id and " > " in test_id:  # verifiers/reports/ids.py's separator
        return test_id.rsplit(" > ", 1)[-1].strip()
    name = test_id.split("::")[-1].split("[")[0].split(" (")[0]
    return name.strip()


def test_file(test_id: str) -> str:
    """The file a test id lives in: ``tests/t.py::TestX::test_a[1]`` -> ``tests/t.py``."""
    return test_id.split("::")[0]


def is_module_doctest(test_id: str) -> bool:
    """Whether the id is pytest's doctest of a source module (``--doctest-modules``):
    ``calc/ops.py::calc.ops.add``, a ``.py`` file that is not a test file by name, one ``::``,
    then the doctest's dotted name (the module's own for its docstring). Such a file is the code
    under test, not a test file: it is never reset to the task's own nor given sentinels; its
    graded examples are the task's own (``verifiers/languages/python/doctests.py``)."""
    path, sep, name = test_id.partition("::")
    if not sep or "::" in name or not path.endswith(".py") or is_test_path(path):
        return False
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    stem = posixpath.splitext(posixpath.basename(path))[0]
    module = posixpath.basename(posixpath.dirname(path)) if stem == "__init__" else stem
    return len(parts) > 1 or name == module


def test_scopes(test_id: str) -> list[str]:
    """Class and function names below the file, parameters dropped: ``["TestX", "test_a"]``."""
    return [part.split("[")[0] for part in test_id.split("::")[1:]]


def is_test_path(path: str) -> bool:
    """SWE-bench's split: test directories, test modules and conftest.py belong to test_patch."""
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    stem, suffix = posixpath.splitext(name)
    if suffix != ".py":
        return False
    return (
        stem.startswith("test_") or stem.endswith("_test") or stem in {"conftest", "tests", "test"}
    )


def is_grading_path(path: str) -> bool:
    """A path whose content decides how the tests run or what they report, not what they test.

    Tests (``is_test_path``, a test directory itself included), conftest modules, pytest's and
    tox's config files, ``.coveragerc``, ``sitecustomize``/``usercustomize`` and ``.pth`` files,
    compiled bytecode (``__pycache__``, ``.pyc``), at any depth. ``pyproject.toml``, ``setup.cfg``
    and ``tox.ini`` count whole: a section test (``[tool.pytest.ini_options]``, ``[tool:pytest]``)
    is easy to dodge (dotted keys, inline tables), and the environment is installed when the image
    is built, so at test time these files are configuration only.
    """
    name = path.rsplit("/", 1)[-1]
    return (
        is_test_path(path)
        or name in TEST_DIRS
        or "__pycache__" in path.split("/")
        or name in GRADING_FILES
        or name.endswith(GRADING_SUFFIXES)
    )
