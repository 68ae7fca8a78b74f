"""Grading leaves the task's repository as it was: ``scratch_objects`` keeps every blob and tree a
grade writes out of the repository's object store.

A real repository, real patches, the same git calls a grade makes (three trees from patches, the
paths between them, a tree rebuilt in a throwaway index, the archive the container gets), ten
times with ten different patches: the ``.git`` folder is byte for byte what it was, and the
archive still holds what the patches wrote. Without the scratch directory the same grades add
objects (what the issue measured), so the test proves the mechanism, not a quiet repository.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from repo_factory import GIT_ENV, OPS_BUGGY, TESTS_BASE, RepoBuilder, pyproject
from trajforge.verifiers.sandbox.git_tree import (
    GitError,
    apply_patches,
    archive,
    git,
    scratch_objects,
)

CONTEXT = " \n \n def mul(a, b):\n"


def _fix(n: int) -> str:
    return (
        "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n"
        f"-    return a - b\n+    return a + b  # grade {n}\n{CONTEXT}"
    )


def _new_test(n: int) -> str:
    return (
        f"--- /dev/null\n+++ b/tests/deep/er/test_g{n}.py\n@@ -0,0 +1,2 @@\n"
        f"+def test_g{n}():\n+    assert {n} == {n}\n"
    )


def _git_files(repo: Path) -> dict[str, bytes]:
    """Every file under .git with its bytes (the index and logs included)."""
    root = repo / ".git"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _grade(repo: str, base: str, n: int, env: dict[str, str]) -> dict[str, bytes]:
    """The git side of one grade (as ``verify_patch`` makes it); the archive's files."""
    start = apply_patches(repo, base, [], env=env)
    changed = apply_patches(repo, base, [_fix(n)], env=env)
    clean = apply_patches(repo, base, [_new_test(n)], env=env)
    paths = git(repo, "diff-tree", "-r", "-z", "--name-only", start, changed, env=env)
    listed = git(repo, "ls-tree", "-r", "-z", "--full-tree", changed, "--", "calc/ops.py", env=env)
    meta, path = listed.rstrip(b"\0").split(b"\t", 1)
    mode, _kind, blob = meta.split(b" ")
    with tempfile.TemporaryDirectory() as tmp:
        index = {**env, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(repo, "read-tree", clean, env=index)
        git(repo, "update-index", "--index-info", input=b"%s %s\t%s\n" % (mode, blob, path),
            env=index)  # fmt: skip
        tree = git(repo, "write-tree", env=index).decode().strip()
    assert paths.rstrip(b"\0") == b"calc/ops.py"
    with tarfile.open(fileobj=io.BytesIO(archive(repo, tree, "repo/", env=env))) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def _repo(path: Path) -> tuple[str, str]:
    builder = RepoBuilder(path)
    base = builder.commit(
        "calc",
        {"pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS_BUGGY,
         "tests/test_ops.py": TESTS_BASE},
    )  # fmt: skip
    builder.git("gc", "-q")  # packed, as a clone is: every new object would be a new file
    return str(path), base


def test_ten_grades_leave_the_repository_byte_for_byte_as_it_was(tmp_path):
    repo, base = _repo(tmp_path / "calc")
    before = _git_files(tmp_path / "calc")
    for n in range(10):
        with scratch_objects(repo) as env:
            files = _grade(repo, base, n, env)
            scratch = Path(env["GIT_OBJECT_DIRECTORY"])
            assert any(p.is_file() for p in scratch.rglob("*"))  # the objects went here
        assert not scratch.exists()  # and went away with the block
        assert f"# grade {n}".encode() in files["repo/calc/ops.py"]
        assert files[f"repo/tests/deep/er/test_g{n}.py"].startswith(b"def test_g")
        assert files["repo/tests/test_ops.py"] == TESTS_BASE.encode()
    assert _git_files(tmp_path / "calc") == before


def test_without_a_scratch_directory_the_same_grades_grow_the_repository(tmp_path):
    repo, base = _repo(tmp_path / "calc")
    before = _git_files(tmp_path / "calc")
    for n in range(3):
        _grade(repo, base, n, {})
    grown = set(_git_files(tmp_path / "calc")) - set(before)
    assert len([p for p in grown if p.startswith("objects/")]) >= 3 * 4  # blobs and trees


def test_a_tree_written_in_scratch_is_gone_after_the_block(tmp_path):
    repo, base = _repo(tmp_path / "calc")
    with scratch_objects(repo) as env:
        tree = apply_patches(repo, base, [_fix(1)], env=env)
        assert git(repo, "cat-file", "-t", tree, env=env).strip() == b"tree"
    with pytest.raises(GitError):  # only the scratch directory held it
        git(repo, "cat-file", "-t", tree)


def test_a_clone_that_borrows_its_objects_and_a_path_with_a_colon(tmp_path):
    """A clone made with --shared reads its objects through its own alternates; git follows
    them from the repository's object store, so grading such a clone works the same."""
    origin, base = _repo(tmp_path / "origin")
    clone = tmp_path / "with:colon" / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--shared", origin, str(clone)],
        check=True, env={**os.environ, **GIT_ENV},
    )  # fmt: skip
    before = _git_files(clone)
    origin_before = _git_files(tmp_path / "origin")
    with scratch_objects(str(clone)) as env:
        files = _grade(str(clone), base, 7, env)
    assert b"# grade 7" in files["repo/calc/ops.py"]
    assert _git_files(clone) == before
    assert _git_files(tmp_path / "origin") == origin_before
