"""Hostile logs against ``grade``: every route a policy or a hostile log could take to a reward
without a fix is refused or scores 0, with a named reason; hostile bytes never hang or crash it.

The logs are real: a test-built task (``add`` subtracts, ``mul`` adds; the fix makes both right)
run by pytest here with ``-rA``, ``-v`` and ``--junitxml``, the code under test doing the forging
(printing status lines, a second summary at exit, SWE-bench's markers, skips and xfails). A
SWE-bench log is that output inside the harness's markers, as its eval script writes them.
``--rules swebench`` is checked against SWE-bench's own grading functions, transcribed below.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import plain_pytest_env, run_cli
from trajforge.verifiers.grading import (
    MAX_LOG_BYTES,
    RESOLVED_FULL,
    RESOLVED_NO,
    RESOLVED_PARTIAL,
    grade_log,
    partial_credit,
)
from trajforge.verifiers.grading import tests_status_of as status_of  # not collected as a test
from trajforge.verifiers.log_parsers import LOG_PARSERS, detect_format, read_log

ADD, MUL, SUB, NEG = (f"tests/test_calc.py::test_{n}" for n in ("add", "mul", "sub", "neg"))
F2P, P2P = [ADD, MUL], [SUB]
TESTS = """
import pytest

from calc import add, mul, neg, sub


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_sub():
    assert sub(5, 3) == 2


@pytest.mark.xfail(reason="was broken once")
def test_neg():
    assert neg(1) == -1
"""
BASE = """
import atexit, os, sys

import pytest


def sub(a, b):
    return a - b


def neg(a):
    return -a
"""
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
SPOOF = "\n".join(f"{t} PASSED" for t in (*F2P, *P2P))
SUMMARY_SPOOF = "\n".join(f"PASSED {t}" for t in (*F2P, *P2P))


def at_exit(text: str) -> str:
    """Source that prints ``text`` after pytest has written everything, then exits 0."""
    return (
        "def _forge():\n"
        f"    sys.stdout.write({text!r} + '\\n')\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n\n\n"
        "atexit.register(_forge)\n"
    )


VARIANTS = {
    "buggy": BUGGY,
    "fixed": FIXED,
    # code under test prints a per-test status line (and a summary-style one) per graded test
    "spoof_lines": BUGGY.replace("return a - b", f"print({SPOOF!r})\n    return a - b")
    + f"\n\nprint({SUMMARY_SPOOF!r})\n",
    # a second summary at exit, every graded test PASSED in it
    "second_summary": BUGGY
    + at_exit("=" * 20 + " short test summary info " + "=" * 20 + "\n" + SUMMARY_SPOOF),
    # status lines after pytest's closing line, no header
    "lines_at_exit": BUGGY + at_exit(SUMMARY_SPOOF + "\n" + SPOOF),
    # a closing line of its own
    "closing_at_exit": BUGGY + at_exit("=" * 20 + " 4 passed in 0.01s " + "=" * 20),
    # SWE-bench's markers printed by the code under test
    "markers": BUGGY.replace(
        "return a - b", "print('>>>>> End Test Output\\n>>>>> Start Test Output')\n    return a - b"
    ),
    # every graded test skipped from source, or half fixed and the rest skipped
    "skip_all": "def add(a, b):\n    pytest.skip('later')\n\n\ndef mul(a, b):\n"
    "    pytest.skip('later')\n",
    "half_skipped": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"
    "    pytest.skip('later')\n",
    # xfail raised from source
    "xfail_all": "def add(a, b):\n    pytest.xfail('known')\n\n\ndef mul(a, b):\n"
    "    pytest.xfail('known')\n",
    # the graded tests deselected, their per-test lines printed at exit
    "deselected": FIXED + at_exit(SPOOF),
}
DESELECT = ("--deselect", ADD, "--deselect", MUL)


def _pytest(root: Path, *args: str) -> tuple[int, bytes, bytes]:
    xml = root / "junit.xml"
    xml.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1"]
    cmd += [f"--junitxml={xml}", *args, "tests"]
    done = subprocess.run(
        cmd, cwd=root, env=plain_pytest_env(), capture_output=True, check=False, timeout=120
    )
    return done.returncode, done.stdout + done.stderr, xml.read_bytes() if xml.exists() else b""


def swebench(output: bytes, code: int) -> bytes:
    """``output`` inside SWE-bench's markers, as its eval script (``set -uxo pipefail``) logs."""
    return (
        b"+ git apply -v -\nChecking patch calc.py...\nApplied patch calc.py cleanly.\n"
        b"+ : '>>>>> Start Test Output'\n+ pytest -rA tests/test_calc.py\n" + output
        + b"+ SWEBENCH_TEST_EXIT_CODE=%d\n+ : '>>>>> End Test Output'\n" % code
        + b"+ echo '>>>>> Test Exit Code: %d'\n>>>>> Test Exit Code: %d\n" % (code, code)
        + b"+ git checkout abc123 tests/test_calc.py\nUpdated 1 path from 4d5e6f7\n"
    )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    """Per variant: its -rA log, -v log, -v -rA log, JUnit XML and SWE-bench log."""
    out: dict[str, dict[str, bytes]] = {}
    for name, code in VARIANTS.items():
        root = tmp_path_factory.mktemp(name)
        (root / "tests").mkdir()
        (root / "tests" / "test_calc.py").write_text(TESTS)
        (root / "calc.py").write_text(BASE + "\n\n" + code)
        extra = DESELECT if name == "deselected" else ()
        rc, log, xml = _pytest(root, "-rA", *extra)
        out[name] = {
            "rA": log,
            "xml": xml,
            "v": _pytest(root, "-v", *extra)[1],
            "v_rA": _pytest(root, "-v", "-rA", *extra)[1],
            "swebench": swebench(log, rc),
        }
    return out


