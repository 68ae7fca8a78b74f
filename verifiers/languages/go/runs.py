"""A Go task's graded run: its packages' test binaries built by root and run as the tests'
user under the grader's program (``in_container/go_grade.py``, shipped beside the supervisor),
and what the run reports, checked against what the code under test cannot reach.

A test binary's output is the code under test's to write: an ``init`` or a goroutine can print
``--- PASS`` lines, swap ``os.Stdout`` and rewrite what ``testing`` prints, or end the process
early. So the stream is read (``test_events.parse_test_events``) and then held against what
root saw and what only the grader knows (``stream_problems``): the exit status root waited for
(0 over a failed test; 0 before ``testing`` printed its last line; 1 right after it printed
``PASS``), the go command's package line inside the binary's own output, a second result for a
test, a test the package does not declare, and the sentinels and twins (judged by
``grader/rules.verdict``).
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import tarfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from trajforge.schemas.errors import UserError
from trajforge.verifiers.grader.channel import Evidence
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import (
    GRACE_S,
    ROOT,
    TEST_UID,
    SupervisedRun,
    add_grader,
    program,
)
from trajforge.verifiers.languages.base import TaskTree
from trajforge.verifiers.languages.go import policy, sentinels, test_events
from trajforge.verifiers.languages.go.time_limits import WATCH
from trajforge.verifiers.sandbox.base import SandboxBroken, Session

HERE = "trajforge.verifiers.languages.go.in_container"
PROGRAM = "go_grade.py"
SPEC = f"{ROOT}/out/go_spec.json"  # root's folder: the tests' user cannot read the sentinels
RESULT = f"{ROOT}/out/result.json"
# Where a pre-module (GOPATH-era) tree's image keeps the go.mod and go.sum its build made: the
# recipe writes them, validate's command and the grader lay them into the tree for a run or a
# build and take them away after (never part of a diff, never the patch's to write).
PRE_MODULE_FILES = "/go/premodule"
BUILD_ALLOWANCE_S = 600.0  # the test binaries' builds, before the tests' own time starts
SUPERVISOR_PYTHON = 'P=/venv/bin/python; [ -x "$P" ] || P=/usr/bin/python3; "$P"'
# The go command's own last line for a package: never the test binary's to print.
_PACKAGE_LINE = re.compile(r"^(ok  |FAIL)\t", re.MULTILINE)
_RESULTS = frozenset({"pass", "fail", "skip"})


@dataclass(frozen=True)
class Package:
    """One graded package as the container's spec names it."""

    dir: str  # repository-relative ("." for the root)
    module: str  # the folder of the module that holds it
    import_path: str
    run: str  # the anchored -test.run pattern ("" : every test of the package)
    planted: Mapping[str, bytes]  # the sentinels' file and twinned test files, for its build


def module_files(tree: TaskTree) -> dict[str, str]:
    """The tree's go.mod files: module folder -> text (none in a pre-module tree)."""
    return {
        posixpath.dirname(p) or ".": (tree.blob(p) or b"").decode("utf-8", "replace")
        for p in tree.paths() if p.rsplit("/", 1)[-1] == "go.mod" and "vendor" not in p.split("/")
    }  # fmt: skip


def made_module(session: Session) -> dict[str, bytes]:
    """A pre-module image's go.mod and go.sum (``PRE_MODULE_FILES``), as files to lay into the
    tree's root for each build; empty when the image has none (a module tree's image). Read
    before any of the patch's code runs, from the image the task names: never the patch's."""
    made: dict[str, bytes] = {}
    for name in ("go.mod", "go.sum"):
        read = session.read_file_checked(f"{PRE_MODULE_FILES}/{name}")
        if read.data is not None:
            made[name] = read.data
    return made if "go.mod" in made else {}


