"""A task row's ``language`` picks who grades it (verifiers/languages/registry.py). A row is hostile
input: a name the grader does not know is refused in one line before any container starts, never
graded by another language's weaker rules (before the registry, any name but "javascript" was
graded as Python). On a real repository written here, with the real local sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_factory import build_add_fix_repo
from trajforge.schemas.params import Params
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE, TaskInstance
from trajforge.verifiers.grader.gradable import grading_gap
from trajforge.verifiers.languages.registry import BY_NAME, UnknownLanguage, grading_for
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.factory import make_sandbox

HOSTILE = ["cobol", "../python", "Python", "python\n", " javascript", "javascript\x00", "golang"]


def test_a_row_that_names_no_language_is_the_default_ones():
    assert grading_for("") is BY_NAME[DEFAULT_LANGUAGE]
    assert {name: grading_for(name).name for name in BY_NAME} == {n: n for n in BY_NAME}


@pytest.mark.parametrize("name", HOSTILE)
def test_an_unknown_language_is_one_line_and_no_grade(name: str):
    with pytest.raises(UnknownLanguage) as raised:
        grading_for(name)
    why = str(raised.value)
    assert raised.value.reason == "unsupported_test_cmd"
    assert "\n" not in why and why.startswith("grader: no language named ")
    assert grading_gap(name, "pytest", "python -m pytest") == why  # export leaves it out


@pytest.mark.parametrize("name", ["../python", "cobol"])
def test_verify_patch_refuses_an_unknown_language_before_any_run(tmp_path: Path, name: str):
    repo = build_add_fix_repo(tmp_path / "calc")
    base = repo.git("rev-parse", "HEAD~1")
    task = TaskInstance(
        instance_id="calc__add-1", repo="local/calc", base_commit=base,
        patch=repo.git("diff", "HEAD~1", "HEAD", "--", "calc") + "\n",
        test_patch=repo.git("diff", "HEAD~1", "HEAD", "--", "tests") + "\n",
        problem_statement="add subtracts", hints_text="", created_at="2024-01-01T00:00:00Z",
        FAIL_TO_PASS=("tests/test_ops.py::test_add",), PASS_TO_PASS=(),
        environment_setup_commit=base, image_name="trajforge-env:nowhere",
        test_cmd="python -m pytest", origin="commit", profile_id="p", candidate_id="c",
        source=str(repo.path), flaky_tests=(), difficulty=None, language=name,
    )  # fmt: skip
    params = Params(cache_dir=str(tmp_path / "cache"))
    params.sandbox.kind = "local"
    sandbox = make_sandbox(params.check(), quiet=True)
    try:
        with pytest.raises(UnknownLanguage):
            verify_patch(sandbox, task, str(repo.path), task.patch, 30, None)
    finally:
        sandbox.close()