def test_the_genuine_logs_grade_as_they_should(runs):
    for kind in ("rA", "xml", "v", "v_rA", "swebench"):
        fixed = grade_log(F2P, P2P, runs["fixed"][kind])
        assert fixed.resolution == RESOLVED_FULL, (kind, fixed.reason, fixed.detail)
        buggy = grade_log(F2P, P2P, runs["buggy"][kind])
        assert buggy.resolution == RESOLVED_NO and buggy.reason == "tests_failed", kind
        assert buggy.report["tests_status"]["FAIL_TO_PASS"]["failure"] == F2P


# --- spoofed status lines: the runner's summary decides --------------------------------------


@pytest.mark.parametrize("kind", ["rA", "v_rA", "swebench"])
def test_printed_status_lines_are_refused(runs, kind):
    """Code under test prints `path::test PASSED` (and `PASSED path::test`) per graded test:
    the summary says FAILED, so the log contradicts itself and is refused."""
    log = runs["spoof_lines"][kind]
    assert f"{ADD} PASSED".encode() in log
    graded = grade_log(F2P, P2P, log)
    assert graded.resolution == RESOLVED_NO and graded.reason == "ambiguous_log"
    assert ADD in graded.detail and "outside the summary" in graded.detail
    assert graded.report["resolved"] is False and "tests_status" not in graded.report
    assert grade_log(F2P, P2P, log, rules="swebench").reason == "ambiguous_log"


def test_a_status_line_never_outvotes_the_summary():
    """Even where no line contradicts it (the graded id is absent from a -rA summary that lists
    passes), a printed line does not decide: the summary is the only source."""
    log = "\n".join(
        [
            "collected 2 items",
            "",
            "tests/test_calc.py ..                                     [100%]",
            "=================== short test summary info ===================",
            f"PASSED {SUB}",
            "PASSED tests/test_calc.py::test_other",
            "===================== 2 passed in 0.01s ======================",
        ]
    ).encode()
    assert grade_log([ADD], [SUB], log).report["tests_status"]["FAIL_TO_PASS"]["failure"] == [ADD]
    printed = log.replace(b"collected 2 items", f"collected 2 items\n{ADD} PASSED".encode())
    refused = grade_log([ADD], [SUB], printed)
    assert refused.reason == "ambiguous_log" and "absent" in refused.detail


