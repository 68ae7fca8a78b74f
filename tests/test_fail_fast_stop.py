"""Fail-fast's stop, without a container: the supervisor's watcher stops only at a listed test's
failure read from a well-formed record, and the verdict of a stopped run is never resolved,
whatever else the records, the exit code or the sentinels say (the run itself, in Docker, is
tests/test_evaluate.py's fail-fast tests)."""

from __future__ import annotations

import json
import os
import threading

from trajforge.verifiers.grader import rules
from trajforge.verifiers.grader.in_container import supervisor

ADD = "tests/test_ops.py::test_add"
MUL = "tests/test_ops.py::test_mul"
SENTINEL = "tests/test_ops.py::test_value_check"


KEY = "0123456789abcdef"  # the records' key the launcher got on its pipe


def _record(test_id: str, outcome: str, when: str = "call", sub: bool = False) -> bytes:
    said = {"t": "report", "id": test_id, "when": when, "outcome": outcome, "xfail": False}
    return f"{KEY} ".encode() + json.dumps({**said, "sub": sub}).encode()


def _watch(lines: list[bytes]) -> str:
    """The test the watcher stopped at after reading ``lines`` ("" when it did not stop)."""
    store: dict = {"stopped": ""}
    stop = threading.Event()
    watch = supervisor._stop_rule(frozenset({ADD, MUL}), store, stop, KEY)
    for line in lines:
        watch(line)
    assert stop.is_set() == bool(store["stopped"])
    return store["stopped"]


def test_the_watcher_stops_only_at_a_listed_tests_failure():
    assert _watch([_record(ADD, "passed", "setup"), _record(ADD, "passed")]) == ""
    assert _watch([_record(SENTINEL, "failed")]) == ""  # a failing sentinel is expected
    assert _watch([_record(ADD, "passed"), _record(MUL, "failed")]) == MUL
    assert _watch([_record(MUL, "failed", "setup"), _record(ADD, "failed")]) == MUL  # the first
    assert _watch([_record(ADD, "skipped", "setup")]) == ADD  # skipped is not passed
    assert _watch([_record(ADD, "skipped", sub=True)]) == ""  # a skipped subtest fails nothing
    assert _watch([_record(ADD, "failed", sub=True)]) == ADD  # a failed one fails its test
    assert _watch([_record(ADD, "rerun")]) == ""  # pytest-rerunfailures: the last word decides
    garbage = [b"", b"not json", b"[1, 2]", b'{"t": "report", "id": 3, "outcome": "failed"}']
    keyed = [f"{KEY} ".encode() + line for line in garbage]
    assert _watch([*garbage, *keyed, _record(ADD, "failed")]) == ADD
    # A record without the key (the tests wrote it into the pipe themselves) stops nothing.
    assert _watch([_record(ADD, "failed")[len(KEY) + 1 :], _record(MUL, "failed")]) == MUL


def test_the_pump_hands_the_watcher_whole_lines_across_chunks():
    """Records split over reads reach the watcher whole, once each."""
    import os

    seen: list[bytes] = []
    read, write = os.pipe()
    store: dict = {"data": b"", "overflow": False}
    pump = threading.Thread(target=supervisor._pump, args=(read, None, 1 << 20, store, seen.append))
    pump.start()
    data = _record(ADD, "passed") + b"\n" + _record(MUL, "failed") + b"\n"
    for start in range(0, len(data), 7):
        os.write(write, data[start : start + 7])
    os.close(write)
    pump.join(10)
    assert [line for line in seen if line] == [_record(ADD, "passed"), _record(MUL, "failed")]
    assert store["data"] == data


def _verdict(statuses, exit_code=-9, stopped=ADD, planted=((SENTINEL, "FAILED"),), finished=False):
    return rules.verdict(statuses, (), finished, exit_code, False, (ADD, MUL), planted, stopped)


def test_a_stopped_run_is_never_resolved_and_its_sentinels_still_count():
    failed = {SENTINEL: "FAILED", ADD: "FAILED"}
    assert _verdict(failed) == (False, "tests_failed", True)
    # whatever the records and the exit code say, a stop reads a failure: never resolved
    everything = {SENTINEL: "FAILED", ADD: "PASSED", MUL: "PASSED"}
    assert _verdict(everything, exit_code=0, finished=True) == (False, "tests_failed", True)
    assert _verdict(everything, exit_code=1, finished=True, stopped="") == (True, "resolved", True)
    # a sentinel that ran with the wrong outcome is forgery, stopped or not
    assert _verdict({SENTINEL: "PASSED", ADD: "FAILED"}) == (False, "forged_result", False)
    # one the stop cut off is not missing; without a stop, a missing one beside its file's
    # reported tests is
    assert _verdict({ADD: "FAILED"}) == (False, "tests_failed", True)
    assert _verdict({ADD: "FAILED"}, exit_code=1, stopped="", finished=True)[1] == "forged_result"


def test_leftovers_are_read_from_proc_not_from_kills_answer():
    # kill(-1) succeeds while any process exists, even one it may not signal: the supervisor
    # itself. Whether the tests' user left a process is read from /proc instead.
    assert supervisor._has_processes(os.getuid())  # this very process
    assert not supervisor._has_processes(2**31 - 7)  # a uid no process of this machine runs as
