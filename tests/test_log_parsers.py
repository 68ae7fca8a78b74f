"""Log parsers against real pytest runs: node ids must be the ones pytest itself reports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import plain_pytest_env
from trajforge.schemas.test_run import STATUSES
from trajforge.verifiers.log_parsers import (
    LOG_PARSERS,
    ParsedLog,
    get_parser,
    parse_junit_xml,
    parse_pytest_log,
    read_log,
)

NESTED = """
import unittest

import pytest


class TestOuter:
    class TestInner:
        def test_deep(self):
            pass

    def test_one(self):
        pass


@pytest.mark.parametrize(
    "x", ["a[b]", "with space", "x::y", "a - b", "1.5", "\\u00fcn\\u00ef", "bad"]
)
def test_param(x):
    assert x != "bad"


class TestUnit(unittest.TestCase):
    def test_ok(self):
        pass

    def test_fail(self):
        self.fail("no")

    @unittest.skip("why")
    def test_skip(self):
        pass

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


def test_xfail_imperative():
    pytest.xfail("imperative")


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass


@pytest.mark.xfail
def test_xpass():
    pass


@pytest.mark.skip(reason="nah")
def test_skip():
    pass


@pytest.fixture
def setup_boom():
    raise RuntimeError("setup boom")


@pytest.fixture
def teardown_boom():
    yield
    raise RuntimeError("teardown boom")


def test_setup_error(setup_boom):
    pass


def test_teardown_error(teardown_boom):
    pass


def test_fail_and_teardown_error(teardown_boom):
    assert False
"""

MAIN_PROJECT = {
    "pytest.ini": "[pytest]\n",
    "pkg/__init__.py": "",
    "pkg/sub/__init__.py": "",
    "pkg/sub/test_nested.py": NESTED,
    "flat/test_flat.py": "class TestFlat:\n    def test_m(self):\n        pass\n\n\n"
    "def test_f():\n    pass\n",
    # test_inherited's <testcase file=...> names base_tests.py, not the module it was collected in
    "tests/unit/base_tests.py": "class BaseTests:\n    def test_inherited(self):\n        pass\n",
    "tests/unit/test_child.py": "from base_tests import BaseTests\n\n\n"
    "class TestChild(BaseTests):\n    def test_own(self):\n        pass\n",
    "tests/v1.2/test_dotted_dir.py": "def test_d():\n    pass\n",
}

M = "pkg/sub/test_nested.py"
MAIN_EXPECTED = {
    "flat/test_flat.py::TestFlat::test_m": "PASSED",
    "flat/test_flat.py::test_f": "PASSED",
    f"{M}::TestOuter::TestInner::test_deep": "PASSED",
    f"{M}::TestOuter::test_one": "PASSED",
    f"{M}::test_param[a[b]]": "PASSED",
    f"{M}::test_param[with space]": "PASSED",
    f"{M}::test_param[x::y]": "PASSED",
    f"{M}::test_param[a - b]": "PASSED",
    f"{M}::test_param[1.5]": "PASSED",
    f"{M}::test_param[\\xfcn\\xef]": "PASSED",  # pytest escapes non-ASCII ids by default
    f"{M}::test_param[bad]": "FAILED",
    f"{M}::TestUnit::test_ok": "PASSED",
    f"{M}::TestUnit::test_fail": "FAILED",
    f"{M}::TestUnit::test_skip": "SKIPPED",
    f"{M}::TestUnit::test_subtests": "FAILED",
    f"{M}::test_xfail": "XFAIL",
    f"{M}::test_xfail_imperative": "XFAIL",
    f"{M}::test_xpass_strict": "FAILED",
    f"{M}::test_xpass": "PASSED",
    f"{M}::test_skip": "SKIPPED",
    f"{M}::test_setup_error": "ERROR",
    f"{M}::test_teardown_error": "ERROR",
    f"{M}::test_fail_and_teardown_error": "FAILED",
    "tests/unit/test_child.py::TestChild::test_inherited": "PASSED",
    "tests/unit/test_child.py::TestChild::test_own": "PASSED",
    "tests/v1.2/test_dotted_dir.py::test_d": "PASSED",
}
# The -rA summary folds skips into `SKIPPED [n] file:line: reason`, with no node id.
MAIN_EXPECTED_FROM_LOG = {k: v for k, v in MAIN_EXPECTED.items() if v != "SKIPPED"}

ERRORS_PROJECT = {
    "pytest.ini": "[pytest]\n",
    "test_good.py": "def test_ok():\n    pass\n",
    "pkg/__init__.py": "",
    "pkg/test_bad_import.py": "import no_such_module_xyz\n\n\ndef test_never():\n    pass\n",
    "test_syntax.py": "def test_(:\n",
    "brokenpkg/__init__.py": "raise ImportError('package init')\n",
    "brokenpkg/test_in_broken.py": "def test_never():\n    pass\n",
    "confbad/conftest.py": "raise RuntimeError('conftest boom')\n",
    "confbad/test_c.py": "def test_never():\n    pass\n",
    "test_module_skip.py": "import pytest\n\npytest.skip('all', allow_module_level=True)\n\n\n"
    "def test_never():\n    pass\n",
    "test_class_error.py": "import pytest\n\n\nclass TestBroken:\n"
    "    @pytest.mark.parametrize('nope', [1])\n    def test_x(self):\n        pass\n\n\n"
    "def test_top():\n    pass\n",
}
MODULE_ERRORS = {
    "pkg/test_bad_import.py",
    "test_syntax.py",
    "brokenpkg/test_in_broken.py",  # a failing package __init__ is charged to its modules
    "confbad",  # a failing conftest.py is charged to its directory
}
CLASS_ERROR = "test_class_error.py::TestBroken"


def write_project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _env() -> dict[str, str]:
    return plain_pytest_env(PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1")


def run_pytest(cwd: Path, xml: Path, *extra: str) -> tuple[int, bytes, str]:
    """The pipeline's test command; returns (exit code, JUnit XML, log)."""
    cmd = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider"]
    cmd += ["-o", "junit_family=xunit1", f"--junitxml={xml}", *extra]
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, encoding="utf-8")
    return proc.returncode, xml.read_bytes(), proc.stdout + proc.stderr


