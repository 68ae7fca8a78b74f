"""Per-test line coverage of one clean snapshot: which tests execute which lines.

One clean run of the suite under coverage.py, with the dynamic context switched to each test's
node id by trajforge's pytest plugin (``pytest_plugin.py``, which also keeps the repository's own
pytest-cov from taking the measurement over), tells every mutant of the snapshot which tests can
see it: a test that never executes a line cannot change its outcome when only that line changes.
So each mutant's run starts with the tests that cover its lines, and stops there if none fails.

Python subprocesses a test starts are measured under the same test: ``install_support`` puts a
``.pth`` file in the image's site-packages that, while the plugin has set ``TRAJFORGE_COV_TEST``,
starts coverage (``coverage.process_startup``, ``COVERAGE_PROCESS_START``) and switches to that
test's context; each process writes its own data file (``parallel``) and the map writer combines
them. Code run from a string (``exec`` of a file's text), a subprocess that clears its
environment or is not Python stays invisible: the audit of ``mutants.py`` is there for that.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import REPO_DIR, Session
from trajforge.verifiers.test_runner import RunContext, run_tests

COV_DIR = "/tmp/trajforge/cov"
PYTEST_PREFIX = "python -m pytest"
MAP_PATH = f"{COV_DIR}/map.json"
FIRST_ENV = "TRAJFORGE_FIRST"  # the file of tests the plugin runs first (pytest_plugin.py)
FIRST_PATH = f"{COV_DIR}/first.txt"
ONLY_FIRST_ENV = "TRAJFORGE_ONLY_FIRST"  # set: nothing runs after the first tests
RERUN_OUT_ENV = "TRAJFORGE_RERUN_OUT"  # where the plugin writes its in-process reruns' outcomes
RERUN_PATH = f"{COV_DIR}/reruns.json"
PLUGIN = "trajforge_pytest"  # verifiers/languages/python/pytest_plugin.py, as the container sees it
FORK = "trajforge_fork"  # verifiers/languages/python/fork_server.py, as the container sees it
FORK_READY = "/tmp/trajforge/fork/ready"
# The repository's pytest-cov and xdist would take the measurement over (the plugin accepts and
# ignores their options, so the project's addopts still parse).
BLOCKED = "-p no:pytest_cov -p no:xdist"

_RCFILE = f"""\
[run]
data_file = {COV_DIR}/.coverage
source = {REPO_DIR}
parallel = true
"""
TEST_ENV = "TRAJFORGE_COV_TEST"  # set by the plugin to the running test's node id
START_MODULE = "trajforge_cov_start"
# Imported by the .pth in every Python process of the image; does something only in a process
# started by a test of the measured run.
_START = f"""\
import os
try:
    import coverage
except ImportError:
    coverage = None
if coverage is not None:
    # coverage >= 7.7 ships its own .pth that may have started it already
    started = coverage.process_startup() or coverage.Coverage.current()
    test = os.environ.get("{TEST_ENV}")
    if started is not None and test:
        started.switch_context(test)
"""
_PTH = (
    f"import os, sys; os.environ.get({TEST_ENV!r}) is not None and "
    f"(sys.path.append({COV_DIR!r}) or __import__({START_MODULE!r}))\n"
)
# Writes the .pth into the site-packages of the image's `python` (quietly: no site-packages
# that can be written means no subprocess coverage, and the audit covers for it).
_PTH_INSTALL = (
    "python -c 'import sysconfig, shutil; "
    f'shutil.copy("{COV_DIR}/trajforge_cov.pth", sysconfig.get_paths()["purelib"])\''
)

# Reads the coverage data inside the container and writes a compact map: test ids once, then
# file -> line -> indices of the tests that executed it.
_DUMP = f"""\
import json, coverage
measured = coverage.Coverage(config_file="{COV_DIR}/rc")
measured.combine()  # the pytest process's data and its subprocesses'
data = measured.get_data()
tests, index, files, imports = [], {{}}, {{}}, {{}}
prefix = "{REPO_DIR}/"
for path in data.measured_files():
    if not path.startswith(prefix):
        continue
    lines, early = {{}}, []
    for line, contexts in (data.contexts_by_lineno(path) or {{}}).items():
        ids = []
        for context in contexts:
            if not context:  # before the first test: collection, so import time
                early.append(line)
                continue
            if context not in index:
                index[context] = len(tests)
                tests.append(context)
            ids.append(index[context])
        if ids:
            lines[str(line)] = sorted(ids)
    if lines:
        files[path[len(prefix):]] = lines
    if early:
        imports[path[len(prefix):]] = sorted(early)
with open("{MAP_PATH}", "w") as out:
    json.dump({{"tests": tests, "files": files, "import_lines": imports}}, out)
