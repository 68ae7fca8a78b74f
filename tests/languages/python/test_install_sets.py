"""The rules that pick what to install and how to repair it, on real git repositories (no Docker).

Each case is one of issue 14's failure classes seen on public libraries: a dev group that pulls in
docs tools (filelock), a tox env with a VCS dependency (pluggy), a test importing an optional
extra's module under another name (pyparsing's ``railroad``), a suite from before pytest 9.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_env_profile import REPO, commit
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.languages.python.install_sets import (
    INSTALL_PYTEST,
    UPGRADE_PIP,
    decode_set,
    runner_requirement,
)
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.generators.languages.python.repairs import requirement_for, requirement_for_option
from trajforge.verifiers.collection import parse_collection

pytestmark = [pytest.mark.docker, pytest.mark.podman]

PACKAGE = """\
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "widget"
    version = "1"
    """


def _sets(repo: Path, sha: str) -> list[tuple[str, tuple[str, ...]]]:
    profile = detect_profile(str(repo), sha, REPO)
    sets = [(profile.install_set, profile.install)]
    return sets + [(s.name, s.commands) for s in map(decode_set, profile.alternatives)]


def test_a_dev_group_including_docs_installs_only_what_tests_need(tmp_path: Path) -> None:
    pyproject = (
        PACKAGE
        + """\
        [dependency-groups]
        docs = ["sphinx>=99", "furo"]
        type = ["mypy"]
        test = ["pytest>=8", "hypothesis", "covdefaults"]
        dev = [{include-group = "docs"}, {include-group = "test"}, {include-group = "type"}]
        """
    )
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    (name, install), *narrower = _sets(tmp_path, sha)
    assert name == "tests+tox/nox"
    assert install == (
        UPGRADE_PIP,
        "pip install -e .",
        "pip install 'pytest>=8' hypothesis covdefaults",
        RELINK,  # a test dependency may have replaced the editable install with PyPI's
        INSTALL_PYTEST,
    )
    assert [n for n, _ in narrower] == ["extras"]  # the package alone, without the test group
    legacy = detect_profile(str(tmp_path), sha, REPO, legacy=True).install
    assert any("'sphinx>=99'" in c for c in legacy)  # the old rule expanded dev: filelock's failure
    assert detect_profile(str(tmp_path), sha, REPO, legacy=True).origin == "legacy"


def test_dev_group_is_used_when_no_test_group_exists_but_its_tools_are_not(tmp_path: Path) -> None:
    pyproject = (
        PACKAGE
        + """\
        [dependency-groups]
        dev = ["pytest", "sphinx>=99", "ruff", "types-requests", "freezegun"]
        """
    )
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    install = _sets(tmp_path, sha)[0][1]
    assert "pip install pytest freezegun" in install
    legacy = detect_profile(str(tmp_path), sha, REPO, legacy=True).install
    assert any("sphinx>=99" in c for c in legacy)  # what broke filelock


def test_a_tox_env_with_a_vcs_dependency_is_skipped(tmp_path: Path) -> None:
    tox = """\
        [tox]
        envlist = py3{9,10,11,12}, pytestmain
        [testenv]
        deps =
            pytest
            pytestmain: git+https://github.com/pytest-dev/pytest.git@main
            hypothesis
            mypy
        """
    sha = commit(tmp_path, {"pyproject.toml": PACKAGE, "tox.ini": tox})
    install = _sets(tmp_path, sha)[0][1]
    assert "pip install pytest hypothesis mypy" in install  # the test env's own mypy stays
    assert not any("git+" in c for c in install)
    legacy = detect_profile(str(tmp_path), sha, REPO, legacy=True).install
    assert any("git+https" in c for c in legacy)  # what broke pluggy


def test_a_requirements_file_naming_a_url_or_another_index_is_inlined(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": PACKAGE,
        "requirements-test.txt": (
            "--extra-index-url https://pypi.internal.example/simple\n"
            "pytest>=7  # runner\n"
            "corp-fixtures @ https://pypi.internal.example/corp_fixtures-1.0.tar.gz\n"
            "-r requirements-base.txt\n"
        ),
        "requirements-base.txt": "attrs\n",
    }
    sha = commit(tmp_path, files)
    install = _sets(tmp_path, sha)[0][1]
    assert "pip install -r requirements-base.txt" in install
    assert "pip install 'pytest>=7'" in install
    assert not any("internal.example" in c for c in install)


def test_an_extra_named_pytest_is_a_test_extra(tmp_path: Path) -> None:
    pyproject = PACKAGE + (
        "    [project.optional-dependencies]\n"
        '    pytest = ["pytest-django"]\n'
        '    postgres = ["psycopg"]\n'
    )
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    name, commands = _sets(tmp_path, sha)[0]
    assert "pip install -e '.[pytest]'" in commands, (name, commands)


def test_ranked_sets_narrow_step_by_step(tmp_path: Path) -> None:
    pyproject = (
        PACKAGE
        + """\
        [project.optional-dependencies]
        test = ["pytest"]
        [dependency-groups]
        test = ["hypothesis"]
        """
    )
    tox = "[testenv]\ndeps = pytest-randomly\n"
    files = {"pyproject.toml": pyproject, "tox.ini": tox, "requirements.txt": "attrs\n"}
    sha = commit(tmp_path, files)
    sets = _sets(tmp_path, sha)
    assert [name for name, _ in sets] == [
        "tests+tox/nox",
        "tests",
        "extras",
        "package",
        "package-only",
    ]
    assert sets[-1][1] == (UPGRADE_PIP, "pip install -e .", INSTALL_PYTEST)
    assert all(s[1][-1] == INSTALL_PYTEST for s in sets)


def test_the_runner_is_pinned_by_the_commits_era(tmp_path: Path) -> None:
    assert runner_requirement("3.11", "2026-01-10") == INSTALL_PYTEST
    assert (
        runner_requirement("3.11", "2025-03-01") == "pip install 'pytest<9' coverage pytest-timeout"
    )
    assert (
        runner_requirement("3.11", "2023-05-01") == "pip install 'pytest<8' coverage pytest-timeout"
    )
    assert (
        runner_requirement("3.11", "2019-01-01") == "pip install 'pytest<8' coverage pytest-timeout"
    )
    assert runner_requirement("3.9", "2019-01-01") == (
        "pip install 'pytest<7' coverage 'pytest-timeout<2.3'"
    )
    assert (
        runner_requirement("3.13", "2023-05-01") == "pip install 'pytest<9' coverage pytest-timeout"
    )
    assert runner_requirement("3.11", None) == INSTALL_PYTEST
    old = {"GIT_COMMITTER_DATE": "2023-05-01T00:00:00", "GIT_AUTHOR_DATE": "2023-05-01T00:00:00"}
    os.environ.update(old)
    try:
        sha = commit(tmp_path, {"pyproject.toml": PACKAGE})
    finally:
        for key in old:
            del os.environ[key]
    assert _sets(tmp_path, sha)[0][1][-1] == "pip install 'pytest<8' coverage pytest-timeout"


def test_a_module_is_found_among_the_projects_own_declarations(tmp_path: Path) -> None:
    pyproject = (
        PACKAGE
        + """\
        [project.optional-dependencies]
        diagrams = ["railroad-diagrams>=3", "jinja2"]
        cli = ["click>=8"]
        all = ["widget[cli,diagrams]"]
        [dependency-groups]
        extras = ["python-dateutil<3"]
        """
    )
    sha = commit(tmp_path, {"pyproject.toml": pyproject, "requirements-dev.txt": "PyYAML==6.0\n"})
    declared = detect_profile(str(tmp_path), sha, REPO).declared
    assert requirement_for("click", declared) == ("click>=8", "declared by the project")
    assert requirement_for("railroad", declared) == (
        "railroad-diagrams>=3",
        "declared by the project",
    )
    assert requirement_for("dateutil.parser", declared) == (
        "python-dateutil<3",
        "declared by the project",
    )
    assert requirement_for("yaml", declared) == ("PyYAML==6.0", "declared by the project")
    assert requirement_for("bs4", declared) == ("beautifulsoup4", "import-name map")
    assert requirement_for("nothing_declares_me", declared) is None
    assert requirement_for("widget", declared) is None  # the project is never installed from PyPI


COLLECTED = """\
tests/test_a.py: 2
tests/test_c.py: 1

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_b.py _______________________
ImportError while importing test module '/repo/tests/test_b.py'.
Traceback:
tests/test_b.py:1: in <module>
    import railroad
