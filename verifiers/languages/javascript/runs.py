"""A JavaScript task's graded run: its runner under the supervisor with the grader's reporter.

node's jest, vitest, mocha, ava, tap or ``node --test`` (never the row's ``test_cmd`` text) runs
as the tests' user with the grader's keyed reporter and guard preloaded (``in_container/``), the
tree's tests, configuration and ``node_modules`` read-only to it.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import tarfile
from dataclasses import replace

from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.grader.supervised import (
    PROBE_TIMEOUT_S,
    ROOT,
    TEST_UID,
    SupervisedRun,
    UnsupportedTestCommand,
    program,
    put_files,
    supervise,
)
from trajforge.verifiers.languages.javascript import tap_runs
from trajforge.verifiers.languages.javascript.bins import package_bin
from trajforge.verifiers.languages.javascript.mocha_args import mocha_args
from trajforge.verifiers.languages.javascript.node_args import children_options, node_args
from trajforge.verifiers.languages.javascript.vitest_args import (
    LINKS,
    config_links,
    member_esm_config,
    vitest_args,
)
from trajforge.verifiers.sandbox.base import REPO_DIR, Session

HERE = "trajforge.verifiers.languages.javascript.in_container"

# A JS run's own programs, shipped beside the supervisor by ``run_supervised_js`` (a second
# copy: podman's copy from a pipe refuses some larger archives).
JS_FILES = {
    "plugins/trajforge_jest_reporter.js": "trajforge_jest_reporter.js",
    "plugins/trajforge_mocha_reporter.js": "trajforge_mocha_reporter.js",
    "plugins/trajforge_vitest_reporter.js": "trajforge_vitest_reporter.js",
    "plugins/trajforge_vitest_entry.mjs": "trajforge_vitest_entry.mjs",
    "plugins/trajforge_ava_reporter.js": "trajforge_ava_reporter.js",
    "plugins/trajforge_tap_reporter.js": "trajforge_tap_reporter.js",
    "plugins/trajforge_node_reporter.js": "trajforge_node_reporter.js",
    "plugins/trajforge_guard.js": "trajforge_guard.js",
}
# The guard's folder is CommonJS whatever a package.json in /tmp (the tests' user may write one
# there) says: node and jest read a file's module type from the nearest package.json.
PLUGINS_PACKAGE = (f"{ROOT}/plugins/package.json", b'{"type": "commonjs"}\n')
# The run's sentinels for the guard (js_sentinels.py): root's, readable by the tests' user.
SENTINELS = f"{ROOT}/plugins/trajforge_sentinels.json"
KEYED_PRELUDE = "trajforge_keyed.js"  # shipped in front of every JS reporter
# A JS task's image has Debian's python3 (the node base images), a Python task's its /venv.
SUPERVISOR_PYTHON = 'P=/venv/bin/python; [ -x "$P" ] || P=/usr/bin/python3; "$P"'
GUARD = f"{ROOT}/guard.txt"  # the repository paths the tests' user may not write (JS runs)
JEST_REPORTER = f"{ROOT}/plugins/trajforge_jest_reporter.js"
MOCHA_REPORTER = f"{ROOT}/plugins/trajforge_mocha_reporter.js"
# The JS runners the grader supervises, each with the reporter it ships for it.
VITEST_REPORTER = f"{ROOT}/plugins/trajforge_vitest_reporter.js"
VITEST_ENTRY = f"{ROOT}/plugins/trajforge_vitest_entry.mjs"  # hands vitest the preloaded one
AVA_DRIVER = f"{ROOT}/plugins/trajforge_ava_reporter.js"  # runs one ava per file, keyed TAP
TAP_REPORTER = f"{ROOT}/plugins/trajforge_tap_reporter.js"  # node-tap's own TAP, keyed
NODE_REPORTER = f"{ROOT}/plugins/trajforge_node_reporter.js"  # node --test's, keyed
NODE_OPTIONS = f"{ROOT}/plugins/trajforge_node_options.json"  # the children's loaders (node_args)
JS_RUNNERS = ("jest", "mocha", "vitest", "ava", "tap", "node")
# mocha from the image's node_modules: ``_mocha`` runs in its own process (an old ``mocha``
# starts ``_mocha`` as a child, without the preloaded reporter's key); ``mocha`` where it is all.
MOCHA_BINS = ("_mocha", "mocha")
# mocha exits with its count of failures: a run with failures, as the other runners say it.
MOCHA_FAILURES = range(2, 128)
# A jest whose scheduler never runs tests in its own process when given a worker memory limit
# (jest 29's ``shouldRunInBand``): read from the installed jest, which the patch cannot touch.
JEST_SCHEDULER = "@jest/core/build/testSchedulerHelper.js"  # in the node_modules holding jest
JEST_WORKERS_SIGN = "!workerIdleMemoryLimit"
WORKER_MEMORY_LIMIT = "--workerIdleMemoryLimit=8GB"  # above any sandbox's memory: never hit


def jest_args(
    files: tuple[str, ...],
    workers_always: bool = False,
    program: str = "node_modules/jest/bin/jest.js",
) -> list[str]:
    """node's arguments for a graded jest run: the reporter preloaded (it takes the records' key
    before any project code runs) and named as jest's reporter; no transform or haste cache (a
    test process could write one for another file); two workers and, where the installed jest
    honours it (``workers_always``), a worker memory limit, so that tests run in worker
    processes, never in the reporter's (without it jest runs a single file in its own process);
    the project's own configuration, which the patch cannot change; ``files`` (none: the whole
    suite)."""
    by_path = ["--runTestsByPath", *files] if files else []
    limit = [WORKER_MEMORY_LIMIT] if workers_always else []
    return [
        "-r", JEST_REPORTER, program, "--ci", "--watchman=false",
        "--no-cache", "--cacheDirectory=/tmp/.trajforge-jest", "--maxWorkers=2",
        "--reporters=default",
        f"--reporters={JEST_REPORTER}", *limit, *by_path,
    ]  # fmt: skip


def check_js_runner(runner: str, package_dir: str = "") -> None:
    """UnsupportedTestCommand when the grader has no supervised run for ``runner`` (in the
    workspace package ``package_dir``)."""
    if runner not in JS_RUNNERS:
        raise UnsupportedTestCommand(
            f"grader: the javascript runner {runner or '(none)'!r} is not graded yet; the grader "
            f"ships a reporter for {', '.join(JS_RUNNERS)} only"
        )
    if package_dir and runner == "vitest":
        raise UnsupportedTestCommand(
            f"grader: vitest in the workspace package {package_dir} is not graded yet (its "
            "configuration links are made for the repository's root)"
        )


def run_supervised_js(
    session: Session,
    runner: str,
    files: tuple[str, ...],
    guard: list[str],
    timeout_s: float,
    package_json: bytes | None = None,
    package_dir: str = "",
    sentinels: bytes = b"{}",
) -> SupervisedRun:
    """A JS task's graded files run by ``runner`` under the supervisor, as the tests' user, with
    ``guard`` (repository paths) and every ``node_modules`` read-only to it. ``package_json``:
    the tested package's own, whose test script gives mocha's options (``mocha_args``); jest and
    vitest read their own configuration. ``package_dir``: a monorepo's tested package, where the
    runner works as validate's did (``schemas/js_commands.py``), the files given relative to it.
    ``sentinels``: the guard's spec (``js_sentinels.draw``; jest, mocha and node plant them)."""
    check_js_runner(runner, package_dir)
    listed = "".join(f"{p}\n" for p in guard if "\n" not in p).encode()
    programs = {f"{ROOT}/{t}": _js_program(n) for t, n in JS_FILES.items()}
    put_files(
        session, {GUARD: listed, **programs, PLUGINS_PACKAGE[0]: PLUGINS_PACKAGE[1],
                  SENTINELS: sentinels},
    )  # fmt: skip
    if package_dir:
        files = tuple(posixpath.relpath(f, package_dir) for f in files)
    if runner == "mocha":
        return _run_mocha(session, files, package_json, timeout_s, package_dir)
    if runner == "vitest":
        return _run_vitest(session, files, guard, package_json, timeout_s)
    if runner in ("ava", "tap"):
        return _run_tap(session, runner, files, timeout_s, package_dir)
    if runner == "node":
        return _run_node(session, files, package_json, timeout_s, package_dir)
    program = _runner_file(session, "jest", ("jest",), package_dir)
    modules = program[: program.rindex("node_modules/") + len("node_modules/")]
    scheduler = posixpath.normpath(posixpath.join(package_dir or ".", modules, JEST_SCHEDULER))
    probe = session.exec(
        f"grep -qsF {shlex.quote(JEST_WORKERS_SIGN)} {shlex.quote(scheduler)} && echo workers",
        PROBE_TIMEOUT_S,
    )
    workers_always = probe.output.strip() == "workers"
    args = jest_args(files, workers_always, program)
    return supervise(session, _exec(args, timeout_s, package_dir), timeout_s)


