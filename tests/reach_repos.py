"""Test-built repositories for issue 14: one per way a real repository's environment failed.

Each is a small pure-Python package with a real pytest suite (branchy functions that bugs can be
injected into, tests that catch them), plus the one thing that broke the detector on a public
library: a dev group that includes docs tools (filelock), a tox env with a VCS dependency (pluggy),
a test importing an optional extra's module (deepdiff, pyparsing), a test module needing a git
submodule that is not there (tomlkit), a suite older than the newest pytest with
``filterwarnings = error`` (dateutil, Python-Markdown), ``requires-python >= 3.12``. Two more are
bad input: a repository with no tests, and one whose requirements name a private index.

``REACH_REPOS`` maps each name to its builder and the number of tests its suite collects once the
environment is right (excluded modules left out).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from repo_factory import GIT_ENV, RepoBuilder

RECENT = "2026-06-01"  # newer than every pytest major: the newest runner fits
OLD = "2023-03-01"  # before pytest 8: a suite of this era was written for pytest 7
PRIVATE_REQUIREMENT = "trajforge-private-toolkit==2.1.0"  # on the private index only


class DatedRepo(RepoBuilder):
    """A RepoBuilder whose commits start at ``start`` (author and committer date), one day apart."""

    def __init__(self, path: Path, start: str = RECENT) -> None:
        self.start = date.fromisoformat(start)
        super().__init__(path)

    def git(self, *args: str, input: bytes | None = None) -> str:
        stamp = f"{(self.start + timedelta(days=self.day)).isoformat()}T12:00:00+00:00"
        env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        out = subprocess.run(
            ["git", "-C", str(self.path), *args],
            input=input,
            env=env,
            check=True,
            capture_output=True,
        )
        return out.stdout.decode().strip()


CORE = '''\
"""Small functions with branches, loops and handlers."""


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(items):
    result = 0
    for item in items:
        if item > 0:
            result += item
    return result


def count_up(n):
    i = 0
    steps = []
    while i < n:
        steps.append(i)
        i += 1
    return steps


def parse_pair(text):
    try:
        left, right = text.split(",")
        return int(left), int(right)
    except ValueError:
        return None
'''

CORE_TESTS = """\
from {pkg}.core import clamp, count_up, parse_pair, total


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_total_skips_negatives():
    assert total([1, -2, 3]) == 4


def test_count_up():
    assert count_up(3) == [0, 1, 2]


def test_parse_pair():
    assert parse_pair("1,2") == (1, 2)


def test_parse_pair_bad():
    assert parse_pair("x") is None
"""
CORE_TEST_COUNT = 7

TEST_EXTRA = """\
[project.optional-dependencies]
test = ["pytest"]
"""

PYTEST_ERRORS_ON_WARNINGS = """\
[pytest]
filterwarnings =
    error
"""


def pyproject(pkg: str, body: str = "", requires_python: str = ">=3.9") -> str:
    """A setuptools pyproject for ``pkg`` with ``body`` (extras, groups) appended."""
    head = f"""\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{pkg}"
version = "0.1.0"
requires-python = "{requires_python}"
dependencies = []

[tool.setuptools]
packages = ["{pkg}"]
"""
    return head + (f"\n{body}" if body else "")


def package(pkg: str, tests: bool = True) -> dict[str, str]:
    """The package's core module and (unless ``tests`` is false) its suite."""
    files = {f"{pkg}/__init__.py": "", f"{pkg}/core.py": CORE}
    if tests:
        files["tests/test_core.py"] = CORE_TESTS.format(pkg=pkg)
    return files


# --- 1. a docs group that cannot install (filelock) --------------------------------------------

DOCS_GROUP = """\
[dependency-groups]
docs = ["sphinx>=99"]
test = ["pytest"]
dev = [{include-group = "docs"}, {include-group = "test"}]
"""


def build_docs_group(path: Path) -> None:
    """``dev`` includes ``docs``, whose ``sphinx>=99`` installs nowhere; the tests need neither."""
    repo = DatedRepo(path)
    files = {"pyproject.toml": pyproject("lockbox", DOCS_GROUP), **package("lockbox")}
    repo.commit("lockbox: clamps, totals and pairs", files)


# --- 2. a tox env with a VCS dependency (pluggy) -----------------------------------------------

