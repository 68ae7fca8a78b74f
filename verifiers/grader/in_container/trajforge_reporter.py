"""pytest plugin of the grader: each test report leaves the process the moment pytest makes it.

Shipped into the container at /opt/trajforge/plugins (root's, read-only to the tests) and loaded
with ``-p trajforge_reporter``. Every record is one JSON line written with a single ``os.write``
to the pipe whose number is in ``TRAJFORGE_RESULT_FD``; the supervisor, a process the tests
cannot signal, trace or write over, holds the other end. What was sent cannot be taken back:
a second record for the same test phase, or anything after ``finish``, marks the run forged.

It must import nothing but pytest and the standard library, and run on Python 3.9.
"""

import json
import os

FD_ENV = "TRAJFORGE_RESULT_FD"
_FD = int(os.environ.get(FD_ENV, "-1"))


def _send(record):
    if _FD < 0:
        return
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(_FD, data) :]


def pytest_runtest_logreport(report):
    _send(
        {
            "t": "report",
            "id": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "xfail": bool(getattr(report, "wasxfail", None) is not None),
            # A subtest's report (pytest's own subtests, pytest-subtests) shares its test's id.
            "sub": getattr(report, "context", None) is not None,
        }
    )


def pytest_collectreport(report):
    if report.failed:
        _send({"t": "collect_error", "id": report.nodeid})


def pytest_unconfigure(config):
    _send({"t": "finish"})