def _run_vitest(
    session: Session,
    files: tuple[str, ...],
    guard: list[str],
    package_json: bytes | None,
    timeout_s: float,
) -> SupervisedRun:
    """vitest with the grader's reporter; an ES-module configuration named through a link in a
    folder the tests' user may write (``vitest_args``' module doc)."""
    member = member_esm_config(guard, package_json)
    if member:
        raise UnsupportedTestCommand(
            f"grader: the workspace member's configuration {member} is an ES module, which vite "
            "writes bundled beside itself, where graded tests may not write; not graded"
        )
    links = config_links(guard, package_json)
    if links:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            folder = tarfile.TarInfo(LINKS.lstrip("/"))
            folder.type, folder.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(folder)
            for name in links:
                link = tarfile.TarInfo(f"{LINKS}/{name}".lstrip("/"))
                link.type, link.linkname = tarfile.SYMTYPE, f"{REPO_DIR}/{name}"
                tar.addfile(link)
        session.put_archive(buffer.getvalue(), "/")
    config = f"{LINKS}/{links[0]}" if links else ""
    per_test_s = _per_test_s(timeout_s)
    program = _runner_file(session, "vitest", ("vitest",))
    args = vitest_args(VITEST_REPORTER, VITEST_ENTRY, program, files, per_test_s, config)
    return supervise(session, _exec(args, timeout_s), timeout_s)


