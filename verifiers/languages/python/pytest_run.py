"""A Python task's graded run: pytest under the supervisor, started by the sealed launcher.

The supervisor starts ``launch.py`` as ``TEST_UID`` with plugin autoload off and the image's own
plugins named with ``-p``; the launcher loads pytest, the reporter and the seal before anything
of the repository can be imported (``in_container/``, docs/security.md). What the image offers
(its pytest plugins) is probed once per image and process.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
import threading
from dataclasses import dataclass

from trajforge.verifiers.grader import rules
from trajforge.verifiers.grader.supervised import (
    PROBE_TIMEOUT_S,
    ROOT,
    TEST_UID,
    SupervisedRun,
    UnsupportedTestCommand,
    program,
    supervise,
)
from trajforge.verifiers.sandbox.base import REPO_DIR, SandboxBroken, Session

# What a graded run runs (pytest's arguments, the graded ids, the files kept read-only, the tests
# a fail-fast run stops at): root's, in a folder the tests cannot open.
RUN_SPEC = f"{ROOT}/out/run.json"
PYTHON = "/venv/bin/python"
HERE = "trajforge.verifiers.languages.python.in_container"

# Runners pytest names itself by; anything else is not a test command the grader can supervise.
RUNNERS = (("python", "-m", "pytest"), ("python3", "-m", "pytest"), ("pytest",))
# Options whose output files the grader does not read (it reads the reporter's records).
DROPPED_OPTIONS = ("--junitxml", "--junit-xml", "--resultlog", "--result-log")
# Plugins a graded run never loads (they would take over coverage or fork the run); the options
# they add are accepted and ignored by trajforge_pytest.
BLOCKED_PLUGINS = ("xdist", "pytest_cov", "pytest_xdist")
MAXFAIL = 2**31 - 1
# Shipped beside the supervisor: path under ROOT -> file of in_container/.
FILES = {
    "launch.py": "launch.py",
    "seal.py": "seal.py",
    "plugins/trajforge_reporter.py": "trajforge_reporter.py",
}


@dataclass(frozen=True)
class ImageFacts:
    plugins: tuple[tuple[str, str], ...]  # (entry point name, module) of the image's pytest11


_FACTS: dict[str, ImageFacts] = {}
_FACTS_LOCK = threading.Lock()


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
    return supervise(session, command, timeout_s)


def programs() -> dict[str, bytes]:
    """The launcher, the seal, the reporter and trajforge's own pytest plugin (it accepts the
    blocked plugins' options), by their paths under ``ROOT``."""
    files = {target: program(HERE, name) for target, name in FILES.items()}
    plugin = program("trajforge.verifiers.languages.python", "pytest_plugin.py")
    return {**files, "plugins/trajforge_pytest.py": plugin}