def packages_of(
    tree: TaskTree, graded: tuple[str, ...], selected: bool, planted: tuple[Sentinel, ...],
    builds: Mapping[str, Mapping[str, bytes]], made: Mapping[str, bytes] | None = None,
) -> tuple[list[Package], dict[str, str]]:  # fmt: skip
    """The graded packages (with their sentinels' names in the pattern) and the modules map
    (module path -> folder). ``selected`` False: every test of each package runs. ``made``: a
    pre-module tree's go.mod and go.sum from its image (``made_module``), planted at the root
    for every package's build."""
    mods = module_files(tree)
    if not mods and made:
        mods = {".": made["go.mod"].decode("utf-8", "replace")}
    modules = test_events.read_modules(mods)
    folders = {v: k for k, v in modules.items()}
    names: dict[str, set[str]] = {}
    for test_id in (*graded, *(s.test_id for s in planted)):
        folder = test_events.package_dir(test_id)
        top = test_id[len(folder) + len(test_events.SEPARATOR) :].split("/")[0]
        names.setdefault(folder, set()).add(top)
    out = []
    for folder in sorted(names):
        module = _module_of(folder, folders)
        if module is None:
            raise UserError(f"grader: {folder} is in no Go module of the task's tree")
        rel = posixpath.relpath(folder, module)
        path = folders[module] + ("" if rel == "." else "/" + rel)
        run = "^(" + "|".join(re.escape(n) for n in sorted(names[folder])) + ")$"
        files = {**(made or {}), **builds.get(folder, {})}
        out.append(Package(folder, module, path, run if selected else "", files))
    return out, modules


def _module_of(folder: str, folders: Mapping[str, str]) -> str | None:
    """The innermost module folder holding ``folder``."""
    best = None
    for module in folders:
        inside = module == "." or folder == module or folder.startswith(module + "/")
        if inside and (best is None or len(module) > len(best)):
            best = module
    return best


def run_go(
    session: Session, packages: list[Package], guard: list[str], timeout_s: float,
    per_test_s: int,
) -> dict:  # fmt: skip
    """The grader's Go program run once over ``packages``, each test limited to ``per_test_s``
    (``time_limits.py``); its result as it wrote it."""
    spec = {
        "packages": [
            {"dir": p.dir, "module": p.module, "import_path": p.import_path, "run": p.run,
             "planted": sentinels.encoded(p.planted)}
            for p in packages
        ],
        "guard": guard,
        "per_test_s": per_test_s,
    }  # fmt: skip
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        add_grader(tar, {PROGRAM: program(HERE, PROGRAM), WATCH: program(HERE, WATCH)})
        data = json.dumps(spec).encode()
        info = tarfile.TarInfo(SPEC.lstrip("/"))
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))
    session.put_archive(buffer.getvalue(), "/")
    command = f"{SUPERVISOR_PYTHON} -I {ROOT}/{PROGRAM} {TEST_UID} {timeout_s:g} {SPEC}"
    result = session.exec(command, timeout_s=timeout_s + BUILD_ALLOWANCE_S + GRACE_S)
    if result.timed_out:
        return {"exit_code": -9, "timed_out": True, "leftovers": False, "packages": [],
                "log": result.output, "duration_s": result.duration_s}  # fmt: skip
    read = session.read_file_checked(RESULT)
    if read.data is None:
        tail = (result.output.strip().splitlines() or [""])[-1][:200]
        raise SandboxBroken(f"grader: the Go run left no result ({read.problem}): {tail}")
    try:
        said = json.loads(read.data)
    except ValueError as exc:
        raise SandboxBroken(f"grader: the Go run's result is unreadable ({exc})") from None
    return {**said, "log": result.output, "duration_s": result.duration_s}


