"""The statement checks: what a back-translated issue may not do, and garbage from a real model."""

from __future__ import annotations

from curated_factory import make_task
from trajforge.generators.issues.context import IssueContext, failure_excerpt
from trajforge.generators.issues.writer import check_statement

TASK = make_task(
    "acme/calc",
    1,
    patch=(
        "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
        "@@ -1,2 +1,2 @@ def add(a, b):\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    ),
)
CONTEXT = IssueContext("acme/calc", TASK.patch, {}, {}, frozenset({"add", "calc", "ops"}))
GOOD = (
    "`add` gives the wrong answer\n\nWhen I call `calc.ops.add(2, 3)` I get -1, but the sum of "
    "two and three should be 5."
)


def _check(text: str) -> str:
    return check_statement(text, TASK, CONTEXT, min_chars=40)


def test_a_grounded_bug_report_is_accepted():
    assert _check(GOOD) == "accepted"


def test_quoting_the_fix_or_the_bug_line_is_a_leak():
    assert _check(GOOD + " It should simply `return a + b`.") == "leaks_patch"
    assert _check(GOOD + " The line `return a - b` is wrong.") == "leaks_patch"


def test_naming_a_failing_test_is_a_leak():
    assert _check(GOOD + " See test_add_1 in the suite.") == "leaks_test"


def test_token_soup_from_a_random_weight_model_is_not_prose():
    # three answers a random-weight GGUF served by llama.cpp gave on real tasks
    for soup in (
        'floaassertE use", " been wer fro\x7f     we> yi py gitto confi% kwargs confi% tes',
        "outypfinalimport tes anreturn solamb so clasasse k\x0fthifun canbejs bu typitcomodule",
        "pa sysimport to fun elsemodu whatresel packaJ h names pyte paramli issuewill the kwargs "
        "fr open mod ritests filiwhac exceerrorzva iss thi errorassertEqua modul packaval",
    ):
        assert _check(soup) == "not_prose"


def test_a_report_about_something_else_is_ungrounded():
    text = "The documentation website is slow to load and the search box does not work for me."
    assert _check(text) == "ungrounded"


def test_too_short_is_empty():
    assert _check("add is broken") == "empty"


def test_failure_sections_are_found_in_coloured_pytest_output():
    log = (
        "\x1b[31m\x1b[1m____________ TestOps.test_add[1-2] ____________\x1b[0m\n"
        ">       assert add(1, 2) == 3\nE       assert -1 == 3\n"
        "\x1b[31m\x1b[1m____________ test_other ____________\x1b[0m\nE   boom\n"
    )
    excerpt = failure_excerpt(log, "tests/test_ops.py::TestOps::test_add[1-2]")
    assert excerpt == ">       assert add(1, 2) == 3\nE       assert -1 == 3"
