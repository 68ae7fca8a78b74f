"""The audit's bookkeeping: which kept bugs get a full run, and the summary line it leaves; how
bugs are shared out over the lanes."""

from __future__ import annotations

import threading

import pytest
from trajforge.pipelines.runtime import audit_line
from trajforge.schemas.params import Params, ParamsError
from trajforge.verifiers.validation.mutants import AUDIT, COVERING, FULL, AuditBook, share_out

IDS = [f"bug-{n}" for n in range(200)]


def test_the_first_kept_bug_of_each_profile_is_audited_then_a_seeded_share():
    book = AuditBook(share=0.2, seed=7)
    assert book.plan("p", "bug-0") == AUDIT and book.plan("q", "bug-0") == AUDIT
    book.record("p", agreed=True)
    plans = [book.plan("p", i) for i in IDS]
    assert set(plans) == {AUDIT, COVERING}
    assert 20 <= plans.count(AUDIT) <= 60  # about a fifth of 200
    assert plans == [book.plan("p", i) for i in IDS]  # the same bugs every time
    other = AuditBook(share=0.2, seed=8)
    other.record("p", agreed=True)
    assert [other.plan("p", i) for i in IDS] != plans  # the seed chooses which
    assert book.plan("q", "bug-1") == AUDIT  # q has had no audit yet


def test_a_disagreement_switches_only_that_profile_to_full_runs():
    book = AuditBook(share=0.0, seed=0)
    book.record("p", agreed=True)
    book.record("q", agreed=True)
    assert {book.plan("p", i) for i in IDS} == {COVERING}
    book.record("p", agreed=False)
    assert {book.plan("p", i) for i in IDS} == {FULL}
    assert {book.plan("q", i) for i in IDS} == {COVERING}


def test_the_summary_says_the_measured_agreement():
    extra: dict[str, object] = {"audit_agreed": 9, "audit_disagreed": 1, "kept": 3}
    audit_line.fold(extra)
    assert extra == {"audit": "9 agreed, 1 disagreed", "kept": 3}
    untouched: dict[str, object] = {"kept": 3}
    audit_line.fold(untouched)
    assert untouched == {"kept": 3}


@pytest.mark.parametrize(("key", "value"), [("audit_share", 1.5), ("mutant_mode", "fast")])
def test_bad_audit_params_give_one_line(key: str, value: object):
    params = Params()
    setattr(params.validate, key, value)
    with pytest.raises(ParamsError, match=f"validate.{key}"):
        params.check()


def test_a_lane_held_by_one_bug_leaves_the_rest_to_the_other_lanes():
    """Work stealing (``share_out``): bug 0 blocks its lane until every other bug is done. A
    fixed split (lane 0 owning bugs 0, 2, 4...) would wait forever; a shared queue lets lane 1
    take the rest. Each bug is taken once."""
    others_done = threading.Event()
    taken: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(lane: int, item: int) -> None:
        if item == 0:
            assert others_done.wait(timeout=30), "the other lanes waited on the held one"
        with lock:
            taken.append((lane, item))
            if len(taken) == 7:  # all but bug 0
                others_done.set()

    share_out(2, list(range(8)), work)
    assert sorted(item for _, item in taken) == list(range(8))
    held_lane = next(lane for lane, item in taken if item == 0)
    assert [item for lane, item in taken if lane == held_lane] == [0]