def collected_ids(cwd: Path) -> set[str]:
    """Node ids as pytest itself lists them."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, encoding="utf-8")
    return {line for line in proc.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def main_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, bytes, str]:
    project = write_project(tmp_path_factory.mktemp("main"), MAIN_PROJECT)
    rc, xml, log = run_pytest(project, project.parent / "main.xml")
    return project, rc, xml, log


def test_junit_node_ids_and_statuses(main_run: tuple[Path, int, bytes, str]) -> None:
    project, rc, xml, _ = main_run
    assert rc == 1
    parsed = parse_junit_xml(xml)
    assert set(parsed.statuses) == collected_ids(project)
    assert parsed.statuses == MAIN_EXPECTED
    assert parsed.collection_errors == ()
    assert set(parsed.statuses.values()) <= set(STATUSES)


def test_log_node_ids_and_statuses(main_run: tuple[Path, int, bytes, str]) -> None:
    _, _, _, log = main_run
    parsed = parse_pytest_log(log)
    assert parsed.statuses == MAIN_EXPECTED_FROM_LOG
    assert parsed.collection_errors == ()
    # An XPASS stays PASSED for validation; grading sees it apart.
    assert parsed.xpassed == {f"{M}::test_xpass"} and parsed.problem == ""


SUBTESTS = """
def test_sub(subtests):
    for i in range(3):
        with subtests.test(msg="m", i=i):
            assert i != 1


def test_sub_ok(subtests):
    with subtests.test(i=0):
        pass
