"""The Python chosen from a project's own evidence: the rule on texts, then detect_profile on real
git repositories whose evidence sits in CI files, lock files and classifiers."""

from __future__ import annotations

from pathlib import Path

import pytest
from reach_repos import DatedRepo
from trajforge.generators.environments.commit_files import ProfileError
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.generators.languages.python.python_choice import (
    NoSupportedPython,
    choose,
    declared_ranges,
    is_evidence_file,
    lock_head,
    named_pythons,
    poetry_range,
)

ALL = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
WHERE = "acme/widget@abc"


def pick(ranges=(), named=(), committed: str | None = "2026-06-01", pythons=ALL) -> str:
    return choose(list(ranges), list(named), committed, "3.11", pythons, WHERE).python


# --- ranges -------------------------------------------------------------------------------------


def test_requires_python_upper_bound_is_kept() -> None:
    assert pick([("requires-python", ">=3.7,<3.10")]) == "3.9"
    assert pick([("requires-python", ">=3.12")]) == "3.14"
    assert pick([("requires-python", ">=3.8")]) == "3.11"  # the default when it fits
    assert pick([("requires-python", ">=3.8.1")]) == "3.11"  # a patch floor keeps its minor


def test_every_declared_range_must_hold() -> None:
    texts = {"uv.lock": 'version = 1\nrequires-python = ">=3.10, <3.12"\n'}
    ranges = declared_ranges(">=3.8", None, texts)
    assert ranges == [("requires-python", ">=3.8"), ("uv.lock", ">=3.10, <3.12")]
    assert pick(ranges, committed=None) == "3.11"
    assert pick(declared_ranges(">=3.8", "^3.12", {})) == "3.14"


def test_poetry_constraints_become_pep440() -> None:
    assert poetry_range("^3.8") == ">=3.8,<4.0"
    assert poetry_range("~3.9") == ">=3.9,<3.10"
    assert poetry_range(">=3.8,<3.12") == ">=3.8,<3.12"
    assert poetry_range(">=3.8 <3.11") == ">=3.8,<3.11"
    assert poetry_range("3.10.*") == "==3.10.*"
    lock = '[[package]]\nname = "a"\n\n[metadata]\npython-versions = "~3.10"\ncontent-hash = "x"\n'
    head = lock_head("poetry.lock", lock)
    assert head.startswith("[metadata]") and "[[package]]" not in head
    assert pick(declared_ranges(None, None, {"poetry.lock": head})) == "3.10"
    uv = 'version = 1\nrequires-python = ">=3.13"\n\n[[package]]\nname = "a"\n' * 2
    assert lock_head("uv.lock", uv) == 'version = 1\nrequires-python = ">=3.13"\n\n'


def test_no_supported_python_is_one_line_naming_the_range() -> None:
    with pytest.raises(NoSupportedPython) as caught:
        pick([("requires-python", "<3.8")])
    message = str(caught.value)
    assert caught.value.reason == "no_supported_python"
    assert "\n" not in message and WHERE in message and "<3.8" in message and "3.14" in message
    assert "environment.pythons" in message  # what to do


def test_an_unreadable_range_is_no_evidence() -> None:
    assert pick([("requires-python", "3 or so")]) == "3.11"


# --- named pythons ------------------------------------------------------------------------------


def test_classifiers_narrow_the_range() -> None:
    classifiers = [f"Programming Language :: Python :: 3.{m}" for m in (12, 13)]
    named = named_pythons({}, classifiers)
    assert named == [("classifiers", ["3.12", "3.13"])]
    choice = choose([("requires-python", ">=3.9")], named, "2026-06-01", "3.11", ALL, WHERE)
    assert choice.python == "3.13"
    assert choice.why == "requires-python >=3.9; classifiers 3.12,3.13"
    setup_py = 'classifiers=["Programming Language :: Python :: 3.9"]'
    assert pick(named=named_pythons({"setup.py": setup_py})) == "3.9"


def test_ci_matrix_in_workflows() -> None:
    inline = "jobs:\n  t:\n    strategy:\n      matrix:\n        python-version: ['3.8', '3.9']\n"
    block = 'jobs:\n  t:\n    with:\n      python-version:\n        - "3.10"\n        - 3.12\n'
    named = named_pythons({".github/workflows/ci.yml": inline, ".github/workflows/b.yaml": block})
    assert named == [("CI", ["3.8", "3.9", "3.10", "3.12"])]
    assert pick(named=named) == "3.12"
    templated = {".github/workflows/ci.yml": "python-version: ${{ matrix.python }}\n"}
    assert named_pythons(templated) == []


