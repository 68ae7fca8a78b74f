"""A JS site's profile, decided from its commit's tree (no Docker): the commit's own date picks
the era's node, what decides the install keys the profile, an unrunnable project is one line."""

from __future__ import annotations

import json

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.languages.javascript.profile import detect_at, js_profile, selected_files
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params

PACKAGE = {"name": "calc", "scripts": {"test": "jest"}, "devDependencies": {"jest": "29.7.0"}}


def test_the_commit_decides_not_the_working_copy(tmp_path):
    repo = RepoBuilder(tmp_path / "calc")
    # RepoBuilder dates its commits 2024-01-01, 02, ...: before mid-2024, the era of node 18
    old = repo.commit(
        "calc",
        {"package.json": json.dumps(PACKAGE), "src/calc.js": "exports.add = (a, b) => a + b;\n"},
    )
    src_only = repo.commit("src", {"src/calc.js": "// more\n"})
    locked = repo.commit("lock", {"package-lock.json": "{}\n"})
    gone = repo.commit("python now", {"package.json": None, "setup.py": "print()\n"})

    assert language_at(str(repo.path), old).name == "javascript"
    assert language_at(str(repo.path), gone).name == "python"  # HEAD; the old commit stays JS
    detection = detect_at(str(repo.path), old)
    # the commit's own date chose (without it: the newest node)
    assert (detection.runner, detection.runtime) == ("jest", "18")
    assert "2024-01-01" in detection.why
    assert detect_at(str(repo.path), locked).lockfile == "package-lock.json"

    params = Params()
    first = js_profile(str(repo.path), old, "calc", "file:///calc", params)
    assert (first.language, first.runner, first.runtime, first.status) == (
        "javascript", "jest", "18", "detected",
    )  # fmt: skip
    assert "node_modules/.bin/jest" in first.test_cmd and "--outputFile=" in first.test_cmd
    assert first.image.endswith(first.profile_id)
    # a commit that changes only source shares the image; one whose lock changes does not
    same = js_profile(str(repo.path), src_only, "calc", "file:///calc", params)
    assert (same.profile_id, same.image) == (first.profile_id, first.image)
    assert js_profile(str(repo.path), locked, "calc", "file:///calc", params).profile_id != (
        first.profile_id
    )
    # another source with the same files never shares it
    other = js_profile(str(repo.path), old, "calc", "file:///elsewhere", params)
    assert other.profile_id != first.profile_id


def test_a_project_without_a_runner_is_one_line(tmp_path):
    repo = RepoBuilder(tmp_path / "plain")
    commit = repo.commit("no tests", {"package.json": json.dumps({"name": "plain"})})
    with pytest.raises(UserError) as caught:
        js_profile(str(repo.path), commit, "plain", "file:///plain", Params())
    assert caught.value.reason == "unsupported_runner"
    assert len(str(caught.value).splitlines()) == 1


def test_a_selection_runs_its_tests_files_once_each():
    selection = ["b.test.js > x > one", "a.test.js > two", "b.test.js > x > three"]
    assert selected_files(selection) == ["a.test.js", "b.test.js"]
