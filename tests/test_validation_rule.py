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


def _module(test_id: str) -> str:
    return test_id.split("::")[0]


def _unbuilt_base(**kw) -> TestRun:
    """Go at base + test_patch: package ``calc`` did not build, ``text`` ran."""
    fields = dict(exit_code=1, suite_ran=False, collection_errors=("calc",))
    return run("base", {"text::TestShout": "PASSED"}, **{**fields, **kw})


GOLD = {"calc::TestDiv": "PASSED", "calc::TestAdd": "PASSED", "text::TestShout": "PASSED"}


def test_tests_of_a_module_unbuilt_at_base_are_fail_to_pass_with_the_rule_on():
    """SWE-bench and Multi-SWE-bench (n2p) count them: absent at base, passing with the fix."""
    verdict = judge([_unbuilt_base()], [run("gold", GOLD)], _module)
    assert verdict.kept, verdict
    assert verdict.fail_to_pass == ("calc::TestAdd", "calc::TestDiv")
    assert verdict.pass_to_pass == ("text::TestShout",)


def test_a_module_unbuilt_at_base_is_a_rejection_with_the_rule_off():
    verdict = judge([_unbuilt_base()], [run("gold", GOLD)])
    assert not verdict.kept and verdict.reason == "collection_error_at_base"


def test_a_runner_that_stopped_at_the_unbuilt_module_ran_no_suite():
    """pytest without --continue-on-collection-errors: exit 2, nothing else ran."""
    base = run("base", {}, exit_code=2, suite_ran=False, collection_errors=("tests/test_x.py",))
    gold = run("gold", {"tests/test_x.py::test_a": "PASSED", "tests/test_y.py::test_b": "PASSED"})
    verdict = judge([base], [gold], _module)
    assert not verdict.kept and verdict.reason == "collection_error_at_base"


def test_a_single_package_unbuilt_at_base_is_all_fail_to_pass():
    """go test exits 2 for a package that did not build: which tests ran decides, not the code."""
    base = run("base", {}, exit_code=2, suite_ran=False, collection_errors=("calc",))
    gold = run("gold", {"calc::TestDiv": "PASSED", "calc::TestAdd": "PASSED"})
    assert judge([base], [gold], _module).fail_to_pass == ("calc::TestAdd", "calc::TestDiv")


def test_a_module_unbuilt_at_gold_too_is_still_a_rejection():
    gold = run("gold", {"text::TestShout": "PASSED"}, suite_ran=False, collection_errors=("calc",))
    verdict = judge([_unbuilt_base()], [gold], _module)
    assert not verdict.kept and verdict.reason == "collection_error_at_base"


def test_a_rerun_that_builds_the_module_makes_its_tests_flaky_not_fail_to_pass():
    selection = ("calc::TestAdd", "calc::TestDiv")
    still = run("base", {}, attempt=1, selection=selection, suite_ran=False,
                collection_errors=("calc",))  # fmt: skip
    built = run("base", dict.fromkeys(selection, "PASSED"), attempt=1, selection=selection)
    gold = [run("gold", GOLD), run("gold", GOLD, attempt=1)]
    assert judge([_unbuilt_base(), still], gold, _module).fail_to_pass == selection
    verdict = judge([_unbuilt_base(), built], gold, _module)
    assert not verdict.kept and verdict.reason == "only_flaky_tests"


# grpc-go-2996's shape: at base a test panics and ends its package's binary, so the package's
# later tests never run; with the fix all of them pass (Multi-SWE-bench's n2p).
CRASH_GOLD = {
    "alts::TestInfoServerName": "PASSED",
    "alts::TestAuthInfoFromPeer": "PASSED",
    "alts::TestNoProductNameFile": "PASSED",
    "text::TestShout": "PASSED",
}


def _crashed_base(**kw) -> TestRun:
    return run("base", {"alts::TestInfoServerName": "FAILED", "text::TestShout": "PASSED"}, **kw)


def test_tests_a_crash_at_base_never_ran_are_fail_to_pass_where_a_crash_ends_the_module():
    verdict = judge([_crashed_base()], [run("gold", CRASH_GOLD)], _module, crashes=True)
    assert verdict.kept, verdict
    assert verdict.fail_to_pass == (
        "alts::TestAuthInfoFromPeer", "alts::TestInfoServerName", "alts::TestNoProductNameFile"
    )  # fmt: skip
    assert verdict.pass_to_pass == ("text::TestShout",)
    # where each test runs on its own (pytest, the JS runners) absence is no evidence
    assert judge([_crashed_base()], [run("gold", CRASH_GOLD)], _module).fail_to_pass == (
        "alts::TestInfoServerName",
    )


def test_a_module_with_no_failing_test_at_base_did_not_crash():
    """Tests absent at base beside only passing ones (a subtest named from the fixed code's
    output) are no crash: the rule leaves the run as it is."""
    base = run("base", {"alts::TestInfoServerName": "PASSED", "text::TestShout": "FAILED"})
    gold = run("gold", {**CRASH_GOLD, "text::TestShout": "PASSED"})
    verdict = judge([base], [gold], _module, crashes=True)
    assert verdict.fail_to_pass == ("text::TestShout",)


def test_a_crash_rerun_that_runs_the_tests_makes_them_flaky():
    selection = ("alts::TestAuthInfoFromPeer", "alts::TestInfoServerName",
                 "alts::TestNoProductNameFile")  # fmt: skip
    gold = [run("gold", CRASH_GOLD), run("gold", CRASH_GOLD, attempt=1, selection=selection)]
    again = run("base", {"alts::TestInfoServerName": "FAILED"}, attempt=1, selection=selection)
    kept = judge([_crashed_base(), again], gold, _module, crashes=True)
    assert kept.fail_to_pass == selection
    statuses = {test: "PASSED" for test in selection} | {"alts::TestInfoServerName": "FAILED"}
    ran = run("base", statuses, attempt=1, selection=selection)
    flaky = judge([_crashed_base(), ran], gold, _module, crashes=True)
    assert flaky.fail_to_pass == ("alts::TestInfoServerName",)
    assert set(flaky.flaky) == {"alts::TestAuthInfoFromPeer", "alts::TestNoProductNameFile"}


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