def test_tox_nox_and_pins() -> None:
    tox = "[tox]\nenvlist = py{38,39}, lint\n  py310\nisolated_build = true\n"
    assert named_pythons({"tox.ini": tox}) == [("tox", ["3.8", "3.9", "3.10"])]
    nox = '@nox.session(python=["3.9", "3.10"])\ndef tests(session):\n    pass\n'
    assert named_pythons({"noxfile.py": nox}) == [("nox", ["3.9", "3.10"])]
    assert named_pythons({".python-version": "3.12.4\n"}) == [(".python-version", ["3.12"])]
    assert named_pythons({"runtime.txt": "python-3.8.10\n"}) == [("runtime.txt", ["3.8"])]
    assert pick(named=named_pythons({"runtime.txt": "python-3.8.10\n"})) == "3.8"


def test_named_but_unsupported_pythons_get_the_nearest() -> None:
    named = [("classifiers", ["3.6", "3.7"])]
    assert pick([("requires-python", ">=3.6")], named) == "3.8"


def test_named_pythons_outside_the_range_do_not_narrow() -> None:
    assert pick([("requires-python", ">=3.12")], [("tox", ["3.8"])]) == "3.12"


def test_evidence_files() -> None:
    assert is_evidence_file(".github/workflows/tests.yml")
    assert is_evidence_file("uv.lock") and is_evidence_file(".python-version")
    assert not is_evidence_file("docs/workflows/x.yml") and not is_evidence_file("setup.py")


# --- the commit's date --------------------------------------------------------------------------


def test_pythons_released_after_the_commit_are_dropped() -> None:
    assert pick(committed="2021-03-01") == "3.9"  # 3.10 came out in October 2021
    assert pick(committed="2019-11-01") == "3.8"
    choice = choose([("requires-python", ">=3.9")], [], "2023-05-01", "3.11", ALL, WHERE)
    assert (choice.python, choice.why) == ("3.11", "requires-python >=3.9; committed 2023-05-01")


def test_the_date_never_drops_every_candidate() -> None:
    assert pick([("requires-python", ">=3.13")], committed="2020-01-01") == "3.14"


def test_no_evidence_is_the_default() -> None:
    choice = choose([], [], None, "3.11", ALL, WHERE)
    assert (choice.python, choice.why) == ("3.11", "no evidence: the default")


# --- detect_profile reads the evidence at the commit --------------------------------------------


def test_detect_profile_reads_ci_and_lock_files(tmp_path: Path) -> None:
    repo = DatedRepo(tmp_path / "era", start="2021-03-01")
    workflow = "jobs:\n  t:\n    strategy:\n      matrix:\n        python: ['3.8', '3.9', '3.10']\n"
    sha = repo.commit(
        "old project",
        {
            "pyproject.toml": '[project]\nname = "era"\nversion = "1"\nrequires-python = ">=3.7"\n',
            ".github/workflows/ci.yml": workflow,
            "tests/test_x.py": "def test_x():\n    assert True\n",
        },
    )
    profile = detect_profile(str(repo.path), sha, "local/era", pythons=ALL)
    assert profile.python == "3.9"
    assert profile.log == (
        "python 3.9: requires-python >=3.7; CI 3.8,3.9,3.10; committed 2021-03-01"
    )  # 3.10 came out after the commit
    assert "trajforge-base:py3.9" in profile.recipe
    locked = repo.commit(
        "lock it",
        {"uv.lock": 'version = 1\nrequires-python = ">=3.8, <3.9"\n\n[[package]]\nname = "a"\n'},
    )
    assert detect_profile(str(repo.path), locked, "local/era", pythons=ALL).python == "3.8"


def test_detect_profile_no_supported_python_names_the_lock(tmp_path: Path) -> None:
    repo = DatedRepo(tmp_path / "locked")
    sha = repo.commit("x", {"poetry.lock": '[metadata]\npython-versions = "^3.15"\n'})
    with pytest.raises(ProfileError) as caught:
        detect_profile(str(repo.path), sha, "local/locked", pythons=ALL)
    assert caught.value.reason == "no_supported_python"
    assert "poetry.lock >=3.15,<4.0" in str(caught.value)
