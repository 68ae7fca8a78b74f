"""Per-test line coverage of one clean snapshot: which tests execute which lines.

One clean run of the suite under coverage.py, with the dynamic context switched to each test's node
id by a tiny pytest plugin, tells every mutant of the snapshot which tests can see it: a test that
never executes a line cannot change its outcome when only that line changes. So each mutant runs
only the tests that cover its lines instead of the whole suite.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import REPO_DIR, Session
from trajforge.verifiers.test_runner import RunContext, run_tests

COV_DIR = "/tmp/trajforge/cov"
PYTEST_PREFIX = "python -m pytest"
MAP_PATH = f"{COV_DIR}/map.json"

_PLUGIN = """\
import coverage
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(item.nodeid)
"""

_RCFILE = f"""\
[run]
data_file = {COV_DIR}/.coverage
source = {REPO_DIR}
"""

# Reads the coverage data inside the container and writes a compact map: test ids once, then
# file -> line -> indices of the tests that executed it.
_DUMP = f"""\
import json, coverage
data = coverage.CoverageData(basename="{COV_DIR}/.coverage")
data.read()
tests, index, files = [], {{}}, {{}}
prefix = "{REPO_DIR}/"
for path in data.measured_files():
    if not path.startswith(prefix):
        continue
    lines = {{}}
    for line, contexts in (data.contexts_by_lineno(path) or {{}}).items():
        ids = []
        for context in contexts:
            if context:
                if context not in index:
                    index[context] = len(tests)
                    tests.append(context)
                ids.append(index[context])
        if ids:
            lines[str(line)] = sorted(ids)
    if lines:
        files[path[len(prefix):]] = lines
with open("{MAP_PATH}", "w") as out:
    json.dump({{"tests": tests, "files": files}}, out)
"""


@dataclass(frozen=True)
class CoverageMap:
    tests: tuple[str, ...]
    files: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)

    def tests_covering(self, path: str, lines: Iterable[int]) -> tuple[str, ...]:
        """Sorted ids of the tests that executed any of ``lines`` of ``path``."""
        by_line = self.files.get(path, {})
        found = {i for line in lines for i in by_line.get(line, ())}
        return tuple(sorted(self.tests[i] for i in found))

    def to_json(self) -> dict:
        files = {
            p: {str(n): list(ids) for n, ids in lines.items()} for p, lines in self.files.items()
        }
        return {"tests": list(self.tests), "files": files}

    @classmethod
    def from_json(cls, data: dict) -> CoverageMap:
        files = {
            path: {int(n): tuple(ids) for n, ids in lines.items()}
            for path, lines in data["files"].items()
        }
        return cls(tuple(data["tests"]), files)


def coverage_command(test_cmd: str) -> str | None:
    """The test command run under coverage with per-test contexts; None if it is not pytest's."""
    if not test_cmd.startswith(PYTEST_PREFIX):
        return None
    rest = test_cmd[len(PYTEST_PREFIX) :]
    return (
        f"PYTHONPATH={COV_DIR} python -m coverage run --rcfile={COV_DIR}/rc "
        f"-m pytest -p trajforge_covctx{rest}"
    )


def measure(session: Session, ctx: RunContext) -> tuple[TestRun, CoverageMap | None]:
    """One clean run of the whole suite under coverage; the map is None when coverage is missing.

    Without coverage.py in the image (or with a test command that is not pytest) the run is a plain
    one and every mutant falls back to running the whole suite: slower, never wrong.
    """
    command = coverage_command(ctx.test_cmd)
    has_coverage = session.exec("python -c 'import coverage'", timeout_s=60).exit_code == 0
    if command is None or not has_coverage:
        return run_tests(session, ctx, "clean", attempt=0), None
    session.put_archive(_support_files(), dest="/")
    covered = RunContext(ctx.candidate_id, ctx.profile_id, command, ctx.junit_path, ctx.timeout_s)
    run = run_tests(session, covered, "clean", attempt=0)
    dump = session.exec(f"python {shlex.quote(COV_DIR + '/dump.py')}", timeout_s=300)
    raw = session.read_file(MAP_PATH) if dump.exit_code == 0 else None
    if raw is None:
        return run, None
    return run, CoverageMap.from_json(json.loads(raw))


def _support_files() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in (
            ("trajforge_covctx.py", _PLUGIN),
            ("rc", _RCFILE),
            ("dump.py", _DUMP),
        ):
            data = text.encode()
            info = tarfile.TarInfo(f"{COV_DIR.lstrip('/')}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
