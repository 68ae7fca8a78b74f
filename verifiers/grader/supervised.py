"""One graded run: the grader's programs into the session, the tests run under the supervisor.

The session must be a grading session (``SessionSpec(grading=True)``: root may change user, and
nothing else). The supervisor starts pytest as ``TEST_UID`` with plugin autoload off and the
image's own plugins named with ``-p`` (a JS task: node's jest or mocha with the grader's
reporter, ``run_supervised_js``), and the reporter's records come back in a file only root can
read; the run's log is the supervisor's output. What the image offers (its pytest plugins) is
probed once per image and process.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import tarfile
import threading
from dataclasses import dataclass, replace
from importlib import resources

from trajforge.schemas.errors import UserError
from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.grader import rules, tap_runs
from trajforge.verifiers.grader.channel import Evidence, read_records
from trajforge.verifiers.grader.js_bins import package_bin
from trajforge.verifiers.grader.mocha_args import mocha_args
from trajforge.verifiers.grader.node_args import children_options, node_args
from trajforge.verifiers.grader.vitest_args import (
    LINKS,
    config_links,
    member_esm_config,
    vitest_args,
)
from trajforge.verifiers.sandbox.base import REPO_DIR, SandboxBroken, Session

ROOT = "/tmp/.trajforge-grader"  # the tests' user cannot write it: root's folder in sticky /tmp
RESULT = f"{ROOT}/out/result.json"
# What a graded run runs (pytest's arguments, the graded ids, the files kept read-only, the tests
# a fail-fast run stops at): root's, in a folder the tests cannot open.
RUN_SPEC = f"{ROOT}/out/run.json"
PYTHON = "/venv/bin/python"
TEST_UID = 10001
PROBE_TIMEOUT_S = 120.0
GRACE_S = 30.0  # beyond the tests' time limit, for the supervisor to kill and write
# Runners pytest names itself by; anything else is not a test command the grader can supervise.
RUNNERS = (("python", "-m", "pytest"), ("python3", "-m", "pytest"), ("pytest",))
# Options whose output files the grader does not read (it reads the reporter's records).
DROPPED_OPTIONS = ("--junitxml", "--junit-xml", "--resultlog", "--result-log")
# Plugins a graded run never loads (they would take over coverage or fork the run); the options
# they add are accepted and ignored by trajforge_pytest.
BLOCKED_PLUGINS = ("xdist", "pytest_cov", "pytest_xdist")
MAXFAIL = 2**31 - 1
FILES = {
    "supervisor.py": "supervisor.py",
    "launch.py": "launch.py",
    "seal.py": "seal.py",
    "plugins/trajforge_reporter.py": "trajforge_reporter.py",
}
# A JS run's own programs, shipped beside them by ``run_supervised_js`` (a pytest run's
# archive stays as it was: podman's copy from a pipe refuses some larger archives).
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


class UnsupportedTestCommand(UserError):
    reason = "unsupported_test_cmd"


@dataclass(frozen=True)
class ImageFacts:
    plugins: tuple[tuple[str, str], ...]  # (entry point name, module) of the image's pytest11


@dataclass(frozen=True)
class SupervisedRun:
    exit_code: int
    timed_out: bool
    leftovers: bool  # a process of the tests was still running after pytest exited
    evidence: Evidence
    log: str
    duration_s: float
    stopped: str = ""  # the test whose failure stopped the run (fail-fast); "" when it ran out


_FACTS: dict[str, ImageFacts] = {}
_FACTS_LOCK = threading.Lock()


def ship(session: Session) -> None:
    """The supervisor, the launcher and the plugins, root's and read-only to everyone else."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        add_grader(tar)
    session.put_archive(buffer.getvalue(), "/")


def add_grader(tar: tarfile.TarFile) -> None:
    """What ``ship`` sends, added to ``tar`` (paths from /), so that a graded run can send the
    grader, the tree and the sentinels in one copy: each copy into a container is a round trip
    to the engine and an unpacking process there."""
    for folder, mode in (("", 0o755), ("/plugins", 0o755), ("/out", 0o700)):
        info = tarfile.TarInfo(f"{ROOT}{folder}".lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, mode
        tar.addfile(info)
    for target, name in FILES.items():
        data = _program(name)
        info = tarfile.TarInfo(f"{ROOT}/{target}".lstrip("/"))
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    data = _plugin_options()
    info = tarfile.TarInfo(f"{ROOT}/plugins/trajforge_pytest.py".lstrip("/"))
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def add_run_spec(
    tar: tarfile.TarFile,
    args: list[str],
    graded: tuple[str, ...],
    guard: tuple[str, ...] = (),
    stop_at: tuple[str, ...] = (),
) -> None:
    """What ``run_supervised`` runs (supervisor.py's SPEC), into the grader's copy: root's only.
    ``graded``: the ids the seal checks before and after they run; ``guard``: repository files
    the tests may not write; ``stop_at``: the tests whose first failure ends the run."""
    spec = {"args": args, "graded": list(graded), "guard": list(guard), "stop_at": list(stop_at)}
    data = json.dumps(spec).encode()
    info = tarfile.TarInfo(RUN_SPEC.lstrip("/"))
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))


def known_facts(image: str) -> ImageFacts | None:
    """The image's facts when this process probed it already (no container needed)."""
    with _FACTS_LOCK:
        return _FACTS.get(image)


