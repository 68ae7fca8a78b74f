"""One graded run, shared by every language: the grader's folder in the session, the supervisor,
and what it kept read back.

The session must be a grading session (``SessionSpec(grading=True)``: root may change user, and
nothing else). The supervisor (``in_container/supervisor.py``) starts the tests as ``TEST_UID``;
their reporter's records come back in a file only root can read, and the run's log is the
supervisor's output. What a language ships beside the supervisor and which command it runs are
the language's own (``verifiers/languages/<lang>/``: pytest's launcher and seal, node's reporters
and guard).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from trajforge.schemas.errors import UserError
from trajforge.verifiers.grader.channel import Evidence, read_records
from trajforge.verifiers.sandbox.base import SandboxBroken, Session

ROOT = "/tmp/.trajforge-grader"  # the tests' user cannot write it: root's folder in sticky /tmp
RESULT = f"{ROOT}/out/result.json"
TEST_UID = 10001
PROBE_TIMEOUT_S = 120.0
GRACE_S = 30.0  # beyond the tests' time limit, for the supervisor to kill and write
SUPERVISOR = "supervisor.py"
LOCKDOWN = "lockdown.py"  # the supervisor's and pytest's launcher's: no path to a process's memory
HERE = "trajforge.verifiers.grader.in_container"  # the supervisor's package


class UnsupportedTestCommand(UserError):
    reason = "unsupported_test_cmd"


@dataclass(frozen=True)
class SupervisedRun:
    exit_code: int
    timed_out: bool
    leftovers: bool  # a process of the tests was still running after pytest exited
    evidence: Evidence
    log: str
    duration_s: float
    stopped: str = ""  # the test whose failure stopped the run (fail-fast); "" when it ran out


def ship(session: Session, programs: Mapping[str, bytes]) -> None:
    """The supervisor and a language's ``programs`` (path under ``ROOT`` -> bytes), root's and
    read-only to everyone else."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        add_grader(tar, programs)
    session.put_archive(buffer.getvalue(), "/")


def add_grader(tar: tarfile.TarFile, programs: Mapping[str, bytes]) -> None:
    """What ``ship`` sends, added to ``tar`` (paths from /), so that a graded run can send the
    grader, the tree and the sentinels in one copy: each copy into a container is a round trip
    to the engine and an unpacking process there."""
    for folder, mode in (("", 0o755), ("/plugins", 0o755), ("/out", 0o700)):
        info = tarfile.TarInfo(f"{ROOT}{folder}".lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, mode
        tar.addfile(info)
    for target, data in grader_files(programs).items():
        info = tarfile.TarInfo(f"{ROOT}/{target}".lstrip("/"))
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))


def grader_files(programs: Mapping[str, bytes]) -> dict[str, bytes]:
    """Every file of a graded run under ``ROOT`` (path -> bytes): the supervisor, its lockdown and
    a language's ``programs``. The one list: a graded container and a Harbor task folder
    (``release/harbor.py``) both ship exactly this."""
    shared = {name: program(HERE, name) for name in (SUPERVISOR, LOCKDOWN)}
    return {**shared, **programs}


def put_files(session: Session, files: dict[str, bytes]) -> None:
    """``files`` (absolute path -> bytes) into the session, readable by everyone, in one archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    session.put_archive(buffer.getvalue(), "/")


def supervise(session: Session, command: str, timeout_s: float) -> SupervisedRun:
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


def program(package: str, name: str) -> bytes:
    """One of the grader's files, as shipped (package data of ``package``)."""
    return resources.files(package).joinpath(name).read_bytes()
