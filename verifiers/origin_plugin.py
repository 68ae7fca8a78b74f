"""A pytest plugin for the collection's container: where the repository's own packages came from.

When the project is one of the runner's own dependencies (pluggy, iniconfig, packaging...) and
its install was replaced by PyPI's release, the tests import PyPI's code and the run looks like
success. After collection this writes, for each top-level package or module of /repo or
/repo/src that is imported, the file it was loaded from when that file is outside /repo (the
standard library aside: a repository's ``code.py`` never shadows ``code``). Standard library
only: it runs in the project's image (``verifiers/collection.py`` puts it there).
"""

from __future__ import annotations

import os
import sys
import sysconfig

REPO = "/repo"
OUT = "/tmp/trajforge-origins.txt"
NOT_THE_PROJECT = {"tests", "test", "testing", "conftest", "setup", "noxfile", "docs"}


def _own_names() -> set[str]:
    names = set()
    for base in (REPO, os.path.join(REPO, "src")):
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(base, entry)
            if entry.endswith(".py") and os.path.isfile(path):
                names.add(entry[:-3])
            elif os.path.isfile(os.path.join(path, "__init__.py")):
                names.add(entry)
    # A dunder module (a command-line project's __main__.py) is never an importable package of
    # the project: sys.modules["__main__"] is pytest's own, wherever it lives.
    return {
        name
        for name in names
        if name.isidentifier() and name not in NOT_THE_PROJECT and not name.startswith("__")
    }


def _where(module: object) -> str:
    found = getattr(module, "__file__", None)
    if found:
        return str(found)
    return str(next(iter(getattr(module, "__path__", None) or ()), ""))


def pytest_collection_finish(session: object) -> None:
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
    lines = []
    for name in sorted(_own_names()):
        module = sys.modules.get(name)
        where = _where(module) if module is not None else ""
        real = os.path.realpath(where) if where else ""
        installed = "site-packages" in real or "dist-packages" in real
        in_stdlib = real.startswith(stdlib) and not installed
        if real and not real.startswith(REPO + os.sep) and not in_stdlib:
            lines.append(f"{name}\t{where}")
    with open(OUT, "w", encoding="utf-8") as out:
        out.write("\n".join(lines))
