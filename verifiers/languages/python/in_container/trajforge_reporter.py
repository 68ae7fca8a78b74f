"""The grader's pytest plugin: each test report leaves the process the moment pytest makes it.

``launch.py`` loads this file by path into a namespace of its own (never ``sys.modules``) and
passes the plugin object to ``pytest.main``. Every record is one line, ``KEY JSON``, written with
a single ``os.write`` to the pipe the supervisor (a process the tests cannot signal, trace or
write over) holds the other end of. The key came on a one-shot pipe before any code of the
repository loaded; the supervisor keeps keyed lines only, so a line the tests write themselves
(they may find the pipe among their descriptors) is tampering. What was sent cannot be taken
back: a second record for the same test phase, or anything after ``finish``, marks the run
forged. The seal's checks (``seal.Integrity``) run before each graded test and at each of its
reports; a failed check is a ``tamper`` record.

It must import nothing but pytest and the standard library, and run on Python 3.9.
"""

import json
import os


def make(fd, key, integrity, graded):
    """(the plugin object, ``tamper(why)``). ``graded``: the ids the grader selected, checked
    before and after they run (empty: every test)."""
    prefix = (key + " ").encode()
    write, dumps = os.write, json.dumps  # bound now: rebinding os.write later changes nothing
    said = set()

    def send(record):
        data = prefix + (dumps(record, separators=(",", ":")) + "\n").encode("utf-8", "replace")
        while data:
            data = data[write(fd, data) :]

    def tamper(why):
        if why not in said:  # one record per reason: a hook raised in a loop stays one line
            said.add(why)
            send({"t": "tamper", "why": str(why)[:300]})

    def watched(nodeid):
        return not graded or nodeid in graded

    class Reporter:
        def pytest_load_initial_conftests(self):  # around every plugin's, conftests included
            integrity.fix_machinery()
            yield
            integrity.admit_own_patches()

        def pytest_collection_finish(self, session):
            integrity.fix_hooks(session.config)

        def pytest_runtest_call(self, item):
            if watched(item.nodeid):
                why = integrity.check(item)
                if why:
                    tamper(why)

        def pytest_runtest_logreport(self, report):
            item = _items.get(report.nodeid)
            if item is not None and report.when == "call":
                why = integrity.check(item)
                if why:
                    tamper(why)
            send(
                {
                    "t": "report",
                    "id": report.nodeid,
                    "when": report.when,
                    "outcome": report.outcome,
                    "xfail": bool(getattr(report, "wasxfail", None) is not None),
                    # A subtest's report (pytest's subtests, pytest-subtests) shares its test's id.
                    "sub": getattr(report, "context", None) is not None,
                }
            )

        def pytest_collection_modifyitems(self, items):
            for item in items:
                if watched(item.nodeid):
                    _items[item.nodeid] = item

        def pytest_collectreport(self, report):
            if report.failed:
                send({"t": "collect_error", "id": report.nodeid})

        def pytest_unconfigure(self, config):
            send({"t": "finish"})

    _items = {}
    # The plugin's hooks run before the project's (tryfirst), so its checks see the item as
    # pytest made it; pluggy reads the marker pytest.hookimpl sets.
    import pytest

    for name in ("pytest_runtest_call", "pytest_runtest_logreport"):
        setattr(Reporter, name, pytest.hookimpl(tryfirst=True)(getattr(Reporter, name)))
    # pytest's own patches (legacypath), a plugin's early code (pytest-django's settings import)
    # and the first conftests all run inside this hook: the seal fixes the machinery before the
    # first of them and admits only pytest's own changes after the last (the outermost wrapper:
    # tryfirst; old-style, so pytest 6 and up)
    wrapper = pytest.hookimpl(hookwrapper=True, tryfirst=True)
    name = "pytest_load_initial_conftests"
    setattr(Reporter, name, wrapper(getattr(Reporter, name)))
    return Reporter(), tamper