"""


@pytest.mark.parametrize("args", [["-rA"], ["-v"], ["-v", "-rA"]], ids=["rA", "v", "v-rA"])
def test_grading_reads_real_logs_as_the_xml_says(tmp_path: Path, args: list[str]) -> None:
    """read_log (what grading reads) finds no contradiction in a genuine log, in any of the
    shapes pytest writes: teardown errors, xfail/xpass, unittest and pytest 9 subtests."""
    files = dict(MAIN_PROJECT)
    if int(pytest.__version__.split(".")[0]) >= 9:  # subtests are built in from pytest 9
        files["pkg/sub/test_subtests.py"] = SUBTESTS
    project = write_project(tmp_path / "p", files)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1"]
    cmd += [f"--junitxml={tmp_path / 'x.xml'}", *args]
    proc = subprocess.run(cmd, cwd=project, env=_env(), capture_output=True)
    xml = parse_junit_xml((tmp_path / "x.xml").read_bytes()).statuses
    name, parsed, _ = read_log(proc.stdout + proc.stderr)
    assert parsed.problem == ""
    assert name == ("pytest_verbose" if args == ["-v"] else "pytest_log")
    # -rA names no skipped test; -v names every test
    seen = xml if args == ["-v"] else {t: s for t, s in xml.items() if s != "SKIPPED"}
    assert parsed.statuses == seen
    assert parsed.xpassed == {f"{M}::test_xpass"}


def test_log_with_colours(main_run: tuple[Path, int, bytes, str], tmp_path: Path) -> None:
    project, *_ = main_run
    _, _, log = run_pytest(project, tmp_path / "x.xml", "--color=yes")
    assert "\x1b[" in log
    assert parse_pytest_log(log).statuses == MAIN_EXPECTED_FROM_LOG


def test_xunit2_without_file_attribute(
    main_run: tuple[Path, int, bytes, str], tmp_path: Path
) -> None:
    """Best effort from classname alone; a dot in a directory name is what it cannot undo."""
    project, *_ = main_run
    _, xml, _ = run_pytest(project, tmp_path / "x.xml", "-o", "junit_family=xunit2")
    assert b' file="' not in xml
    statuses = parse_junit_xml(xml).statuses
    expected = {k: v for k, v in MAIN_EXPECTED.items() if "v1.2" not in k}
    assert {k: v for k, v in statuses.items() if "v1" not in k} == expected
    assert statuses["tests/v1/2/test_dotted_dir.py::test_d"] == "PASSED"


def test_unicode_ids_unescaped(tmp_path: Path) -> None:
    files = {
        "pytest.ini": "[pytest]\n"
        "disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n",
        "test_u.py": "import pytest\n\n\n"
        "@pytest.mark.parametrize('x', ['\u00fcn\u00ef', '\u65e5\u672c \u8a9e', 'ok'])\n"
        "def test_u(x):\n    assert x != 'ok'\n",
    }
    project = write_project(tmp_path / "p", files)
    _, xml, log = run_pytest(project, tmp_path / "x.xml")
    expected = {
        "test_u.py::test_u[\u00fcn\u00ef]": "PASSED",
        "test_u.py::test_u[\u65e5\u672c \u8a9e]": "PASSED",
        "test_u.py::test_u[ok]": "FAILED",
    }
    assert set(expected) == collected_ids(project)
    assert parse_junit_xml(xml).statuses == expected
    assert parse_pytest_log(log).statuses == expected
    assert LOG_PARSERS["pytest_log"](log.encode()).statuses == expected


def test_rootdir_relative_ids_from_a_subdirectory(tmp_path: Path) -> None:
    """JUnit ids are rootdir-relative, like --collect-only; the -rA summary's are cwd-relative."""
    project = write_project(tmp_path / "p", MAIN_PROJECT)
    _, xml, log = run_pytest(project / "tests", tmp_path / "x.xml")
    expected = {k: v for k, v in MAIN_EXPECTED.items() if k.startswith("tests/")}
    assert set(expected) == collected_ids(project / "tests")
    assert parse_junit_xml(xml).statuses == expected
    from_log = {k.removeprefix("tests/"): v for k, v in expected.items()}
    assert parse_pytest_log(log).statuses == from_log


