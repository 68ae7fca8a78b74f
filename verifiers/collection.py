"""What pytest can collect in an environment, and why the rest cannot be.

An environment is only useful if its suite collects. ``collect`` runs pytest's
``--collect-only`` (``-qqqq``: one line per test file with its count) in a session with no
network, and ``parse_collection`` reads, for every file that failed, the module it could not
import or the pytest warning that the project's ``filterwarnings = error`` turned into an error:
the evidence the environment stage repairs from (generators/languages/python/prepare.py).

It also checks that the code under test is the repository's: trajforge's ``origin_plugin.py``
runs in the same pytest process and names each of /repo's (or /repo/src's) own top-level
packages that was imported from elsewhere (PyPI's pluggy standing in for the project pluggy,
whose install pytest's replaced): ``Collection.foreign``.
"""

from __future__ import annotations

import dataclasses
import io
import re
import shlex
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from trajforge.verifiers.sandbox.base import REPO_DIR, Session

ORIGIN_DIR = "/tmp/trajforge-origin"  # origin_plugin.py, as a module on PYTHONPATH
ORIGIN_PLUGIN = "trajforge_origin"
ORIGINS = "/tmp/trajforge-origins.txt"  # what it writes: "name<TAB>file" per foreign package
# -qqqq: one "path: count" line per file even where the project's addopts say -vv (bidict)
COLLECT_CMD = (
    f"env PYTHONPATH={ORIGIN_DIR}${{PYTHONPATH:+:$PYTHONPATH}} "
    f"python -m pytest --collect-only -qqqq -p no:cacheprovider -p {ORIGIN_PLUGIN} "
    f"--rootdir={REPO_DIR} "
    "--continue-on-collection-errors --color=no"  # after addopts: wins over their --color=yes
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_COUNT = re.compile(r"^(\S+\.\w+): (\d+)$", re.MULTILINE)  # .py, and doctest files (.rst)
_HEADER = re.compile(r"^_{3,} ERROR collecting (.+?) _{3,}$", re.MULTILINE)
_CONFTEST = re.compile(r"ImportError while loading conftest '([^']+)'")
_MISSING = re.compile(r"No module named '([\w.]+)'")
_RAISED = re.compile(r"^[\w.]*(?:Error|Exception|Warning|Exit|Interrupt)\b:?")
_UNKNOWN_OPTIONS = re.compile(r"error: unrecognized arguments: (.+)")
_RUNNER_WARNING = re.compile(r"\bpytest\.(Pytest\w*Warning)\b")


@dataclass(frozen=True)
class CollectError:
    """One test file (or conftest) pytest could not collect, and what it said."""

    path: str  # relative to the repository root
    error: str  # the last ``E`` line: the exception pytest reported
    missing: str = ""  # the module it could not import, when that was the error
    runner_warning: str = ""  # a pytest warning class the project's filters made an error


@dataclass(frozen=True)
class Collection:
    collected: int  # test items in the files that collected
    errors: tuple[CollectError, ...] = ()
    conftest_error: CollectError | None = None  # nothing collects while a conftest fails
    output: str = ""
    timed_out: bool = False
    files: dict[str, int] = field(default_factory=dict)
    # options pytest refused (a plugin named in the project's addopts is not installed): nothing
    # collects until they are known
    unknown_options: tuple[str, ...] = ()
    # the repository's own packages the tests imported from outside /repo:
    # "pluggy from /venv/lib/python3.11/site-packages/pluggy/__init__.py"
    foreign: tuple[str, ...] = ()


def collect(
    session: Session, flags: str = "", timeout_s: float = 300, tree: bytes = b""
) -> Collection:
    """Collect the suite in ``session``: the repository already in /repo, or ``tree`` (a tar of
    it under ``repo/``, as ``git_tree.archive`` makes) put there with the plugin in one copy."""
    session.put_archive(with_origin_plugin(tree), dest="/")
    command = f"rm -f {ORIGINS}; {COLLECT_CMD} {flags}".strip()
    result = session.exec(f"timeout -k 5 {int(timeout_s)} {command}", timeout_s=timeout_s + 30)
    parsed = parse_collection(result.output)
    timed_out = result.timed_out or result.exit_code in (124, 137)
    origins = session.read_file(ORIGINS) or b""
    return dataclasses.replace(parsed, timed_out=timed_out, foreign=parse_origins(origins))


def parse_origins(data: bytes) -> tuple[str, ...]:
    """``origin_plugin.py``'s lines as "name from file" (at most 20, each cut to 300)."""
    lines = data.decode("utf-8", "replace").splitlines()[:20]
    found = (line.partition("\t") for line in lines if "\t" in line)
    return tuple(f"{name} from {where}"[:300] for name, _, where in found)


def with_origin_plugin(tree: bytes = b"") -> bytes:
    """``tree`` (a tar, or nothing) with ``origin_plugin.py`` added as a module in ORIGIN_DIR:
    appended in place of a second copy into the container (one archive call, not two)."""
    text = Path(__file__).with_name("origin_plugin.py").read_bytes()
    buffer = io.BytesIO(tree)
    with tarfile.open(fileobj=buffer, mode="a" if tree else "w") as tar:
        info = tarfile.TarInfo(f"{ORIGIN_DIR.lstrip('/')}/{ORIGIN_PLUGIN}.py")
        info.size, info.mode = len(text), 0o644
        tar.addfile(info, io.BytesIO(text))
    return buffer.getvalue()


def parse_collection(output: str) -> Collection:
    """Counts per file and one CollectError per file that failed, from ``-qqqq`` output."""
    output = _ANSI.sub("", output)
    files = {path: int(count) for path, count in _COUNT.findall(output)}
    errors: list[CollectError] = []
    headers = list(_HEADER.finditer(output))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(output)
        block = output[header.end() : end].split("short test summary info")[0]
        path = header.group(1).split("::")[0].strip()
        errors.append(_error(path, block))
    conftest = None
    match = _CONFTEST.search(output)
    if match:
        path = match.group(1).removeprefix(REPO_DIR + "/")
        conftest = _error(path, output[match.end() :].split("short test summary info")[0])
    merged: dict[str, CollectError] = {}
    for error in errors:  # a file can fail more than once (a class and the module)
        merged.setdefault(error.path, error)
    unknown = _UNKNOWN_OPTIONS.search(output)
    options = tuple(o for o in unknown.group(1).split() if o.startswith("-")) if unknown else ()
    return Collection(
        sum(files.values()), tuple(merged.values()), conftest, output, False, files, options
    )


def _error(path: str, block: str) -> CollectError:
    lines = [line[1:].strip() for line in block.splitlines() if line.startswith("E ")]
    # the exception's own line ("pytest.PytestRemovedIn10Warning: ..."), not a trailing "See ..."
    raised = [line for line in lines if _RAISED.match(line)]
    error = (raised or lines)[-1] if lines else _first_line(block)
    missing = _MISSING.findall(block)
    warning = _RUNNER_WARNING.findall("\n".join(lines))  # the class is on an earlier E line
    return CollectError(
        path, error[:300], missing[-1] if missing else "", warning[-1] if warning else ""
    )


def _first_line(block: str) -> str:
    for line in block.splitlines():
        if line.strip():
            return line.strip()
    return "collection failed"


def ignore_flags(paths: list[str]) -> str:
    """``--ignore`` options that leave test files out of every run."""
    return " ".join(f"--ignore={shlex.quote(path)}" for path in paths)


def warning_flag(warning: str) -> str:
    """Keep a pytest warning a warning again, whatever the project's filters say (a ``-W`` given
    on the command line outranks ``filterwarnings`` in the ini file)."""
    return f"-W ignore::pytest.{warning}"