def image_facts(session: Session, image: str) -> ImageFacts:
    """The image's pytest plugins (probed once per image and process;
    the grader must be shipped into ``session`` first)."""
    if (known := known_facts(image)) is not None:
        return known
    result = session.exec(
        f"{PYTHON} -I {ROOT}/supervisor.py probe {REPO_DIR}", PROBE_TIMEOUT_S, "/"
    )
    last = (result.output.strip().splitlines() or [""])[-1]
    try:
        said = json.loads(last)
        facts = ImageFacts(tuple((str(n), str(m)) for n, m in said["plugins"]))
    except (ValueError, KeyError, TypeError):
        raise SandboxBroken(
            f"grader: probing {image} failed (exit {result.exit_code}): {last[:200]}"
        ) from None
    with _FACTS_LOCK:
        _FACTS[image] = facts
    return facts


def pytest_args(test_cmd: str, facts: ImageFacts, selection: tuple[str, ...]) -> list[str]:
    """The task's pytest options, less its report files, with the image's plugins named."""
    options = [w for w in pytest_options(test_cmd) if not w.startswith(DROPPED_OPTIONS)]
    # Every graded test runs: a project's -x or --maxfail would stop at a failing sentinel.
    own = ["-p", "trajforge_pytest", f"--maxfail={MAXFAIL}"]  # the reporter: launch.py's
    return rules.pytest_args(options, own, BLOCKED_PLUGINS, facts.plugins, selection)


def pytest_options(test_cmd: str) -> list[str]:
    """The words after pytest in a Python task's ``test_cmd``; UnsupportedTestCommand when it
    does not run pytest (the only runner a Python task is graded by)."""
    try:
        words = shlex.split(test_cmd)
    except ValueError as exc:
        raise UnsupportedTestCommand(f"grader: cannot read test_cmd {test_cmd!r} ({exc})") from None
    runner = next((r for r in RUNNERS if tuple(words[: len(r)]) == r), None)
    if runner is None:
        raise UnsupportedTestCommand(
            f"grader: test_cmd {test_cmd[:120]!r} does not run pytest (python -m pytest ...); "
            "only pytest suites can be graded"
        )
    return words[len(runner) :]


def run_supervised(session: Session, timeout_s: float) -> SupervisedRun:
    """The graded tests, run by the supervisor as ``add_run_spec`` put them in the session
    (a fail-fast run says which test stopped it: ``SupervisedRun.stopped``); raises
    SandboxBroken when it left no result."""
    command = f"{PYTHON} -I {ROOT}/supervisor.py run {TEST_UID} {timeout_s:g} {RUN_SPEC}"
    return _supervised(session, command, timeout_s)


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
    _put_files(
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
    return _supervised(session, _exec(args, timeout_s, package_dir), timeout_s)


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
    return _supervised(session, _exec(args, timeout_s), timeout_s)


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
    run = _supervised(session, _exec(args, timeout_s, package_dir), timeout_s)
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
    run = _supervised(session, _exec(args, timeout_s, package_dir), timeout_s)
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
    _put_files(session, {NODE_OPTIONS: json.dumps(children_options(package_json)).encode()})
    said = session.exec("node --version", PROBE_TIMEOUT_S).output.strip().lstrip("v")
    major = int(said.split(".")[0]) if said.split(".")[0].isdigit() else 0
    args = node_args(NODE_REPORTER, files, package_json, _per_test_s(timeout_s), major)
    return _supervised(session, _exec(args, timeout_s, package_dir), timeout_s)


def _put_files(session: Session, files: dict[str, bytes]) -> None:
    """``files`` (absolute path -> bytes) into the session, readable by everyone, in one archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    session.put_archive(buffer.getvalue(), "/")


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


def _supervised(session: Session, command: str, timeout_s: float) -> SupervisedRun:
    """Run the supervisor's ``command`` and read what it kept."""
    result = session.exec(command, timeout_s=timeout_s + GRACE_S)
    if result.timed_out:
        empty = Evidence({}, (), False, ())
        return SupervisedRun(-9, True, False, empty, result.output, result.duration_s)
    read = session.read_file_checked(RESULT)
    if read.data is None:
        tail = (result.output.strip().splitlines() or [""])[-1][:200]
        raise SandboxBroken(f"grader: the supervisor left no result ({read.problem}): {tail}")
    try:
        said = json.loads(read.data)
        evidence = read_records(str(said["records"]))
        if said.get("records_overflow"):
            overflow = "the records outgrew the channel"
            evidence = Evidence(
                evidence.statuses, evidence.collection_errors, evidence.finished,
                (*evidence.tampering, overflow),
            )  # fmt: skip
        return SupervisedRun(
            int(said["exit_code"]), bool(said["timed_out"]), bool(said["leftovers"]), evidence,
            result.output, result.duration_s, str(said.get("stopped") or ""),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxBroken(f"grader: the supervisor's result is unreadable ({exc})") from None


def _program(name: str) -> bytes:
    return resources.files("trajforge.verifiers.grader.in_container").joinpath(name).read_bytes()


def _js_program(name: str) -> bytes:
    """A reporter behind the keyed prelude (its one copy of the key and ``send``), else as is."""
    if name.endswith("_reporter.js"):
        return _program(KEYED_PRELUDE) + b"\n" + _program(name)
    return _program(name)


def _plugin_options() -> bytes:
    """trajforge's own pytest plugin (accepts the blocked plugins' options), as a file."""
    return (
        resources.files("trajforge.verifiers.validation").joinpath("pytest_plugin.py").read_bytes()
    )
