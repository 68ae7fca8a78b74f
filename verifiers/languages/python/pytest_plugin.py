"""trajforge's pytest plugin, shipped into the container (as ``trajforge_pytest``) for bug runs.

It does three things, each only when asked:

- **The repository's own options do not change what trajforge measures.** The runs block
  pytest-cov and pytest-xdist (``-p no:pytest_cov -p no:xdist``), which would take coverage.py
  over from the per-test contexts or split the run across processes; this plugin then accepts
  and ignores their options, so a project's ``addopts = --cov=pkg -n auto`` still parses and the
  rest of its options (``--doctest-modules``, ``filterwarnings``...) still apply.
- **Per-test coverage contexts**: under ``coverage run``, each test's lines are recorded under its
  node id.
- **Subprocesses are measured too**: during each test ``TRAJFORGE_COV_TEST`` holds its node id, so
  a Python subprocess it starts (coverage's ``process_startup``, through the ``.pth`` file
  ``coverage.install_support`` writes) records its lines under the same test.
- **Covering tests first, and stop when none fails** (``TRAJFORGE_FIRST`` names a file of node
  ids): those tests run first; if none of them fails, the rest of the suite is not run (an
  equivalent bug costs its covering tests); otherwise the run goes on through the whole suite in
  the same process (a full run). With ``TRAJFORGE_ONLY_FIRST`` set the rest never runs: the
  covering tests decide (``mutants.py``).
- **Failures confirmed in the same process** (``TRAJFORGE_RERUN_OUT`` names a JSON file): a first
  test that fails in its call (its setup passed) is run once more right away, as
  pytest-rerunfailures does, and the second outcome is written to that file. Sound for the call:
  its own fixtures are torn down and set up anew (module and session ones are kept, as for any
  next test), so a failure the bug causes repeats and a nondeterministic one may not; what it
  does not see (state a test leaks into its process) the clean-side confirmation and the audit
  do. A test whose setup or teardown failed is not rerun here (a broken fixture's cached
  state could outlive the teardown); the caller reruns it in a new process.

It must import nothing but pytest and the standard library (coverage.py only when it is running).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

FIRST_ENV = "TRAJFORGE_FIRST"
ONLY_FIRST_ENV = "TRAJFORGE_ONLY_FIRST"
RERUN_OUT_ENV = "TRAJFORGE_RERUN_OUT"
TEST_ENV = "TRAJFORGE_COV_TEST"  # the running test, for coverage in its subprocesses
STOP_LINE = "[trajforge] none of the {n} covering test(s) failed: the rest of the suite was not run"

# pytest-cov's and pytest-xdist's options (name, argparse keywords), accepted and ignored.
_IGNORED_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--cov",), {"action": "append", "nargs": "?", "const": True, "default": []}),
    (("--cov-reset",), {"action": "store_true"}),
    (("--cov-report",), {"action": "append", "default": []}),
    (("--cov-config",), {"action": "store"}),
    (("--no-cov-on-fail",), {"action": "store_true"}),
    (("--no-cov",), {"action": "store_true"}),
    (("--cov-fail-under",), {"action": "store"}),
    (("--cov-append",), {"action": "store_true"}),
    (("--cov-branch",), {"action": "store_true"}),
    (("--cov-precision",), {"action": "store"}),
    (("--cov-context",), {"action": "store"}),
    (("--numprocesses",), {"action": "store"}),  # its `-n` is taken out of the arguments
    (("--maxprocesses",), {"action": "store"}),
    (("--max-worker-restart",), {"action": "store"}),
    (("--dist",), {"action": "store"}),
)


class _Order:
    """Which tests run first, whether one of them failed, and whether the rest is skipped."""

    def __init__(self) -> None:
        self.first: frozenset[str] = frozenset()
        self.last = ""
        self.failed = False
        self.stop = False
        self.only = False
        self.reruns: dict[str, str] = {}  # node id -> outcome of its in-process rerun


_ORDER = _Order()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trajforge", "accepted and ignored: trajforge runs tests its own way")
    for names, keywords in _IGNORED_OPTIONS:
        dest = "trajforge_ignored_" + names[-1].lstrip("-").replace("-", "_")
        group.addoption(*names, dest=dest, **keywords)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(args: list[str]) -> None:
    """xdist's ``-n N`` (from addopts too: they are in ``args`` by now) leaves the arguments;
    a plugin may not declare a short option, so it cannot be accepted like the long ones."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "-n":
            skip = True
        elif not (arg.startswith("-n") and arg[2:].lstrip("=").isalnum() and len(arg) > 2):
            kept.append(arg)
    args[:] = kept


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    path = os.environ.get(FIRST_ENV)
    if not path:
        return
    with open(path, encoding="utf-8") as handle:
        wanted = {line.rstrip("\n") for line in handle if line.strip()}
    front = [item for item in items if item.nodeid in wanted]
    if not front:  # nothing to put first: the whole suite, in its own order
        return
    items[:] = front + [item for item in items if item.nodeid not in wanted]
    _ORDER.first = frozenset(item.nodeid for item in front)
    _ORDER.last = front[-1].nodeid
    _ORDER.only = bool(os.environ.get(ONLY_FIRST_ENV))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    coverage = sys.modules.get("coverage")  # imported by `coverage run`, never by this plugin
    current = coverage.Coverage.current() if coverage is not None else None
    if current is not None:
        current.switch_context(item.nodeid)
        os.environ[TEST_ENV] = item.nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and report.nodeid in _ORDER.first:
        _ORDER.failed = True


def pytest_runtest_logfinish(nodeid: str) -> None:
    if nodeid == _ORDER.last and (_ORDER.only or not _ORDER.failed):
        _ORDER.stop = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if _ORDER.stop:
        return True  # handled, so pytest does not run it
    if not os.environ.get(RERUN_OUT_ENV) or item.nodeid not in _ORDER.first:
        return None
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    # Each run tears the test down to what ``nextitem`` shares with it (its own fixtures at
    # least), so the rerun sets them up anew.
    reports = runtestprotocol(item, nextitem=nextitem, log=True)
    phases = {report.when: report for report in reports}
    call, setup = phases.get("call"), phases.get("setup")
    if call is not None and call.failed and setup is not None and setup.passed:
        again = runtestprotocol(item, nextitem=nextitem, log=False)
        failed = any(report.failed for report in again if report.when == "call")
        _ORDER.reruns[item.nodeid] = "FAILED" if failed else "PASSED"
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_sessionfinish() -> None:
    path = os.environ.get(RERUN_OUT_ENV)
    if path:
        import json

        with open(path, "w", encoding="utf-8") as out:
            json.dump(_ORDER.reruns, out)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _ORDER.stop:
        terminalreporter.write_line(STOP_LINE.format(n=len(_ORDER.first)))