def _run_mocha(
    session: Session,
    files: tuple[str, ...],
    package_json: bytes | None,
    timeout_s: float,
    package_dir: str = "",
) -> SupervisedRun:
    """mocha with the grader's reporter; the tests run in the reporter's own process."""
    program = _runner_file(session, "mocha", MOCHA_BINS, package_dir)
    args = mocha_args(MOCHA_REPORTER, program, files, package_json, _per_test_s(timeout_s))
    run = supervise(session, _exec(args, timeout_s, package_dir), timeout_s)
    if run.exit_code in MOCHA_FAILURES:
        return replace(run, exit_code=1)
    return run


def _run_tap(
    session: Session, runner: str, files: tuple[str, ...], timeout_s: float, package_dir: str = ""
) -> SupervisedRun:
    """ava (one per file, under the grader's driver) or node-tap (the reporter preloaded); the
    statuses read from the TAP they wrote, by validate's parser (``tap_runs``)."""
    program = _runner_file(session, runner, (runner,), package_dir)
    major, test_s = _installed_major(session, program, runner, package_dir), _per_test_s(timeout_s)
    if runner == "ava" and not files:  # the grader names them (patch_verifier): a task without
        raise UnsupportedTestCommand("grader: ava is run once per file; no test file was named")
    if runner == "tap" and major >= tap_runs.TAP_BEFORE:
        raise UnsupportedTestCommand(
            f"grader: node-tap {major} (@tapjs) is not graded yet; the grader runs node-tap "
            f"before {tap_runs.TAP_BEFORE}"
        )
    if runner == "ava":
        args = tap_runs.ava_args(AVA_DRIVER, program, major, files, test_s)
    else:
        args = tap_runs.tap_args(TAP_REPORTER, program, files, test_s)
    run = supervise(session, _exec(args, timeout_s, package_dir), timeout_s)
    return replace(run, evidence=tap_runs.tap_evidence(run.evidence, runner, package_dir))