TOX_VCS = """\
[tox]
envlist = py3{9,10,11,12,13}, pytestmain

[testenv]
deps =
    pytest
    pytestmain: git+https://github.com/pytest-dev/pytest.git@main
commands = pytest {posargs:tests}
"""


def build_tox_vcs(path: Path) -> None:
    """tox's ``pytestmain`` env installs pytest from GitHub (unreachable offline); ``py3x``
    works."""
    repo = DatedRepo(path)
    files = {"pyproject.toml": pyproject("hookspan"), "tox.ini": TOX_VCS, **package("hookspan")}
    repo.commit("hookspan: clamps, totals and pairs", files)


# --- 3. a test importing an optional extra's module (deepdiff, pyparsing) -----------------------

CLI = """\
import click

from clipper.core import clamp, total


@click.command()
@click.option("--lo", type=int, default=0)
@click.option("--hi", type=int, default=100)
@click.argument("numbers", nargs=-1, type=int)
def main(lo, hi, numbers):
    \"\"\"Print the total of the positive NUMBERS, clamped to [lo, hi].\"\"\"
    value = clamp(total(numbers), lo, hi)
    if value == hi:
        click.echo(f"{value} (capped)")
    else:
        click.echo(str(value))
"""

CLI_TESTS = """\
import click
from click.testing import CliRunner

from clipper.cli import main


def test_prints_the_total():
    result = CliRunner().invoke(main, ["--", "1", "-2", "3"])
    assert result.exit_code == 0
    assert result.output == "4\\n"


def test_says_when_capped():
    result = CliRunner().invoke(main, ["--hi", "5", "4", "9"])
    assert result.exit_code == 0
    assert result.output == "5 (capped)\\n"


def test_main_is_a_click_command():
    assert isinstance(main, click.Command)
"""

EXTRA_CLI = """\
[project.optional-dependencies]
test = ["pytest"]
cli = ["click"]
"""


def build_extra_import(path: Path) -> None:
    """tests/test_cli.py imports ``click``, declared only in the ``cli`` extra."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("clipper", EXTRA_CLI),
        **package("clipper"),
        "clipper/cli.py": CLI,
        "tests/test_cli.py": CLI_TESTS,
    }
    repo.commit("clipper: a command line", files)


DATES = """\
from dateutil import parser


def days_between(first, second):
    start = parser.isoparse(first)
    end = parser.isoparse(second)
    if end < start:
        start, end = end, start
    return (end - start).days
"""

DATES_TESTS = """\
from dateutil import parser

from almanac.dates import days_between


def test_days_between():
    assert days_between("2024-01-01", "2024-01-31") == 30


def test_days_between_either_order():
    assert days_between("2024-03-01", "2024-02-01") == 29


def test_isoparse_reads_a_date():
    assert parser.isoparse("2024-02-29").day == 29
"""

EXTRA_DATES = """\
[project.optional-dependencies]
test = ["pytest"]
dates = ["python-dateutil"]
"""


def build_extra_import_alias(path: Path) -> None:
    """tests/test_dates.py imports ``dateutil``, which the ``dates`` extra installs as
    ``python-dateutil``: the import name is not the distribution's."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("almanac", EXTRA_DATES),
        **package("almanac"),
        "almanac/dates.py": DATES,
        "tests/test_dates.py": DATES_TESTS,
    }
    repo.commit("almanac: days between dates", files)


# --- 4. a test module that cannot collect (tomlkit's toml-test submodule) ----------------------

SUBMODULE = "tests/toml_test_data"
GITMODULES = f"""\
[submodule "{SUBMODULE}"]
\tpath = {SUBMODULE}
\turl = https://github.com/toml-lang/toml-test.git
"""
SUBMODULE_COMMIT = "5a1e9ac1b8f5b4a1ea2d1ad4e8e8f1f6c3b2a190"  # recorded, never fetched

VENDOR_TESTS = """\
import pytest
from toml_test_data import cases

from tomlette.core import parse_pair


@pytest.mark.parametrize("case", cases.valid("pairs"))
def test_valid_pairs(case):
    assert parse_pair(case.text) == case.expected
"""