E   ModuleNotFoundError: No module named 'railroad'
_______________________ ERROR collecting tests/test_c.py _______________________
/venv/lib/python3.11/site-packages/_pytest/nodes.py:280: in warn
    warnings.warn_explicit(
E   pytest.PytestCollectionWarning: cannot collect test class 'TestHelper' because it has a \
__init__ constructor (from: tests/test_c.py)
=========================== short test summary info ============================
ERROR tests/test_b.py
ERROR tests/test_c.py::TestHelper - pytest.PytestCollectionWarning: cannot co...
"""

CONFTEST = """\
ImportError while loading conftest '/repo/tests/conftest.py'.
tests/conftest.py:1: in <module>
    import pydantic
E   ModuleNotFoundError: No module named 'pydantic'
"""


def test_collection_output_names_each_failing_file_and_why() -> None:
    parsed = parse_collection(COLLECTED)
    assert parsed.collected == 3
    assert [(e.path, e.missing, e.runner_warning) for e in parsed.errors] == [
        ("tests/test_b.py", "railroad", ""),
        ("tests/test_c.py", "", "PytestCollectionWarning"),
    ]
    assert parsed.errors[0].error == "ModuleNotFoundError: No module named 'railroad'"
    conftest = parse_collection(CONFTEST).conftest_error
    assert conftest is not None
    assert (conftest.path, conftest.missing) == ("tests/conftest.py", "pydantic")


USAGE = """\
ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]
python -m pytest: error: unrecognized arguments: --cov=parse --cov-report=term-missing -n 2
  inifile: /repo/.pytest.ini