def _installed_major(session: Session, program: str, package: str, package_dir: str) -> int:
    """The major version of the installed ``package`` that ``program`` is a file of; 0 when
    unknown (a ``.bin`` link)."""
    marker = f"node_modules/{package}/"
    if marker not in program:
        return 0
    folder = program[: program.index(marker) + len(marker)]
    path = posixpath.normpath(posixpath.join(REPO_DIR, package_dir, folder, "package.json"))
    return tap_runs.installed_major(session.read_file(path))


def _run_node(
    session: Session,
    files: tuple[str, ...],
    package_json: bytes | None,
    timeout_s: float,
    package_dir: str = "",
) -> SupervisedRun:
    """node's own runner with the grader's reporter: each file runs in a process of its own,
    given the project's loader options (``node_args``), which the reporter's process never is."""
    put_files(session, {NODE_OPTIONS: json.dumps(children_options(package_json)).encode()})
    said = session.exec("node --version", PROBE_TIMEOUT_S).output.strip().lstrip("v")
    major = int(said.split(".")[0]) if said.split(".")[0].isdigit() else 0
    args = node_args(NODE_REPORTER, files, package_json, _per_test_s(timeout_s), major)
    return supervise(session, _exec(args, timeout_s, package_dir), timeout_s)


def _runner_file(
    session: Session, package: str, names: tuple[str, ...], package_dir: str = ""
) -> str:
    """The runner's file from its installed package.json (``js_bins``), else ``.bin``'s link,
    relative to where it runs: a workspace package's own ``node_modules`` first, then the
    root's (hoisted there), as validate's command looks."""
    up = "../" * len(package_dir.split("/")) if package_dir else ""
    for folder, prefix in ((package_dir, ""), ("", up)) if package_dir else (("", ""),):
        where = f"{REPO_DIR}/{folder}/" if folder else f"{REPO_DIR}/"
        declared = session.read_file(f"{where}node_modules/{package}/package.json")
        found = package_bin(declared, package, names)
        if found:
            return prefix + found
    return f"{up}node_modules/.bin/{names[-1]}"


def _per_test_s(timeout_s: float) -> int:
    """validate's per-test limit (the labels were made under it), within the run's own."""
    return min(ValidateParams.per_test_timeout_s, max(1, int(timeout_s)))


def _exec(args: list[str], timeout_s: float, package_dir: str = "") -> str:
    """The supervisor's command that runs node with ``args`` as the tests' user, in a
    monorepo's tested package when ``package_dir`` names one."""
    workdir = f"export TRAJFORGE_WORKDIR={shlex.quote(package_dir)}; " if package_dir else ""
    return (
        f"{workdir}{SUPERVISOR_PYTHON} -I {ROOT}/supervisor.py exec {TEST_UID} {timeout_s:g} "
        f"{GUARD} -- node {' '.join(shlex.quote(a) for a in args)}"
    )


def _js_program(name: str) -> bytes:
    """A reporter behind the keyed prelude (its one copy of the key and ``send``), else as is."""
    if name.endswith("_reporter.js"):
        return program(HERE, KEYED_PRELUDE) + b"\n" + program(HERE, name)
    return program(HERE, name)