def supervised_run(
    said: dict, modules: Mapping[str, str], declared: Mapping[str, set[str]],
    planted: tuple[Sentinel, ...],
) -> SupervisedRun:  # fmt: skip
    """The run as the verdict rule reads it: statuses from the events, and every problem of
    the stream (``stream_problems``) as tampering. ``declared``: package folder -> the test
    functions its test files (the task's own) declare. A test the per-test limit stopped is
    FAILED whatever its stream said, and the run's ``stopped``: never resolved, the
    package's later tests (its sentinels among them) cut off, not missing."""
    statuses: dict[str, str] = {}
    stopped: list[str] = []
    errors: list[str] = []
    tampering: list[str] = []
    own: dict[str, set[str]] = {}
    for s in planted:
        own.setdefault(test_events.package_dir(s.test_id), set()).add(_top(s.test_id))
    try:
        for package in said.get("packages", []):
            folder = str(package["dir"])
            if not package.get("built"):
                errors.append(folder)
                continue
            known = declared.get(folder, set()) | own.get(folder, set())
            found, problems = read_package(package, modules, known)
            statuses.update(found.statuses)
            if package.get("stopped"):
                stopped.append(test_events.test_id(folder, str(package["stopped"])))
                statuses[stopped[-1]] = "FAILED"
            errors += found.collection_errors
            tampering += problems
        code, timed_out = int(said["exit_code"]), bool(said["timed_out"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SandboxBroken(f"grader: the Go run's result is unreadable ({exc!r})") from None
    evidence = Evidence(statuses, tuple(errors), not timed_out, tuple(tampering[:20]))
    return SupervisedRun(code, timed_out, bool(said.get("leftovers")), evidence,
                         str(said.get("log", "")), float(said.get("duration_s", 0.0)),
                         stopped[0] if stopped else "")  # fmt: skip


@dataclass(frozen=True)
class _Found:
    statuses: dict[str, str]
    collection_errors: tuple[str, ...]


def read_package(
    package: Mapping, modules: Mapping[str, str], known: set[str]
) -> tuple[_Found, list[str]]:  # fmt: skip
    """One package's statuses and the problems of its stream (``stream_problems``)."""
    events = str(package.get("events", ""))
    folder = str(package["dir"])
    try:
        parsed = test_events.parse_test_events(events, modules)
    except UserError as exc:
        return _Found({}, ()), [f"{folder}: the events are unreadable ({exc})"]
    problems = list(stream_problems(package, parsed.statuses, known))
    if parsed.problem:
        problems.append(f"{folder}: {parsed.problem}")
    return _Found(dict(parsed.statuses), tuple(parsed.collection_errors)), problems


def stream_problems(package: Mapping, statuses: Mapping[str, str], known: set[str]):
    """Why one package's stream cannot be what its test binary's ``testing`` wrote."""
    folder, code = str(package["dir"]), int(package["exit_code"])
    output = str(package.get("output", ""))
    last = (output.rstrip("\n").rsplit("\n", 1) or [""])[-1].rstrip("\r")
    ended = bool(package.get("ended"))
    failed = any(s == "FAILED" for s in statuses.values())
    if package.get("overflow"):
        yield f"{folder}: the test binary's output outgrew what the grader keeps"
    if _PACKAGE_LINE.search(output):
        yield f"{folder}: the test binary printed the go command's package line itself"
    if code == 0 and failed:
        yield f"{folder}: the test binary exited 0 over a failed test"
    if code == 0 and not ended and statuses:
        yield f"{folder}: the test binary exited 0 before testing printed its last line"
    if code != 0 and last == "PASS":
        yield f"{folder}: the test binary exited {code} right after testing printed PASS"
    counts: Counter[str] = Counter()
    for line in str(package.get("events", "")).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("Action") in _RESULTS and event.get("Test"):
            counts[str(event["Test"])] += 1
    for test, seen in sorted(counts.items()):
        if seen > 1:
            yield f"{folder}: {seen} results for {test}"
    tops = {_top(t) for t in statuses}
    for name in sorted(tops - known):
        yield f"{folder}: a result for {name}, which no test file of the package declares"


def _top(test_id: str) -> str:
    folder = test_events.package_dir(test_id)
    return test_id[len(folder) + len(test_events.SEPARATOR) :].split("/")[0]


def guard_paths(paths: list[str]) -> list[str]:
    """What the tests' user may not write, nor add beside: every test file, testdata file and
    module file of the tree (their folders stay read-only too)."""
    return sorted(p for p in paths if policy.is_grading_path(p))