def test_collection_errors_stop_the_run(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", ERRORS_PROJECT)
    rc, xml, log = run_pytest(project, tmp_path / "x.xml")
    assert rc == 2  # interrupted: nothing ran
    for parsed in (parse_junit_xml(xml), parse_pytest_log(log)):
        assert parsed.statuses == {}
        assert set(parsed.collection_errors) == MODULE_ERRORS | {CLASS_ERROR}
        assert len(parsed.collection_errors) == len(set(parsed.collection_errors))
    # xunit2 has no file attribute: a module path is rebuilt from its dotted name, a directory not.
    _, xml, _ = run_pytest(project, tmp_path / "x2.xml", "-o", "junit_family=xunit2")
    expected = MODULE_ERRORS - {"confbad"} | {"confbad.py", CLASS_ERROR}
    assert set(parse_junit_xml(xml).collection_errors) == expected


def test_collection_errors_with_continue(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", ERRORS_PROJECT)
    rc, xml, log = run_pytest(project, tmp_path / "x.xml", "--continue-on-collection-errors")
    assert rc == 1
    ran = {"test_good.py::test_ok": "PASSED", "test_class_error.py::test_top": "PASSED"}
    junit = parse_junit_xml(xml)
    assert junit.statuses == ran  # the module-level skip is no test and no error
    assert set(junit.collection_errors) == MODULE_ERRORS | {CLASS_ERROR}
    # Once tests ran, the summary line of a class that failed to collect looks like a test error.
    from_log = parse_pytest_log(log)
    assert from_log.statuses == {**ran, CLASS_ERROR: "ERROR"}
    assert set(from_log.collection_errors) == MODULE_ERRORS


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
<testsuites><testsuite><testcase classname="t" name="&b;" file="t.py"/></testsuite></testsuites>
"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY e SYSTEM "file:///etc/passwd">]>
<testsuites><testsuite><testcase classname="t" name="&e;" file="t.py"/></testsuite></testsuites>
"""


@pytest.mark.parametrize(
    "xml",
    [b"", b"not xml", b"<testsuites><testsuite><testcase", BOMB, EXTERNAL, b"<html/>"],
    ids=["empty", "garbage", "truncated", "entity-bomb", "external-entity", "not-junit"],
)
def test_malformed_xml_gives_empty_result(xml: bytes) -> None:
    assert parse_junit_xml(xml) == ParsedLog({}, ())


def test_truncated_real_xml(main_run: tuple[Path, int, bytes, str]) -> None:
    _, _, xml, _ = main_run
    assert parse_junit_xml(xml[: len(xml) // 2]) == ParsedLog({}, ())


def test_log_lines_outside_the_summary_are_ignored() -> None:
    log = "\n".join(
        [
            "PASSED t.py::printed_by_a_test",
            "=========== short test summary info ===========",
            "\x1b[32mPASSED\x1b[0m t.py::\x1b[1mtest_a\x1b[0m",
            "XPASS(strict) t.py::test_old_pytest_strict",
            "FAILED t.py::test_p[x - y] - assert [1] == [2]",
            "SKIPPED [1] t.py:3: reason with t.py::test_a",
            "SUBFAILED[msg] (i=(1, 2)) t.py::test_s - AssertionError",
            "PASSED t.py::test_s",
            "======== 2 failed, 1 passed in 0.01s ========",
        ]
    )
    assert parse_pytest_log(log) == ParsedLog(
        {
            "t.py::test_a": "PASSED",
            "t.py::test_old_pytest_strict": "FAILED",
            "t.py::test_p[x - y]": "FAILED",
            "t.py::test_s": "FAILED",
        },
        (),
    )


def test_registry() -> None:
    assert get_parser("junit_xml") is parse_junit_xml
    assert set(LOG_PARSERS) == {
        "junit_xml", "pytest_log", "pytest_verbose", "pytest_xdist", "pytest_sugar", "swebench"
    }  # fmt: skip
    with pytest.raises(KeyError, match="junit_xml, pytest_log, pytest_sugar"):
        get_parser("nope")