@pytest.mark.parametrize(
    "variant, why",
    [
        ("second_summary", "2 'short test summary info' headers"),
        ("lines_at_exit", "outside the summary"),
        ("closing_at_exit", "second pytest closing line"),
    ],
)
@pytest.mark.parametrize("kind", ["rA", "v_rA", "swebench"])
def test_forgeries_at_exit_are_refused(runs, variant, why, kind):
    log = runs[variant][kind]
    for rules in ("trajforge", "swebench"):
        graded = grade_log(F2P, P2P, log, rules=rules)
        assert graded.resolution == RESOLVED_NO, (variant, kind, rules)
        assert graded.reason == "ambiguous_log" and why in graded.detail, graded.detail


def test_deselected_tests_printed_as_passed_are_refused(runs):
    """No summary at all (everything that ran passed, no -rA): the per-test lines decide, but
    never more passes than pytest's own closing line counts."""
    log = runs["deselected"]["v"]
    assert b"short test summary info" not in log and b"2 deselected" in log
    graded = grade_log(F2P, P2P, log)
    assert graded.reason == "ambiguous_log" and "closing line counts 2" in graded.detail  # sub, neg


# --- SWE-bench's markers ----------------------------------------------------------------------


def test_markers_printed_by_the_code_under_test_are_refused(runs):
    graded = grade_log(F2P, P2P, runs["markers"]["swebench"])
    assert graded.reason == "ambiguous_log" and "markers" in graded.detail


@pytest.mark.parametrize(
    "shape, reason",
    [
        ("start start end", "ambiguous_log"),
        ("start end end", "ambiguous_log"),
        ("end start", "ambiguous_log"),
        ("start", "no_test_result"),
        ("end", "no_test_result"),
    ],
)
def test_markers_in_odd_places(runs, shape, reason):
    output = runs["fixed"]["rA"].decode()
    marks = {"start": ">>>>> Start Test Output", "end": ">>>>> End Test Output"}
    parts = [marks[word] for word in shape.split()]
    log = "\n".join([parts[0], output, *parts[1:]]).encode()
    graded = grade_log(F2P, P2P, log, log_format="swebench")
    assert graded.resolution == RESOLVED_NO and graded.reason == reason, graded.detail


def test_nested_markers_do_not_recurse():
    log = (">>>>> Start Test Output\n" * 5000 + ">>>>> End Test Output\n" * 5000).encode()
    with finishes_within(60):
        for parser in LOG_PARSERS.values():
            parser(log)
        graded = grade_log(F2P, P2P, log)
    assert graded.reason == "ambiguous_log"
    inner = b">>>>> Start Test Output\n>>>>> Start Test Output\nPASSED " + ADD.encode()
    assert grade_log([ADD], [], inner).reason == "ambiguous_log"


def test_an_exit_code_that_says_the_tests_failed(runs):
    """SWE-bench 5's check: the test command exited non-zero but the log reports no failure."""
    log = swebench(runs["fixed"]["rA"], 1)
    graded = grade_log(F2P, P2P, log)
    assert graded.reason == "exit_code_mismatch" and graded.report["resolved"] is False
    disagree = log.replace(b"+ echo '>>>>> Test Exit Code: 1'", b"+ echo '>>>>> Test Exit Code: 0'")
    assert grade_log(F2P, P2P, disagree).reason == "ambiguous_log"


# --- skips, xfails, xpasses: only PASSED counts -----------------------------------------------


