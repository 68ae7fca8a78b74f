"""Starts pytest for the grader, in the tests' own (unprivileged) process, sealed.

Run as ``python -I -B launch.py`` by the supervisor: no working directory, PYTHONPATH or user
site on ``sys.path``. In order, before any file of the repository can load:

0. the process's memory is locked to it (``lockdown.py``: non-dumpable, kept so by a seccomp
   filter), or no test runs;
1. what to run comes from a one-shot pipe (``TRAJFORGE_LAUNCH_FD``, drained and closed): the
   pytest arguments (the selected test ids among them: never in ``argv`` or the environment),
   the records' key and the records' pipe;
2. pytest, every module of ``_pytest`` and pluggy and the standard library modules they load
   lazily are imported, from the image (the image's plugins, named with ``-p``, load from its
   site-packages, ahead of the repository);
3. the reporter is made (loaded by path, kept out of ``sys.modules``) and the seal installed
   (``seal.py``: an audit hook that cannot be removed, and the machinery's fixed state);
4. only then does the repository join ``sys.path``, last, and pytest runs.
"""

import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    lockdown = _load(os.path.join(here, "lockdown.py"))
    try:
        lockdown["lock"]()
    except lockdown["Unlockable"] as why:
        return f"trajforge grader: the tests' process cannot be locked, no test runs ({why})"
    plugins = os.path.join(here, "plugins")
    spec = _spec(int(os.environ.pop("TRAJFORGE_LAUNCH_FD")))
    args = list(spec["args"])
    sys.argv[1:] = []
    sys.path.insert(0, plugins)
    _preload()
    seal = _load(os.path.join(here, "seal.py"))
    integrity = seal["Integrity"]()
    reporter, tamper = _load(os.path.join(plugins, "trajforge_reporter.py"))["make"](
        int(spec["records_fd"]), spec["key"], integrity, frozenset(spec["graded"])
    )
    graded_files = {os.path.join(spec["repo"], t.split("::")[0]) for t in spec["graded"]}
    seal["install"](tamper, frozenset(graded_files))
    if spec["repo"] not in sys.path:
        sys.path.append(spec["repo"])
    import pytest

    return int(pytest.main(args, plugins=[reporter]))


def _spec(fd):
    import json

    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return json.loads(data.decode("utf-8"))


# Standard library modules pytest and its plugins import on first use; loaded here, an import
# that only tries a name (copy's ``org.python.core``) is over before the repository is reachable.
LAZY = (
    "ast", "bdb", "cmd", "code", "codeop", "copy", "difflib", "doctest", "fnmatch",
    "importlib.util", "inspect", "json", "pdb", "pprint", "shlex", "tempfile", "textwrap",
    "tokenize", "traceback", "unittest", "unittest.mock", "warnings", "xml.etree.ElementTree",
)  # fmt: skip


def _preload():
    import importlib
    import pkgutil

    import _pytest
    import pytest  # noqa: F401

    for name in LAZY:
        _try_import(importlib, name)
    for module in pkgutil.walk_packages(_pytest.__path__, "_pytest."):
        _try_import(importlib, module.name)


def _try_import(importlib, name):
    import contextlib

    with contextlib.suppress(Exception):  # an optional module the image lacks: pytest says so
        importlib.import_module(name)


def _load(path):
    """The names a file of the grader's defines, executed in a namespace of its own, with its own
    copy of the builtins as they are now (before any code of the repository has run): a test
    that rebinds ``builtins.getattr`` or ``builtins.set`` later never reaches the seal's checks
    or the reporter."""
    import builtins

    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), path, "exec", dont_inherit=True)
    namespace = {
        "__name__": "trajforge_" + os.path.basename(path)[:-3],
        "__file__": path,
        "__builtins__": dict(vars(builtins)),
    }
    exec(code, namespace)
    return namespace


if __name__ == "__main__":
    sys.exit(main())
