"""Which test modules a clean run could not import, read from the run itself (no engine)."""

from __future__ import annotations

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.languages.python.clean_exclusions import failed_modules, without_modules

LOG = """\
==================================== ERRORS ====================================
___________________ ERROR collecting tests/test_generated.py ___________________
ImportError while importing test module '/repo/tests/test_generated.py'.
tests/test_generated.py:1: in <module>
    from generated_cases import CASES
E   ModuleNotFoundError: No module named 'generated_cases'
=========================== short test summary info ============================
ERROR tests/test_generated.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
"""


def run(errors: tuple[str, ...], suite_ran: bool = False, log: str = LOG) -> TestRun:
    return TestRun(
        "r", "c", "p", "clean", 0, (), 2, suite_ran, False, 1.0, (), errors, "digest", log
    )


def test_a_module_that_cannot_import_is_named_with_its_error() -> None:
    assert failed_modules(run(("tests/test_generated.py",))) == [
        ("tests/test_generated.py", "ModuleNotFoundError: No module named 'generated_cases'")
    ]


def test_a_failing_conftest_or_a_run_that_ran_leaves_nothing_out() -> None:
    assert failed_modules(run(("tests/conftest.py",))) == []
    assert failed_modules(run(("tests",))) == []  # a folder: its conftest failed
    assert failed_modules(run(("tests/test_generated.py",), suite_ran=True)) == []
    assert failed_modules(run(())) == []


def test_left_out_modules_are_ignored_and_listed() -> None:
    profile = EnvProfile(
        profile_id="p", repo="local/x", python="3.11", install=(), test_cmd="python -m pytest",
        image="i", status="built", log="", setup_commit="abc",
        excluded=("tests/test_vendor.py: ImportError: x",),
    )  # fmt: skip
    narrower = without_modules(profile, [("tests/test_generated.py", "No module named 'g'")])
    assert narrower.test_cmd == "python -m pytest --ignore=tests/test_generated.py"
    assert narrower.excluded == (
        "tests/test_vendor.py: ImportError: x",
        "tests/test_generated.py: No module named 'g' (at the clean run)",
    )