@pytest.mark.parametrize("kind", ["rA", "xml", "v", "v_rA", "swebench"])
@pytest.mark.parametrize("rules", ["trajforge", "swebench"])
def test_every_graded_test_skipped_is_never_resolved(runs, kind, rules):
    graded = grade_log(F2P, [], runs["skip_all"][kind], rules=rules)
    assert graded.resolution == RESOLVED_NO and graded.report["resolved"] is False
    assert graded.reason in ("all_skipped", "tests_failed", "no_test_result")
    assert partial_credit(graded.tests_status or _nothing(), rules) == 0.0


def test_all_skipped_is_named(runs):
    graded = grade_log(F2P, [], runs["skip_all"]["xml"])
    assert graded.reason == "all_skipped" and "every graded test (2)" in graded.detail
    # SWE-bench's rules keep a skipped PASS_TO_PASS test: every graded test skipped is still no.
    swebench = grade_log([], F2P, runs["skip_all"]["xml"], rules="swebench")
    assert swebench.reason == "all_skipped" and swebench.report["resolved"] is False


@pytest.mark.parametrize("kind", ["xml", "v", "rA"])
def test_half_fixed_and_the_rest_skipped_scores_half(runs, kind):
    _, parsed, _ = read_log(runs["half_skipped"][kind])
    status = status_of(F2P, P2P, parsed.statuses)
    assert status["FAIL_TO_PASS"] == {"success": [ADD], "failure": [MUL]}
    assert partial_credit(status) == 0.5
    graded = grade_log(F2P, P2P, runs["half_skipped"][kind])
    assert graded.resolution == RESOLVED_PARTIAL and graded.report["resolved"] is False


@pytest.mark.parametrize("kind", ["xml", "v", "rA"])
def test_xfail_raised_from_source_scores_zero(runs, kind):
    graded = grade_log(F2P, P2P, runs["xfail_all"][kind])
    assert graded.resolution == RESOLVED_NO and graded.reason == "tests_failed"
    assert partial_credit(graded.tests_status or _nothing()) == 0.0
    # SWE-bench's rules count an XFAIL as a pass; that is theirs, and labelled so.
    assert grade_log(F2P, P2P, runs["xfail_all"][kind], rules="swebench").report["resolved"]


@pytest.mark.parametrize("kind", ["rA", "v", "v_rA"])
def test_an_xpass_is_not_a_pass(runs, kind):
    log = runs["fixed"][kind]
    assert b"XPASS" in log
    for rules in ("trajforge", "swebench"):  # SWE-bench's parser never reads XPASS: missing
        graded = grade_log([NEG], [], log, rules=rules)
        assert graded.report["tests_status"]["FAIL_TO_PASS"]["failure"] == [NEG], rules
    # validation reads the same parsers, and still sees an XPASS as PASSED
    assert LOG_PARSERS["pytest_log"](runs["fixed"]["rA"]).statuses[NEG] == "PASSED"


def test_an_empty_fail_to_pass_group_is_worth_nothing():
    status = status_of([], [SUB], {SUB: "PASSED"})
    assert partial_credit(status) == 0.0
    assert partial_credit(status, "swebench") == 1.0  # SWE-bench's compute_fail_to_pass
    graded = grade_log([], [SUB], b"=== short test summary info ===\nPASSED " + SUB.encode())
    assert graded.resolution == RESOLVED_NO and graded.reason == "tests_failed"


def _nothing() -> dict[str, dict[str, list[str]]]:
    return status_of(F2P, [], {})


# --- --rules swebench equals SWE-bench's own grading ------------------------------------------
# Transcribed from SWE-bench 5 (SWE-bench/SWE-bench, swebench/harness/grading.py and
# log_parsers/python.py at 7a21e05): parse_log_pytest, _resolve_case, test_passed,
# test_maintained, test_failed, get_eval_tests_report (PASS_AND_FAIL), get_resolution_status.

SB_STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")


