"""The validation rule, one test per way a verdict can go wrong (SWE-bench style)."""

from __future__ import annotations

from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.validation.rule import decisive_tests, failing_tests, judge


def run(state: str, statuses: dict[str, str], attempt: int = 0, selection=(), **kw) -> TestRun:
    fields = dict(exit_code=1, suite_ran=True, timed_out=False, collection_errors=(), log="")
    fields.update(kw)
    return TestRun(
        run_id=f"{state}{attempt}",
        candidate_id="c",
        profile_id="p",
        state=state,
        attempt=attempt,
        selection=tuple(selection),
        duration_s=0.1,
        tests=tuple(TestStatus(t, s) for t, s in statuses.items()),
        log_digest="",
        **fields,
    )


def test_fail_to_pass_and_pass_to_pass():
    verdict = judge(
        [run("base", {"a": "FAILED", "b": "PASSED", "c": "SKIPPED"})],
        [run("gold", {"a": "PASSED", "b": "PASSED", "c": "SKIPPED"})],
    )
    assert verdict.kept and verdict.fail_to_pass == ("a",) and verdict.pass_to_pass == ("b",)


def test_error_at_base_counts_as_failing():
    verdict = judge([run("base", {"a": "ERROR"})], [run("gold", {"a": "PASSED"})])
    assert verdict.fail_to_pass == ("a",)


def test_pass_to_fail_rejects():
    verdict = judge(
        [run("base", {"a": "FAILED", "b": "PASSED"})], [run("gold", {"a": "PASSED", "b": "FAILED"})]
    )
    assert not verdict.kept and verdict.reason == "pass_to_fail"


def test_collection_error_at_base_is_not_fail_to_pass():
    base = run("base", {}, exit_code=2, suite_ran=False, collection_errors=("tests/test_x.py",))
    verdict = judge([base], [run("gold", {"a": "PASSED"})])
    assert not verdict.kept and verdict.reason == "collection_error_at_base"


def test_timeout_rejects():
    base = run("base", {}, exit_code=-9, suite_ran=False, timed_out=True)
    assert judge([base], [run("gold", {"a": "PASSED"})]).reason == "timeout_at_base"


def test_suite_that_did_not_run_at_gold_rejects():
    gold = run("gold", {}, exit_code=4, suite_ran=False, log="ERROR: usage")
    verdict = judge([run("base", {"a": "FAILED"})], [gold])
    assert verdict.reason == "suite_did_not_run_at_gold" and "exit 4" in verdict.detail


def test_flaky_tests_never_enter_f2p_or_p2p():
    base = [run("base", {"a": "FAILED", "f": "FAILED", "p": "PASSED"})]
    gold = [
        run("gold", {"a": "PASSED", "f": "PASSED", "p": "PASSED"}),
        run("gold", {"a": "PASSED", "f": "FAILED"}, attempt=1, selection=("a", "f")),
    ]
    verdict = judge(base, gold)
    assert verdict.kept
    assert verdict.fail_to_pass == ("a",) and verdict.flaky == ("f",)
    assert "f" not in verdict.pass_to_pass


def test_only_flaky_f2p_rejects():
    base = [run("base", {"f": "FAILED"}), run("base", {"f": "PASSED"}, 1, ("f",))]
    verdict = judge(base, [run("gold", {"f": "PASSED"})])
    assert verdict.reason == "only_flaky_tests"


def test_a_test_lost_in_a_rerun_is_flaky():
    gold = [
        run("gold", {"a": "PASSED", "b": "PASSED"}),
        run("gold", {"a": "PASSED"}, 1, ("a", "b")),
    ]
    verdict = judge([run("base", {"a": "FAILED", "b": "FAILED"})], gold)
    assert verdict.fail_to_pass == ("a",) and verdict.flaky == ("b",)


def test_flaky_pass_to_fail_is_dropped_not_fatal():
    base = [run("base", {"a": "FAILED", "b": "PASSED"})]
    gold = [
        run("gold", {"a": "PASSED", "b": "FAILED"}),
        run("gold", {"a": "PASSED", "b": "PASSED"}, 1, ("a", "b")),
    ]
    verdict = judge(base, gold)
    assert verdict.kept and verdict.flaky == ("b",)


def test_no_fail_to_pass_rejects():
    verdict = judge([run("base", {"a": "FAILED"})], [run("gold", {"a": "FAILED"})])
    assert verdict.reason == "no_fail_to_pass"


def test_rerun_selections_target_what_the_verdict_rests_on():
    base = run("base", {"a": "FAILED", "b": "PASSED", "c": "ERROR", "d": "PASSED"})
    gold = run("gold", {"a": "PASSED", "b": "FAILED", "c": "ERROR", "d": "PASSED"})
    assert failing_tests(base) == ("a", "c")
    assert decisive_tests(base, gold) == ("a", "b")