"""


@dataclass(frozen=True)
class CoverageMap:
    tests: tuple[str, ...]
    files: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    # Lines run before the first test (collection: imports, and the functions module bodies
    # call). What they compute is kept in module state every later test reads without running
    # them again, so no per-test answer can be trusted for a bug there.
    at_import: dict[str, frozenset[int]] = field(default_factory=dict)

    def runs_at_import(self, path: str, lines: Iterable[int]) -> bool:
        early = self.at_import.get(path, frozenset())
        return any(line in early for line in lines)

    def tests_covering(self, path: str, lines: Iterable[int]) -> tuple[str, ...]:
        """Sorted ids of the tests that executed any of ``lines`` of ``path``."""
        by_line = self.files.get(path, {})
        found = {i for line in lines for i in by_line.get(line, ())}
        return tuple(sorted(self.tests[i] for i in found))

    def to_json(self) -> dict:
        files = {
            p: {str(n): list(ids) for n, ids in lines.items()} for p, lines in self.files.items()
        }
        early = {p: sorted(lines) for p, lines in self.at_import.items()}
        return {"tests": list(self.tests), "files": files, "import_lines": early}

    @classmethod
    def from_json(cls, data: dict) -> CoverageMap:
        files = {
            path: {int(n): tuple(ids) for n, ids in lines.items()}
            for path, lines in data["files"].items()
        }
        early = {
            path: frozenset(int(n) for n in lines)
            for path, lines in data.get("import_lines", {}).items()
        }
        return cls(tuple(data["tests"]), files, early)


def plugin_command(test_cmd: str, forked: bool = False) -> str:
    """The test command with trajforge's pytest plugin (``install_support`` puts it in place);
    ``forked``: run through the workspace's fork server (``start_fork_server``), which runs
    ``python -m pytest`` itself wherever it cannot serve.

    A command that is not pytest's is returned unchanged: it runs as the profile says.
    """
    if not test_cmd.startswith(PYTEST_PREFIX):
        return test_cmd
    rest = test_cmd[len(PYTEST_PREFIX) :]
    module = FORK if forked else "pytest"
    return f"{_PYTHONPATH} python -m {module} {BLOCKED} -p {PLUGIN}{rest}"


def start_fork_server(session: Session) -> bool:
    """Start the fork server in the repository with the test runs' environment, and wait (a few
    seconds at most) until it serves; False: the runs start pytest themselves."""
    start = (
        f"{_PYTHONPATH} nohup python -m {FORK} --trajforge-serve </dev/null >/dev/null 2>&1 & "
        f"i=0; while [ ! -e {FORK_READY} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
        f"[ -e {FORK_READY} ]"
    )
    return session.exec(start, timeout_s=60).exit_code == 0


def coverage_command(test_cmd: str) -> str | None:
    """The test command run under coverage with per-test contexts; None if it is not pytest's."""
    if not test_cmd.startswith(PYTEST_PREFIX):
        return None
    rest = test_cmd[len(PYTEST_PREFIX) :]
    return (
        f"{_PYTHONPATH} COVERAGE_PROCESS_START={COV_DIR}/rc "
        f"python -m coverage run --rcfile={COV_DIR}/rc "
        f"-m pytest {BLOCKED} -p {PLUGIN}{rest}"
    )


# `env`, so the command can follow `timeout` or another variable
_PYTHONPATH = f"env PYTHONPATH={COV_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"


def measure(session: Session, ctx: RunContext) -> tuple[TestRun, CoverageMap | None]:
    """One clean run of the whole suite under coverage; the map is None when coverage is missing.

    ``install_support`` must have run in the session.

    Without coverage.py in the image (or with a test command that is not pytest) the run is a plain
    one and every mutant falls back to running the whole suite: slower, never wrong.
    """
    command = coverage_command(ctx.test_cmd)
    has_coverage = session.exec("python -c 'import coverage'", timeout_s=60).exit_code == 0
    if command is None or not has_coverage:
        plain = RunContext(
            ctx.candidate_id, ctx.profile_id, plugin_command(ctx.test_cmd), ctx.junit_path,
            ctx.timeout_s,
        )  # fmt: skip
        return run_tests(session, plain, "clean", attempt=0), None
    covered = RunContext(ctx.candidate_id, ctx.profile_id, command, ctx.junit_path, ctx.timeout_s)
    run = run_tests(session, covered, "clean", attempt=0)
    dump = session.exec(f"python {shlex.quote(COV_DIR + '/dump.py')}", timeout_s=300)
    raw = session.read_file(MAP_PATH) if dump.exit_code == 0 else None
    if raw is None:
        return run, None
    return run, CoverageMap.from_json(json.loads(raw))


def install_support(session: Session) -> None:
    """The plugin, the coverage settings and the map writer, under ``COV_DIR`` in the container,
    and the ``.pth`` that measures the subprocesses of a test."""
    session.put_archive(_support_files(), dest="/")
    session.exec(f"{_PTH_INSTALL} 2>/dev/null || true", timeout_s=60)


def _support_files() -> bytes:
    plugin = Path(__file__).with_name("pytest_plugin.py").read_text(encoding="utf-8")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in (
            (f"{PLUGIN}.py", plugin),
            (f"{FORK}.py", Path(__file__).with_name("fork_server.py").read_text(encoding="utf-8")),
            ("rc", _RCFILE),
            ("dump.py", _DUMP),
            (f"{START_MODULE}.py", _START),
            ("trajforge_cov.pth", _PTH),
        ):
            data = text.encode()
            info = tarfile.TarInfo(f"{COV_DIR.lstrip('/')}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