def sb_parse_log_pytest(log: str) -> dict[str, str]:
    status_map = {}
    for line in log.split("\n"):
        if any(line.startswith(x) for x in SB_STATUSES):
            if line.startswith("FAILED"):
                line = line.replace(" - ", " ")
            case = line.split()
            if len(case) <= 1:
                continue
            if case[0] == "SKIPPED" and case[1].startswith("[") and case[1][1:-1].isdigit():
                continue
            status_map[case[1]] = case[0]
    return status_map


def sb_resolve_case(case: str, sm: dict[str, str]) -> str | None:
    if case in sm:
        return case
    if case.count("[") > case.count("]"):
        matches = [k for k in sm if k.startswith(case)]
        if matches and len({sm[k] in ("PASSED", "XFAIL") for k in matches}) == 1:
            return matches[0]
    return None


def sb_passed(case: str, sm: dict[str, str]) -> bool:
    key = sb_resolve_case(case, sm)
    return key is not None and sm[key] in ("PASSED", "XFAIL")


def sb_maintained(case: str, sm: dict[str, str]) -> bool:
    key = sb_resolve_case(case, sm)
    return sb_passed(case, sm) or (key is not None and sm[key] == "SKIPPED")


def sb_failed(case: str, sm: dict[str, str]) -> bool:
    key = sb_resolve_case(case, sm)
    return key is None or sm[key] in ("FAILED", "ERROR", "SKIPPED")


def sb_tests_report(sm: dict[str, str], f2p: list[str], p2p: list[str]) -> dict:
    report: dict[str, dict[str, list[str]]] = {}
    for group, tests, ok in (
        ("FAIL_TO_PASS", f2p, sb_passed),
        ("PASS_TO_PASS", p2p, sb_maintained),
    ):
        success = [t for t in tests if ok(t, sm)]
        failure = [t for t in tests if not ok(t, sm) and sb_failed(t, sm)]
        report[group] = {"success": success, "failure": failure}
    report["FAIL_TO_FAIL"] = {"success": [], "failure": []}
    report["PASS_TO_FAIL"] = {"success": [], "failure": []}
    return report


def sb_resolved(report: dict) -> bool:
    def share(group: dict) -> float:
        total = len(group["success"]) + len(group["failure"])
        return 1 if total == 0 else len(group["success"]) / total

    return share(report["FAIL_TO_PASS"]) == 1 and share(report["PASS_TO_PASS"]) == 1


def test_swebench_rules_equal_swebench_on_real_logs(runs):
    for variant in ("buggy", "fixed", "half_skipped", "xfail_all", "skip_all"):
        log = runs[variant]["swebench"]
        content = log.decode()
        sm = sb_parse_log_pytest(content.split(">>>>> Start Test Output")[1].split(">>>>> End")[0])
        for f2p, p2p in ((F2P, P2P), ([ADD], [SUB, NEG]), ([NEG], [ADD]), ([MUL], [])):
            theirs = sb_tests_report(sm, f2p, p2p)
            ours = grade_log(f2p, p2p, log, rules="swebench")
            assert ours.report["tests_status"] == theirs, (variant, f2p, p2p)
            skipped_all = all(sm.get(t) == "SKIPPED" for t in (*f2p, *p2p))
            assert ours.report["resolved"] is (sb_resolved(theirs) and not skipped_all)


def test_swebench_rules_equal_swebench_on_a_sample_of_status_maps():
    rng = random.Random(26)
    ids = ["t.py::a", "t.py::b", "t.py::c[x-1]", "t.py::c[x-2]", "t.py::c[y", "t.py::d"]
    statuses = (*SB_STATUSES, "XPASS", None)
    for _ in range(2000):
        sm = {t: s for t in ids if (s := rng.choice(statuses)) is not None}
        f2p = rng.sample(ids, rng.randint(0, 3))
        p2p = rng.sample([t for t in ids if t not in f2p], rng.randint(0, 2))
        theirs_sm = {t: s for t, s in sm.items() if s != "XPASS"}  # their parser never reads it
        ours = status_of(f2p, p2p, sm, rules="swebench")
        assert ours == sb_tests_report(theirs_sm, f2p, p2p), (sm, f2p, p2p)