def build_missing_submodule(path: Path) -> None:
    """tests/test_vendor.py imports test data from a git submodule that was never checked out
    (a real gitlink: the folder is empty in every archive of the commit)."""
    repo = DatedRepo(path)
    repo.write(
        {
            "pyproject.toml": pyproject("tomlette", TEST_EXTRA),
            **package("tomlette"),
            "tests/test_vendor.py": VENDOR_TESTS,
            ".gitmodules": GITMODULES,
        }
    )
    (path / SUBMODULE).mkdir(parents=True, exist_ok=True)  # a clone without --recursive
    repo.git("add", "-A")
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{SUBMODULE_COMMIT},{SUBMODULE}")
    repo.git("commit", "-q", "-m", "tomlette: pairs, checked against toml-test")
    repo.day += 1


# --- 5. the newest runner breaks an older suite (dateutil, Python-Markdown) ---------------------

ERA_TESTS = """\
import pytest

from tabular.core import clamp


def clamp_cases():
    for value, expected in ((-5, 0), (5, 5), (50, 10)):
        yield value, expected


@pytest.mark.parametrize(("value", "expected"), clamp_cases())
def test_clamp_cases(value, expected):
    assert clamp(value, 0, 10) == expected
"""


def build_runner_era(path: Path) -> None:
    """Committed in 2023 with ``filterwarnings = error``; a test passes a generator to
    ``parametrize``, which pytest 9.2 deprecates (PytestRemovedIn10Warning): a collection error
    under the newest pytest, fine under the pytest of its era."""
    repo = DatedRepo(path, start=OLD)
    files = {
        "pyproject.toml": pyproject("tabular", TEST_EXTRA),
        "pytest.ini": PYTEST_ERRORS_ON_WARNINGS,
        **package("tabular"),
        "tests/test_table.py": ERA_TESTS,
    }
    repo.commit("tabular: table-driven clamp tests", files)


def build_runner_deprecation(path: Path) -> None:
    """The same suite committed after pytest 9 came out: no era pin helps, so the multi-line
    PytestRemovedIn10Warning must be kept a warning (``-W ignore::...``) for it to collect."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("tabulate9", TEST_EXTRA),
        "pytest.ini": PYTEST_ERRORS_ON_WARNINGS,
        **package("tabulate9"),
        "tests/test_table.py": ERA_TESTS.replace("tabular", "tabulate9"),
    }
    repo.commit("tabulate9: table-driven clamp tests", files)


HELPER_TESTS = '''\
from marksmith.core import total


class TestHelper:
    """Not a test: it builds inputs. pytest cannot collect a class with __init__ and warns."""

    def __init__(self, values):
        self.values = list(values)

    def run(self):
        return total(self.values)


def test_helper_total():
    assert TestHelper([1, 2, -3]).run() == 3


def test_helper_empty():
    assert TestHelper([]).run() == 0
'''


def build_runner_warning(path: Path) -> None:
    """``filterwarnings = error`` and a helper class named ``Test*`` with ``__init__``: every
    pytest warns (PytestCollectionWarning) and the project's filter makes that a collection
    error. No runner version avoids it; ``-W ignore::pytest.PytestCollectionWarning`` does."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("marksmith", TEST_EXTRA),
        "pytest.ini": PYTEST_ERRORS_ON_WARNINGS,
        **package("marksmith"),
        "tests/test_helpers.py": HELPER_TESTS,
    }
    repo.commit("marksmith: a test helper", files)


# --- 6. requires-python >= 3.12 -----------------------------------------------------------------

BATCHES = """\
from itertools import batched


def chunk_sums(values, size):
    sums = []
    for chunk in batched(values, size):
        if chunk:
            sums.append(sum(chunk))
    return sums
"""

BATCHES_TESTS = """\
from modernpy.batches import chunk_sums


def test_chunk_sums():
    assert chunk_sums([1, 2, 3, 4, 5], 2) == [3, 7, 5]


def test_chunk_sums_empty():
    assert chunk_sums([], 3) == []
"""


