"""Which container each run of a mined candidate gets (``verifiers/validation/candidate.py``).

A fake sandbox records every session's history: the trees put in, the resets, the test runs. What
must hold: the base run is the first thing a fresh container does after taking the base tree (no
gold, no patch before it); gold goes into that container only once it was reset (else into a fresh
one); no base run ever follows gold in a container; a backend that cannot reset (``local``) gets a
fresh session per state, as before. With a lane free (``verifiers/sandbox/lanes.py``) gold runs
beside base in a fresh container, and each base rerun beside its gold rerun: the same verdict and
runs. The verdicts are the rule's, whatever the arrangement.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.sandbox.base import ExecResult, FileRead, SessionSpec
from trajforge.verifiers.sandbox.lanes import NONE, Lanes
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
    # set: the main base run waits (10 s at most) until a gold run has started in another
    # session, and says in its history whether it saw one: proof the two ran at once
    gold_started: threading.Event | None = None

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
        if self.gold_started is not None and not selection:
            if self.tree == "gold":
                self.gold_started.set()
            elif not self.gold_started.wait(10):
                self.history.append("alone")
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
    gold_started: threading.Event | None = None

    @contextlib.contextmanager
    def session(self, spec: SessionSpec) -> Iterator[FakeSession]:
        session = FakeSession(self.resettable, gold_started=self.gold_started)
        self.sessions.append(session)
        yield session

    def has_image(self, image: str) -> bool:
        return True

    def close(self) -> None:
        pass


def _validate(
    sandbox: FakeSandbox, reruns: int = 1, lanes: Lanes = NONE
) -> validation.ValidationResult:
    candidate = Candidate("c1", "o/r", "/nowhere", "0" * 40, "patch", "test_patch", "commit", "t")
    profile = EnvProfile("p", "o/r", "3.11", (), "pytest", "img", "built", "", "0" * 40)
    base = validation.TestTree("base-tree", lambda: _tar("base"))
    gold = validation.TestTree("gold-tree", lambda: _tar("gold"))
    params = ValidateParams(reruns=reruns, test_timeout_s=60)
    return validation.validate_candidate(
        sandbox,
        candidate, profile, base, gold, params, JUNIT, None, lanes,
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


@contextlib.contextmanager
def _lanes(count: int, held: int) -> Iterator[Lanes]:
    """``count`` lanes, ``held`` of them taken (the candidate's own, another candidate's)."""
    lanes = Lanes(count)
    with contextlib.ExitStack() as taken:
        for _ in range(held):
            taken.enter_context(lanes.held())
        yield lanes


def test_with_a_lane_free_gold_runs_beside_base_with_the_same_verdict():
    sequential = _validate(FakeSandbox(), reruns=2)
    sandbox = FakeSandbox(gold_started=threading.Event())
    with _lanes(2, held=1) as lanes:
        beside = _validate(sandbox, reruns=2, lanes=lanes)
        assert lanes.take_borrowed() == 3  # gold beside base, then both reruns
    histories = [s.history for s in sandbox.sessions]
    # base never waited alone: gold had started in the other container
    assert histories == [["put:base", "run:base", "run:base:rerun", "run:base:rerun"],
                         ["put:gold", "run:gold", "run:gold:rerun", "run:gold:rerun"]]  # fmt: skip
    _no_path_to_the_fix(sandbox)
    assert beside.task is not None and sequential.task is not None
    assert beside.task.FAIL_TO_PASS == sequential.task.FAIL_TO_PASS
    assert beside.task.PASS_TO_PASS == sequential.task.PASS_TO_PASS
    assert [r.state for r in beside.runs] == [r.state for r in sequential.runs]


def test_a_gold_run_beside_a_base_that_decides_alone_is_not_used():
    """Nothing fails at base: the verdict is base's alone, as in order, and gold's run (made
    beside it in a lane that was free) is not among the candidate's runs."""
    STATUSES["base"]["test_fix"] = STATUSES["base"]["test_broken"] = ""
    try:
        sandbox = FakeSandbox(gold_started=threading.Event())
        with _lanes(2, held=1) as lanes:
            result = _validate(sandbox, lanes=lanes)
    finally:
        STATUSES["base"]["test_fix"] = STATUSES["base"]["test_broken"] = "failure"
    assert result.rejection is not None
    assert result.rejection.reason == "no_failing_test_at_base"
    assert [r.state for r in result.runs] == ["base"]
    assert [s.history for s in sandbox.sessions] == [["put:base", "run:base"],
                                                     ["put:gold", "run:gold"]]  # fmt: skip


def test_with_no_lane_free_the_runs_keep_their_order():
    """Every lane held (by this candidate and another one): nothing borrowed, base then gold in
    one reset container, as with no lanes at all."""
    sandbox = FakeSandbox()
    with _lanes(2, held=2) as lanes:
        result = _validate(sandbox, lanes=lanes)
        assert result.task is not None and lanes.take_borrowed() == 0
    assert sandbox.sessions[0].history == ["put:base", "run:base", "reset", "put:gold",
                                           "run:gold", "run:gold:rerun"]  # fmt: skip


def test_a_second_run_that_is_not_needed_drops_its_error_and_a_needed_one_raises_it():
    """``pair``'s contract in both orders: an unneeded second run hands back None (its error
    too: the sequential order would not have run it); a needed one's error is the caller's."""

    def broken(_alongside: bool) -> str:
        raise RuntimeError("the second run broke")

    for held in (1, 2):  # a lane free (beside), none free (in order)
        with _lanes(2, held=held) as lanes:
            assert lanes.pair(lambda: "base", broken, lambda _: False) == ("base", None)
            with pytest.raises(RuntimeError, match="second run broke"):
                lanes.pair(lambda: "base", broken)
            with pytest.raises(RuntimeError, match="second run broke"):
                lanes.both(lambda: "base", lambda: broken(False))
            assert lanes.both(lambda: 1, lambda: 2) == (1, 2)
            assert lanes.take_borrowed() == (4 if held == 1 else 0)