# --- hostile bytes: no hang, no crash ---------------------------------------------------------


@contextlib.contextmanager
def finishes_within(seconds: int) -> Iterator[None]:
    """Fail the test (never assert a time) if the block is still running after ``seconds``."""

    def hung(signum, frame):
        raise AssertionError(f"still running after {seconds}s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


N = 64 * 1024
HOSTILE_LINES = {
    "ids": "a.py::" * (N // 6) + " x",
    "ids_and_words": "a.py::" * (N // 12) + " PASSED (" * (N // 18),
    "verbose_reason": "a.py::t" + " PASSED (" * (N // 9),
    "summary_brackets": "PASSED a.py::t[" + "] x" * (N // 3),
    "subfailed": "SUBFAILED[" + "] (" * (N // 3) + " a::",
    "subfailed_parens": "SUBFAILED" + "(" * N,
    "xdist": "[gw0] [ 1%] PASSED " + "a.py::" * (N // 6) + " ",
    "sugar": " " + "a.py::" * (N // 6) + " s",
    "sugar_marks": " a.py::t" + " s " * (N // 3),
    "progress": "a.py::t PASSED [" + " " * N,
    "ansi": "\x1b[" + "1;" * (N // 2),
    "closing": "= " + "1" * N + " passed in 1s =",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LINES))
def test_a_64kb_line_finishes(name):
    line = HOSTILE_LINES[name]
    log = (f"=== short test summary info ===\n{line}\n{line}\n").encode()
    with finishes_within(60):
        for parser in LOG_PARSERS.values():
            parser(log)
            parser(line.encode())
        detect_format(log)
        graded = grade_log([ADD], [SUB], log)
        grade_log([ADD], [SUB], line.encode())
    assert graded.report["resolved"] is False


def test_megabytes_of_hostile_lines_finish():
    log = "\n".join(HOSTILE_LINES.values()).encode() * 24  # about 18 MB
    with finishes_within(60):
        graded = grade_log([ADD], [SUB], log)
    assert graded.report["resolved"] is False


def test_a_large_real_log_grades_the_same(runs):
    """A real -rA log behind megabytes of test output grades as the log alone does."""
    noise = b"".join(b"captured output line %d of a chatty test\n" % i for i in range(200_000))
    log = noise + runs["fixed"]["rA"]
    with finishes_within(60):
        assert grade_log(F2P, P2P, log).resolution == RESOLVED_FULL


@pytest.mark.parametrize(
    "mangle",
    [
        lambda log: log.replace(b"\n", b"\r\n"),
        lambda log: log.replace(b"collected", b"\x00\xed\xa0\x80\xff collected"),
        lambda log: b"\xed\xa0\x80\x00" * 1000 + log + b"\x00\xed\xb0\x80",
        lambda log: log.replace(b"\n", b"\x1b[0m\x1b[1;31m\n\x1b[?25l"),
    ],
    ids=["crlf", "surrogates-and-nul-inside", "surrogates-and-nul-around", "ansi"],
)
def test_noise_does_not_change_the_verdict(runs, mangle):
    for variant, resolution in (("fixed", RESOLVED_FULL), ("buggy", RESOLVED_NO)):
        for kind in ("rA", "v", "swebench"):
            graded = grade_log(F2P, P2P, mangle(runs[variant][kind]))
            assert graded.resolution == resolution, (variant, kind, graded.detail)


def test_colour_logs_grade_like_plain_ones(tmp_path: Path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(TESTS)
    (tmp_path / "calc.py").write_text(BASE + "\n\n" + BUGGY.replace("a - b", "a + b"))
    _, log, _ = _pytest(tmp_path, "-rA", "--color=yes")
    assert b"\x1b[" in log
    graded = grade_log([ADD], [SUB], log)
    assert graded.resolution == RESOLVED_PARTIAL or graded.resolution == RESOLVED_FULL
    assert graded.report["tests_status"]["FAIL_TO_PASS"]["success"] == [ADD]


# --- the command ------------------------------------------------------------------------------


def _task(tmp_path: Path) -> None:
    task = {"instance_id": "calc-1", "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
    (tmp_path / "task.json").write_text(json.dumps(task))


def test_the_command_names_the_refusal_in_one_line(runs, tmp_path: Path):
    _task(tmp_path)
    (tmp_path / "log.txt").write_bytes(runs["second_summary"]["rA"])
    done = run_cli(
        "grade", "--task", "task.json", "--log", "log.txt", "--output", "r.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.strip().splitlines()
    assert "calc-1: not resolved, refused: ambiguous_log: 2 'short test summary info'" in line
    assert "trajforge rules" in line
    assert json.loads((tmp_path / "r.json").read_text())["calc-1"]["resolved"] is False


def test_the_command_refuses_an_absurd_log_unread(tmp_path: Path):
    _task(tmp_path)
    with open(tmp_path / "big.txt", "wb") as handle:
        handle.truncate(MAX_LOG_BYTES + 1)  # sparse: nothing is written
    done = run_cli(
        "grade", "--task", "task.json", "--log", "big.txt", "--output", "r.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "log_too_large" in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_the_command_survives_a_hostile_task_row(runs, tmp_path: Path):
    (tmp_path / "log.txt").write_bytes(runs["fixed"]["rA"])
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    done = run_cli(
        "grade", "--task", "deep.json", "--log", "log.txt", "--output", "r.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    odd = {"instance_id": "calc\ud800\n-1", "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    done = run_cli(
        "grade", "--task", "odd.json", "--log", "log.txt", "--output", "r.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        len(done.stdout.strip().splitlines()) == 1 and "calc\\ud800\\n-1: resolved" in done.stdout
    )


# --- the reward service: partial is a JSON boolean ---------------------------------------------


class _NeverGrades:
    def evaluate(self, task, patch, partial):  # pragma: no cover - a bad request never gets here
        raise AssertionError("graded a malformed request")


@pytest.mark.parametrize("partial", ['"false"', '"true"', "0", "1", "null", "[]", "{}"])
def test_partial_must_be_a_json_boolean(partial):
    from trajforge.pipelines.evaluation.service import RewardService

    service = RewardService(_NeverGrades(), {"calc-1": object()}, workers=1)  # type: ignore[arg-type]
    try:
        body = f'{{"instance_id": "calc-1", "patch": "x", "partial": {partial}}}'.encode()
        answer = service.reward(body)
    finally:
        service.close()
    assert answer.status == 400 and answer.body["reason"] == "malformed_request"
    assert "partial must be true or false" in answer.body["detail"]
    assert len(answer.body["detail"].splitlines()) == 1
    assert service.counts["refused:malformed_request"] == 1


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000 + b"]" * 100_000, b'{"instance_id": "calc-1", "patch": "\\ud800"}', b"\xff"],
    ids=["nested", "lone_surrogate", "not_utf8"],
)
def test_an_unreadable_request_body_is_a_one_line_refusal(body):
    from trajforge.pipelines.evaluation.service import RewardService

    service = RewardService(_NeverGrades(), {"calc-1": object()}, workers=1)  # type: ignore[arg-type]
    try:
        answer = service.reward(body)
    finally:
        service.close()
    assert (answer.status, answer.body["reason"]) == (400, "malformed_request")
    assert len(answer.body["detail"].splitlines()) == 1


def test_the_clients_send_only_a_boolean_partial():
    from trajforge.pipelines.evaluation.rewards import RewardClient, reward, trl_reward_func

    with pytest.raises(TypeError, match="partial must be True or False"):
        RewardClient("http://127.0.0.1:9").score("calc-1", "x", partial="false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="partial must be True or False"):
        reward(object(), "x", partial="false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="partial must be True or False"):
        trl_reward_func("http://127.0.0.1:9", partial=1)  # type: ignore[arg-type]