"""


def test_options_pytest_refuses_are_traced_to_their_plugin(tmp_path: Path) -> None:
    parsed = parse_collection(USAGE)
    assert parsed.unknown_options == ("--cov=parse", "--cov-report=term-missing", "-n")
    assert parsed.collected == 0
    files = {"pyproject.toml": PACKAGE, "tests/requirements.txt": "pytest-cov>=4\n"}
    sha = commit(tmp_path, files)
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert "pip install -r tests/requirements.txt" in profile.install  # a test folder's own
    declared = profile.declared
    assert requirement_for_option("--cov=parse", declared) == (
        "pytest-cov>=4",
        "declared by the project",
    )
    assert requirement_for_option("--cov-report=x", declared) == (
        "pytest-cov>=4",
        "declared by the project",
    )
    assert requirement_for_option("-n", declared) == ("pytest-xdist", "pytest option map")
    assert requirement_for_option("--no-such-option", declared) is None
    legacy = detect_profile(str(tmp_path), sha, REPO, legacy=True).install
    assert not any("tests/requirements.txt" in c for c in legacy)


DEPRECATED = """\
tests/test_a.py: 2

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_table.py _______________________
E   pytest.PytestRemovedIn10Warning: Passing a non-Collection iterable to the 'argvalues' \
parameter of @pytest.mark.parametrize is deprecated.
E   Please convert to a list or tuple.
E   See https://docs.pytest.org/en/stable/deprecations.html#parametrize-iterators
"""


def test_a_multi_line_warning_is_named_by_its_own_line() -> None:
    (error,) = parse_collection(DEPRECATED).errors
    assert error.runner_warning == "PytestRemovedIn10Warning"
    assert error.error.startswith("pytest.PytestRemovedIn10Warning: Passing a non-Collection")
