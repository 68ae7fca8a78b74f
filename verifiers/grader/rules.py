"""The grader's rules, written once: what counts as passed, the verdict of a supervised run, and
the pytest options a graded run gets.

Standard library only and Python 3.9, because the same file runs inside a Harbor task's container
(``languages/python/in_container/harbor_grade.py`` imports it from beside itself); the host
imports it through ``verifiers/patch_verifier.py``, the languages' graded runs and
``verifiers/grading.py``.
"""

from __future__ import annotations

SUITE_RAN_EXIT_CODES = (0, 1)
SAME = "SAME AS "  # a twin sentinel's expected status: its original's (sentinels.py)
MAX_SELECTED = 400  # beyond this many graded tests, run the whole suite and read them from it


def selection(graded):
    """The tests named to the runner: the graded ones, or none (the whole suite) when too many."""
    return tuple(graded) if len(graded) <= MAX_SELECTED else ()


def counts_as_passed(status: str | None) -> bool:
    """trajforge's rule: a graded test counts only when it PASSED (SKIPPED, XFAIL, XPASS and a
    test missing from the report do not)."""
    return status == "PASSED"


def verdict(
    statuses, tampering, finished, exit_code, timed_out, graded, planted, stopped="", sep="::"
):
    """(resolved, reason, trusted) of one supervised run.

    ``statuses``: test id -> status from the channel; ``tampering``: the channel's signs of it;
    ``planted``: (test id, expected status) per sentinel, ``SAME`` + an id for a twin. A
    sentinel is bent when reported otherwise than planted (a twin: passed where its original did
    not, or the other way round), or not reported while tests of its file were (a file that did
    not collect reports none of them). ``stopped``: the test at whose failure the supervisor ended
    the run (fail-fast): never resolved, whatever else was reported; its sentinels are judged
    where they ran (one the stop cut off is not missing). ``sep``: what ends an id's file
    (" > " for a JS task's ids).
    """
    if timed_out:
        return False, "timed_out", True
    if tampering:
        return False, "forged_result", False
    for test_id, expected in planted:
        status = statuses.get(test_id)
        if status is not None and expected.startswith(SAME):  # a twin: as its original went
            original = statuses.get(expected[len(SAME) :])
            if original is not None and counts_as_passed(original) != counts_as_passed(status):
                return False, "forged_result", False
        elif status is not None:
            if status != expected:
                return False, "forged_result", False
        elif not stopped and any(t.split(sep)[0] == test_id.split(sep)[0] for t in statuses):
            return False, "forged_result", False
    if stopped:
        return False, "tests_failed", True
    if not statuses:
        return False, "suite_did_not_run", True
    failures = any(s in ("FAILED", "ERROR") for s in statuses.values())
    if exit_code == 0 and failures:  # a process that reports success over its failures
        return False, "forged_result", False
    if exit_code not in SUITE_RAN_EXIT_CODES or not finished:
        return False, "suite_failed", True
    if not all(counts_as_passed(statuses.get(t, "MISSING")) for t in graded):
        return False, "tests_failed", True
    return True, "resolved", True


def pytest_args(options, own, blocked, plugins, selection):
    """The task's options, the image's plugins named with ``-p`` (but those ``blocked`` or
    disabled by the options' ``-p no:``), the grader's own options, then the selection."""
    disabled = {options[i + 1][3:] for i, w in enumerate(options[:-1]) if w == "-p"} | {
        w[5:] for w in options if w.startswith("-pno:")
    }
    named = []
    for name, module in plugins:
        is_blocked = any(b in (name, module.split(".")[0]) for b in blocked)
        if not is_blocked and name not in disabled and module not in disabled:
            named += ["-p", module]
    return [*options, *named, *own, *selection]
