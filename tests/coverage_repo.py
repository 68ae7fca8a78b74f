"""A test-built package whose suite runs half its functions: where guided injection must aim.

``COVERED`` are the functions a test calls; the ``never_*`` ones have the same shapes (branches,
loops, comparisons) so the operators find as many sites in them, yet no test runs them.
"""

from __future__ import annotations

from pathlib import Path

from repo_factory import RepoBuilder

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "halfway"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["halfway"]
"""


def _pair(name: str) -> str:
    return f"""

def {name}_clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def {name}_total(items):
    result = 0
    for item in items:
        if item > 0:
            result += item
    return result


def {name}_count(n):
    i = 0
    steps = []
    while i < n:
        steps.append(i)
        i += 1
    return steps
"""


CORE = '"""Tested and untested functions of the same shapes."""\n' + _pair("seen") + _pair("never")
COVERED = ("seen_clamp", "seen_total", "seen_count")
PATH = "halfway/core.py"

TESTS = """\
from halfway.core import seen_clamp, seen_count, seen_total


def test_clamp_low():
    assert seen_clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert seen_clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert seen_clamp(5, 0, 10) == 5


def test_total():
    assert seen_total([1, -2, 3]) == 4


def test_total_empty():
    assert seen_total([]) == 0


def test_count():
    assert seen_count(3) == [0, 1, 2]


def test_count_none():
    assert seen_count(0) == []
"""


def build_halfway_repo(path: Path) -> str:
    """The package and its suite in one commit; returns the commit."""
    builder = RepoBuilder(path)
    return builder.commit(
        "halfway",
        {
            "pyproject.toml": PYPROJECT,
            "halfway/__init__.py": "",
            PATH: CORE,
            "tests/test_core.py": TESTS,
        },
    )
