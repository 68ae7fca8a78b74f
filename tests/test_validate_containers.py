"""Which container each run of a mined candidate gets (``verifiers/validation/candidate.py``).

A fake sandbox records every session's history: the trees put in, the resets, the test runs. What
must hold: the base run is the first thing a fresh container does after taking the base tree (no
gold, no patch before it); gold goes into that container only once it was reset (else into a fresh
one); no base run ever follows gold in a container; a backend that cannot reset (``local``) gets a
fresh session per state, as before. The verdicts are the rule's, whatever the arrangement.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.sandbox.base import ExecResult, FileRead, SessionSpec
from trajforge.verifiers.validation import candidate as validation

pytestmark = [pytest.mark.docker, pytest.mark.podman]

JUNIT = "/tmp/junit.xml"
# test -> status at base and at gold: a FAIL->PASS, a PASS->PASS, a FAIL->FAIL
STATUSES = {
    "base": {"test_fix": "failure", "test_ok": "", "test_broken": "failure"},
    "gold": {"test_fix": "", "test_ok": "", "test_broken": "failure"},
}


def _tar(tree: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        data = tree.encode()
        info = tarfile.TarInfo("repo/TREE")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _junit(state: str, selection: list[str]) -> bytes:
    cases = []
    for name, outcome in STATUSES[state].items():
        node = f"tests/test_x.py::{name}"
        if selection and node not in selection:
            continue
        body = f'<{outcome} message="boom"/>' if outcome else ""
        cases.append(f'<testcase classname="tests.test_x" name="{name}" file="tests/test_x.py">'
                     f"{body}</testcase>")  # fmt: skip
    return f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>".encode()


@dataclass
class FakeSession:
    resettable: bool
    history: list[str] = field(default_factory=list)  # "put:base", "reset", "run:gold"...
    tree: str = ""  # what /repo holds now
    junit: bytes | None = None

    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
            member = tar.extractfile("repo/TREE")
            assert member is not None and self.tree == "", "a tree over another one"
            self.tree = member.read().decode()
        self.history.append(f"put:{self.tree}")

    def exec(self, command: str, timeout_s: float, workdir: str = "/repo") -> ExecResult:
        if command == validation.RESET:
            self.history.append("reset")
            if self.resettable:
                self.tree = ""
            return ExecResult(0 if self.resettable else 1, "", False, 0.0)
        selection = [word for word in command.split() if word.startswith("tests/")]
        assert self.tree, "a test run without a tree"
        self.history.append(f"run:{self.tree}" + (":rerun" if selection else ""))
        self.junit = _junit(self.tree, selection)
        return ExecResult(1, "", False, 0.1)

    def read_file(self, path: str) -> bytes | None:
        return self.read_file_checked(path).data

    def read_file_checked(self, path: str) -> FileRead:
        assert path == JUNIT and self.junit is not None
        return FileRead(self.junit, "", len(self.junit))

    def commit(self, tag: str) -> str:
        raise NotImplementedError


@dataclass
class FakeSandbox:
    name: str = "docker"
    resettable: bool = True
    sessions: list[FakeSession] = field(default_factory=list)

    @contextlib.contextmanager
    def session(self, spec: SessionSpec) -> Iterator[FakeSession]:
        session = FakeSession(self.resettable)
        self.sessions.append(session)
        yield session

    def has_image(self, image: str) -> bool:
        return True

    def close(self) -> None:
        pass


def _validate(sandbox: FakeSandbox, reruns: int = 1) -> validation.ValidationResult:
    candidate = Candidate("c1", "o/r", "/nowhere", "0" * 40, "patch", "test_patch", "commit", "t")
    profile = EnvProfile("p", "o/r", "3.11", (), "pytest", "img", "built", "", "0" * 40)
    base = validation.TestTree("base-tree", lambda: _tar("base"))
    gold = validation.TestTree("gold-tree", lambda: _tar("gold"))
    params = ValidateParams(reruns=reruns, test_timeout_s=60)
    return validation.validate_candidate(
        sandbox,
        candidate, profile, base, gold, params, JUNIT, None,
    )  # fmt: skip


def _no_path_to_the_fix(sandbox: FakeSandbox) -> None:
    """Every base run precedes any gold in its container; a fresh container starts with base or
    gold put into it, and gold follows a base run only after a reset that worked."""
    for session in sandbox.sessions:
        history = session.history
        first_gold = next((i for i, h in enumerate(history) if h == "put:gold"), len(history))
        base_runs = [i for i, h in enumerate(history) if h.startswith("run:base")]
        assert all(i < first_gold for i in base_runs), history
        if base_runs and first_gold < len(history):
            assert history[first_gold - 1] == "reset" and session.resettable, history


def test_base_then_gold_in_one_reset_container_and_base_reruns_in_a_fresh_one():
    sandbox = FakeSandbox()
    result = _validate(sandbox)
    assert result.task is not None
    assert result.task.FAIL_TO_PASS == ("tests/test_x.py::test_fix",)
    assert result.task.PASS_TO_PASS == ("tests/test_x.py::test_ok",)
    first, second = sandbox.sessions
    assert first.history == ["put:base", "run:base", "reset", "put:gold", "run:gold",
                             "run:gold:rerun"]  # fmt: skip
    assert second.history == ["put:base", "run:base:rerun"]
    _no_path_to_the_fix(sandbox)


def test_no_decisive_test_costs_one_container():
    STATUSES["gold"]["test_fix"] = "failure"
    try:
        sandbox = FakeSandbox()
        result = _validate(sandbox)
    finally:
        STATUSES["gold"]["test_fix"] = ""
    assert result.rejection is not None and result.rejection.reason == "no_fail_to_pass"
    (only,) = sandbox.sessions
    assert only.history == ["put:base", "run:base", "reset", "put:gold", "run:gold"]


@pytest.mark.parametrize("name, resettable", [("docker", False), ("local", True)])
def test_a_container_not_reset_never_takes_gold(name: str, resettable: bool):
    """A reset that fails, or a backend without containers: gold in a fresh session, base reruns
    where base ran (never reset on the host: "local" is never sent RESET)."""
    sandbox = FakeSandbox(name=name, resettable=resettable)
    result = _validate(sandbox)
    assert result.task is not None
    assert result.task.FAIL_TO_PASS == ("tests/test_x.py::test_fix",)
    histories = [s.history for s in sandbox.sessions]
    if name == "local":
        assert histories == [["put:base", "run:base", "run:base:rerun"],
                             ["put:gold", "run:gold", "run:gold:rerun"]]  # fmt: skip
    else:  # the first container is half emptied: base reruns get a third one
        assert histories == [["put:base", "run:base", "reset"],
                             ["put:gold", "run:gold", "run:gold:rerun"],
                             ["put:base", "run:base:rerun"]]  # fmt: skip
    _no_path_to_the_fix(sandbox)


def test_the_arrangement_keeps_the_verdict_of_two_fresh_containers():
    """The same verdict and tests with two reruns, resettable or not."""
    results = [_validate(FakeSandbox(resettable=r), reruns=2) for r in (True, False)]
    tasks = [r.task for r in results]
    assert tasks[0] is not None and tasks[1] is not None
    assert tasks[0].FAIL_TO_PASS == tasks[1].FAIL_TO_PASS == ("tests/test_x.py::test_fix",)
    assert tasks[0].PASS_TO_PASS == tasks[1].PASS_TO_PASS
    runs = [t.validation.test_runs for t in tasks if t is not None and t.validation is not None]
    assert runs == [6, 6]
