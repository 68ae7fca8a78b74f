"""Test-built repositories for issue 43's Python suites: one per class a public suite failed in.

- ``stdlib_typing``: names Python 3.10 (its classifiers), and its code imports ``typing.Unpack``
  (new in 3.11): on 3.10 no test module imports;
- ``stdlib_module``: names 3.10, and its conftest imports ``tomllib`` (new in 3.11): on 3.10
  nothing collects;
- ``conftest_import``: its conftest imports ``toolz``, declared nowhere;
- ``late_module``: a suite that collects at its first commit; the next commit (same
  declarations, so the same prepared environment) adds a test module importing what no
  declaration names, beside the passing ones.

Each is a small pure-Python package with the shared branchy core (``reach_repos.CORE``) that bugs
are injected into, and tests that catch them.
"""

from __future__ import annotations

from pathlib import Path

from reach_repos import CORE_TEST_COUNT, TEST_EXTRA, DatedRepo, package, pyproject

PY310 = """\
classifiers = [
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3.10",
]
"""

OPTIONS = """\
\"\"\"Keyword options, typed with typing.Unpack (new in Python 3.11).\"\"\"

from typing import TypedDict, Unpack


class Options(TypedDict, total=False):
    lo: int
    hi: int


def bounded(value, **options: Unpack[Options]):
    lo = options.get("lo", 0)
    hi = options.get("hi", 100)
    if value < lo:
        return lo
    if value > hi:
        return hi
    return value
"""

OPTIONS_INIT = "from unpacked.options import bounded\n"

OPTIONS_TESTS = """\
from unpacked import bounded


def test_bounded_default():
    assert bounded(500) == 100


def test_bounded_low():
    assert bounded(-3, lo=1) == 1


def test_bounded_inside():
    assert bounded(7, lo=1, hi=9) == 7
"""


def _py310(pkg: str, body: str = TEST_EXTRA) -> str:
    """A pyproject that names Python 3.10 in its classifiers (the choice narrows to it)."""
    text = pyproject(pkg, body)
    return text.replace("dependencies = []\n", f"dependencies = []\n{PY310}")


def build_stdlib_typing(path: Path) -> None:
    """The package's ``__init__`` imports ``typing.Unpack``: every test module fails on 3.10."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": _py310("unpacked"),
        **package("unpacked"),
        "unpacked/__init__.py": OPTIONS_INIT,
        "unpacked/options.py": OPTIONS,
        "tests/test_options.py": OPTIONS_TESTS,
    }
    repo.commit("unpacked: keyword options typed with Unpack", files)


TOML_CONFTEST = """\
import tomllib

import pytest


@pytest.fixture
def settings():
    return tomllib.loads('lo = 0\\nhi = 10\\n')
"""

SETTINGS_TESTS = """\
from settled.core import clamp


def test_clamp_with_settings(settings):
    assert clamp(50, settings["lo"], settings["hi"]) == 10


def test_clamp_inside_settings(settings):
    assert clamp(5, settings["lo"], settings["hi"]) == 5
"""


def build_stdlib_module(path: Path) -> None:
    """``tests/conftest.py`` imports ``tomllib``: on 3.10 the conftest fails, nothing collects."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": _py310("settled"),
        **package("settled"),
        "tests/conftest.py": TOML_CONFTEST,
        "tests/test_settings.py": SETTINGS_TESTS,
    }
    repo.commit("settled: clamps read from TOML settings", files)


LATE_TESTS = """\
from generated_cases import CASES

from latecomer.core import clamp


def test_generated_cases():
    for value, expected in CASES:
        assert clamp(value, 0, 10) == expected
"""
LATE_MODULE = "tests/test_generated.py"


def build_late_module(path: Path) -> DatedRepo:
    """The first commit: a package whose suite collects and passes."""
    repo = DatedRepo(path)
    files = {"pyproject.toml": pyproject("latecomer", TEST_EXTRA), **package("latecomer")}
    repo.commit("latecomer: clamps, totals and pairs", files)
    return repo


def add_late_module(repo: DatedRepo) -> str:
    """The second commit: ``LATE_MODULE``, importing ``generated_cases`` (a file a script of the
    project would write; never committed), beside the passing modules. Returns its SHA."""
    return repo.commit("tests from generated cases", {LATE_MODULE: LATE_TESTS})


TOOLZ_CONFTEST = """\
import pytest
import toolz


@pytest.fixture
def doubled_total():
    from {pkg}.core import total

    return toolz.compose(lambda x: 2 * x, total)
"""

TOOLZ_TESTS = """\
def test_doubled_total(doubled_total):
    assert doubled_total([1, -2, 3]) == 8


def test_doubled_total_empty(doubled_total):
    assert doubled_total([]) == 0
"""
UNKNOWN_IMPORT = "trajforge_nowhere_helpers"  # on no index: PyPI answers 404


def build_conftest_import(path: Path, module: str = "toolz") -> None:
    """``tests/conftest.py`` imports ``module``, which nothing in the project declares (it came
    with the author's own virtualenv): ``toolz`` is on PyPI, ``UNKNOWN_IMPORT`` is not."""
    repo = DatedRepo(path)
    pkg = "composed" if module == "toolz" else "unknowable"
    conftest = TOOLZ_CONFTEST.format(pkg=pkg).replace("toolz", module)
    files = {
        "pyproject.toml": pyproject(pkg, TEST_EXTRA),
        **package(pkg),
        "tests/conftest.py": conftest,
        "tests/test_composed.py": TOOLZ_TESTS,
    }
    repo.commit(f"{pkg}: doubled totals through {module}", files)


STDLIB_REPOS = {  # name -> (builder, tests collected on the Python that has the name)
    "stdlib_typing": (build_stdlib_typing, CORE_TEST_COUNT + 3),
    "stdlib_module": (build_stdlib_module, CORE_TEST_COUNT + 2),
}