def build_new_python(path: Path) -> None:
    """``requires-python = ">=3.12"`` and code that needs it (``itertools.batched``)."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("modernpy", TEST_EXTRA, requires_python=">=3.12"),
        **package("modernpy"),
        "modernpy/batches.py": BATCHES,
        "tests/test_batches.py": BATCHES_TESTS,
    }
    repo.commit("modernpy: chunked sums", files)


# --- bad input ----------------------------------------------------------------------------------


def build_no_tests(path: Path) -> None:
    """A package with no tests at all."""
    repo = DatedRepo(path)
    files = {"pyproject.toml": pyproject("untested", TEST_EXTRA), **package("untested", False)}
    repo.commit("untested: no tests yet", files)


PRIVATE_REQUIREMENTS = f"""\
--index-url https://pypi.invalid/simple
{PRIVATE_REQUIREMENT}
"""


def build_private_index(path: Path) -> None:
    """An application (no pyproject, no setup.py) whose requirements.txt names a private index
    and a requirement that exists only there."""
    repo = DatedRepo(path)
    files = {"requirements.txt": PRIVATE_REQUIREMENTS, **package("inhouse")}
    repo.commit("inhouse: internal helpers", files)


@dataclass(frozen=True)
class ReachRepo:
    build: Callable[[Path], None]
    collected: int  # tests collected once the environment is right, exclusions applied


REACH_REPOS: dict[str, ReachRepo] = {
    "docs_group": ReachRepo(build_docs_group, CORE_TEST_COUNT),
    "tox_vcs": ReachRepo(build_tox_vcs, CORE_TEST_COUNT),
    "extra_import": ReachRepo(build_extra_import, CORE_TEST_COUNT + 3),
    "extra_import_alias": ReachRepo(build_extra_import_alias, CORE_TEST_COUNT + 3),
    "missing_submodule": ReachRepo(build_missing_submodule, CORE_TEST_COUNT),
    "runner_era": ReachRepo(build_runner_era, CORE_TEST_COUNT + 3),
    "runner_deprecation": ReachRepo(build_runner_deprecation, CORE_TEST_COUNT + 3),
    "runner_warning": ReachRepo(build_runner_warning, CORE_TEST_COUNT + 2),
    "new_python": ReachRepo(build_new_python, CORE_TEST_COUNT + 2),
    "no_tests": ReachRepo(build_no_tests, 0),
    "private_index": ReachRepo(build_private_index, CORE_TEST_COUNT),
}


# --- issue 30: test runs in the wild ------------------------------------------------------------

HANGING_TESTS = """\
import time


def test_waits_for_a_server_that_never_answers():
    time.sleep(600)
"""


def build_hanging_test(path: Path) -> None:
    """A pure suite plus one test that hangs for 10 minutes: with a per-test limit it fails
    alone and the rest decides."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("sleepy", TEST_EXTRA),
        **package("sleepy"),
        "tests/test_hangs.py": HANGING_TESTS,
    }
    repo.commit("sleepy: clamps, totals, and a test that waits forever", files)


OUTSIDE_WORLD_TESTS = """\
import os
import socket


def test_summarises_with_the_api():
    key = os.environ["SOME_API_KEY"]
    assert key


def test_asks_the_local_server():
    with socket.create_connection(("127.0.0.1", 9), timeout=2):
        pass
"""


def build_outside_world(path: Path, pure: bool = True) -> None:
    """Tests that need an API key and a server beside (unless ``pure`` is false) pure ones."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("webby", TEST_EXTRA),
        **package("webby", tests=pure),
        "tests/test_remote.py": OUTSIDE_WORLD_TESTS,
    }
    repo.commit("webby: helpers and the calls to the service", files)


def build_tests_deleted(path: Path) -> None:
    """A package whose newest commit deletes its tests (they moved elsewhere)."""
    repo = DatedRepo(path)
    files = {"pyproject.toml": pyproject("moved", TEST_EXTRA), **package("moved")}
    repo.commit("moved: clamps, totals and pairs, tested", files)
    repo.commit("tests live in another repository now", {"tests/test_core.py": None})


def build_runner_dependency(path: Path) -> None:
    """An application (no packaging files: nothing installs it) whose own package is named like
    one of pytest's dependencies (iniconfig, src layout): PyPI's iniconfig, installed with the
    runner, stands in for it, and the tests would import that, not /repo's code."""
    repo = DatedRepo(path)
    files = {
        "requirements.txt": "pytest\n",
        "src/iniconfig/__init__.py": "",
        "src/iniconfig/core.py": CORE,
        "tests/test_core.py": CORE_TESTS.format(pkg="iniconfig"),
    }
    repo.commit("iniconfig: our own, not PyPI's", files)
