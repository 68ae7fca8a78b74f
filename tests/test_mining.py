"""Commit mining on a real test-built repository."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from repo_factory import RepoBuilder
from trajforge.generators.mining import commits
from trajforge.generators.mining.commits import list_commits, mine_commit
from trajforge.generators.mining.diff_split import is_test_path
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.errors import SourceError
from trajforge.schemas.params import MineParams
from trajforge.schemas.rejection import Rejection


def _mine(path: Path, sha: str, **limits) -> Candidate | Rejection:
    repo = open_source(str(path), SourceOptions(cache_dir=str(path.parent / "cache")))
    return mine_commit(repo, sha, MineParams(**limits))


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_x.py", True),
        ("pkg/tests/data/input.json", True),
        ("pkg/foo_test.py", True),
        ("conftest.py", True),
        ("pkg/testing_utils.py", False),
        ("pkg/core.py", False),
        ("docs/testing.rst", False),
    ],
)
def test_test_paths(path, is_test):
    assert is_test_path(path) is is_test


def test_fix_commit_splits_into_patch_and_test_patch(calc_repo):
    path, shas = calc_repo
    candidate = _mine(path, shas["fix_add"])
    assert isinstance(candidate, Candidate)
    assert candidate.base_commit == shas["initial"]
    assert "calc/ops.py" in candidate.patch and "tests/" not in candidate.patch
    assert "tests/test_ops.py" in candidate.test_patch and "calc/ops.py" not in candidate.test_patch
    assert candidate.meta.commit == shas["fix_add"]
    assert candidate.meta.message == "Fix add: it subtracted"
    assert candidate.origin == "commit"
    assert candidate.repo == "local/calc"
    assert _mine(path, shas["fix_add"]).candidate_id == candidate.candidate_id  # content id


def test_commit_touching_only_tests_is_not_a_candidate(calc_repo):
    path, shas = calc_repo
    result = _mine(path, shas["tests_only"])
    assert isinstance(result, Rejection) and result.reason == "no_source_change"


def test_root_commit_is_not_a_candidate(calc_repo):
    path, shas = calc_repo
    result = _mine(path, shas["initial"])
    assert isinstance(result, Rejection) and result.reason == "root_commit"


def test_non_utf8_commit_message_is_decoded(calc_repo):
    path, shas = calc_repo
    candidate = _mine(path, shas["latin1"])
    assert isinstance(candidate, Candidate)
    # git re-decodes Latin-1 it recognises; anything else becomes U+FFFD. Never a crash.
    assert candidate.meta.message in ("Fix sub for caf\u00e9 users", "Fix sub for caf\ufffd users")
    candidate.meta.message.encode("utf-8")  # valid text for Arrow


def test_limits_and_skipped_files(tmp_path):
    repo = RepoBuilder(tmp_path / "lib")
    repo.commit("init", {"lib.py": "x = 1\n", "tests/test_lib.py": "def test(): pass\n"})
    sha = repo.commit(
        "change with vendored code",
        {
            "lib.py": "x = 2\n",
            "tests/test_lib.py": "def test():\n    assert True\n",
            "vendor/dep.py": "y = 1\n" * 50,
            "logo.png": None if False else "\x89PNG",  # committed as text; the glob list decides
        },
    )
    candidate = _mine(repo.path, sha)
    assert isinstance(candidate, Candidate)
    assert candidate.meta.skipped_files == ("vendor/dep.py",)
    assert "vendor/dep.py" not in candidate.patch
    too_big = _mine(repo.path, sha, max_lines=2)
    assert isinstance(too_big, Rejection) and too_big.reason == "too_large"
    too_many = _mine(repo.path, sha, max_files=1)
    assert isinstance(too_many, Rejection) and too_many.reason == "too_many_files"


def test_a_huge_one_line_file_is_refused_from_its_size_before_any_diff(tmp_path, monkeypatch):
    repo = RepoBuilder(tmp_path / "lib")
    repo.commit("init", {"lib.py": "x = 1\n", "tests/test_lib.py": "def test(): pass\n"})
    huge = "DATA = '" + "x" * (2 * 1024 * 1024) + "'\n"  # one line: max_lines lets it through
    test = "def test():\n    assert True\n"
    added = repo.commit(
        "add a blob", {"lib.py": "x = 2\n", "data.py": huge, "tests/test_lib.py": test}
    )
    removed = repo.commit("drop it", {"data.py": None, "tests/test_lib.py": "def test(): pass\n"})
    vendored = repo.commit(
        "vendor it", {"lib.py": "x = 3\n", "vendor/data.py": huge, "tests/t.py": test}
    )

    def never(*args, **kwargs):
        raise AssertionError("a diff was read")

    monkeypatch.setattr(commits, "changed_files", never)
    monkeypatch.setattr(commits, "_diff", never)
    for sha in (added, removed):  # a deletion's diff holds the whole old file
        result = _mine(repo.path, sha)
        assert isinstance(result, Rejection) and result.reason == "too_large", result
        assert f"data.py is {len(huge)} bytes > mine.max_file_bytes=1000000" in result.detail
    total = _mine(repo.path, added, max_file_bytes=3_000_000, max_bytes=2_000_000)
    assert isinstance(total, Rejection) and "mine.max_bytes=2000000" in total.detail
    monkeypatch.undo()
    candidate = _mine(repo.path, vendored)  # skipped files do not count
    assert isinstance(candidate, Candidate) and candidate.meta.skipped_files == ("vendor/data.py",)


def test_commit_selection(calc_repo):
    path, shas = calc_repo
    repo = open_source(str(path), SourceOptions(cache_dir=str(path.parent / "cache")))
    newest_two, none = list_commits(repo, MineParams(max_commits=2))
    assert len(newest_two) == 2 and not none
    picked, rejected = list_commits(repo, MineParams(commits=[shas["fix_add"][:10], "deadbeef"]))
    assert picked == [shas["fix_add"]]
    assert [r.reason for r in rejected] == ["unknown_commit"]


@pytest.mark.parametrize("make", ["missing", "not_git"])
def test_bad_local_sources_are_one_line_errors(tmp_path, make):
    target = tmp_path / "x"
    if make == "not_git":
        target.mkdir()
    with pytest.raises(SourceError) as info:
        open_source(str(target), SourceOptions(cache_dir=str(tmp_path / "cache")))
    assert str(target) in str(info.value) and "\n" not in str(info.value)


def test_unreachable_url_is_a_source_error(tmp_path):
    with pytest.raises(SourceError) as info:
        open_source("file:///nonexistent/repo.git", SourceOptions(cache_dir=str(tmp_path)))
    assert info.value.reason == "repo_unreachable"


def _fix_repo(path: Path) -> Path:
    repo = RepoBuilder(path)
    repo.commit("init", {"lib.py": "x = 1\n", "tests/test_lib.py": "def test(): pass\n"})
    test = "from lib import x\n\ndef test():\n    assert x == 2\n"
    repo.commit("fix x", {"lib.py": "x = 2\n", "tests/test_lib.py": test})
    return path


def test_two_checkouts_that_share_a_name_are_said_and_one_checkout_is_mined_once(tmp_path):
    """``/a/repo`` and ``/b/repo`` are both ``local/repo``: they stay two sources (their tasks
    and images are keyed by where each comes from: test_hardening_security), and one line says
    their per-repository figures merge. The same checkout named twice (a trailing slash, a
    relative path) is one source, mined once."""
    first, second = _fix_repo(tmp_path / "a" / "repo"), _fix_repo(tmp_path / "b" / "repo")
    both = run_cli("mine", "--repo", str(first), "--repo", str(second),
                   "--output", str(tmp_path / "both"), cwd=tmp_path)  # fmt: skip
    assert both.returncode == 0, both.stderr[-2000:]
    said = [line for line in both.stderr.splitlines() if "both named local/repo" in line]
    assert len(said) == 1 and str(first) in said[0] and str(second) in said[0], both.stderr
    mined = pq.read_table(tmp_path / "both" / "candidates").to_pylist()
    assert sorted(c["source"] for c in mined) == sorted([str(first), str(second)])

    once = run_cli("mine", "--repo", str(first), "--repo", f"{first}/", "--repo", "a/repo",
                   "--output", str(tmp_path / "once"), cwd=tmp_path)  # fmt: skip
    assert once.returncode == 0, once.stderr[-2000:]
    assert "both named" not in once.stderr
    mined = pq.read_table(tmp_path / "once" / "candidates").to_pylist()
    assert [c["repo"] for c in mined] == ["local/repo"]
