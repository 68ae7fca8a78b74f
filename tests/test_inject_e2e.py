"""Bug injection end to end: a real repo, real mutants, real containers, coverage-guided."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from full_suite import validate_mutations_full_suite
from repo_factory import RepoBuilder
from trajforge.generators.bugs.injector import inject_snapshot
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.diff import unified_diff
from trajforge.schemas.params import InjectParams, ValidateParams, load_params
from trajforge.verifiers.languages.python.mutants import validate_mutations
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.validation.candidate import TestTree
from trajforge.verifiers.validation.mutants import mutation_of

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shapes"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["shapes"]
"""

CORE = """\
\"\"\"Small functions with branches, loops and handlers: room for every kind of bug.\"\"\"


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(items):
    result = 0
    for item in items:
        if item > 0:
            result += item
    return result


def count_up(n):
    i = 0
    steps = []
    while i < n:
        steps.append(i)
        i += 1
    return steps


def parse_pair(text):
    try:
        left, right = text.split(",")
        return int(left), int(right)
    except ValueError:
        return None


def never_tested(x, y):
    if x > y and y > 0:
        return x - y
    return y - x
"""

TESTS = """\
from shapes.core import clamp, count_up, parse_pair, total


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_total_skips_negatives():
    assert total([1, -2, 3]) == 4


def test_count_up():
    assert count_up(3) == [0, 1, 2]


def test_parse_pair():
    assert parse_pair("1,2") == (1, 2)


def test_parse_pair_bad():
    assert parse_pair("x") is None
"""


@pytest.fixture(scope="module")
def shapes_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inject") / "shapes"
    builder = RepoBuilder(path)
    builder.commit(
        "shapes",
        {
            "pyproject.toml": PYPROJECT,
            "shapes/__init__.py": "",
            "shapes/core.py": CORE,
            "tests/test_core.py": TESTS,
        },
    )
    return path


def test_inject_then_validate_yields_proven_bug_tasks(tmp_path: Path, shapes_repo: Path):
    # Four combinations, not the default ten: each is two more runs, and four prove the same.
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", "inject:\n  combos: 4\n")
    inject = run_cli(
        "inject", "--repo", str(shapes_repo), "--max-candidates", "14", "--seed", "3",
        "--params", str(params), "--output", str(tmp_path / "inject"), cwd=tmp_path,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    candidates = pl.read_parquet(tmp_path / "inject" / "candidates" / "*.parquet")
    assert candidates.height > 0
    assert all(origin.startswith("bug/") for origin in candidates["origin"])

    validate = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = pl.read_parquet(tmp_path / "val" / "tasks" / "*.parquet")
    rejections = pl.read_parquet(tmp_path / "val" / "rejections" / "*.parquet")
    singles = tasks.filter(pl.col("origin") != "bug/combo")
    combos = tasks.filter(pl.col("origin") == "bug/combo")
    mutants = set(candidates["candidate_id"])
    judged = set(singles["candidate_id"]) | (set(rejections["input"]) & mutants)
    assert judged == mutants  # every mutant is a task or a counted rejection
    assert singles.height > 0, rejections.select("reason", "detail").to_dicts()
    assert combos.height > 0  # harder tasks: 2-3 proven bugs at once
    for combo in combos.to_dicts():
        assert len(combo["FAIL_TO_PASS"]) >= 2
        assert combo["bug_patch"].count("@@") >= 2
    for task in tasks.to_dicts():
        assert task["origin"].startswith("bug/")
        assert task["FAIL_TO_PASS"], task
        assert set(task["FAIL_TO_PASS"]).isdisjoint(task["PASS_TO_PASS"])
        assert task["bug_patch"] and task["patch"]
        assert task["validation"]["test_runs"] == 4  # the bug's run and its rerun, 2 clean runs
        _assert_fix_restores(shapes_repo, task["bug_patch"], task["patch"], tmp_path)
    # The bar counts each bug and each combination once: it ends at its total, which grew by the
    # combinations validate made (judged = tasks + rejections of this run).
    done, total = map(int, re.findall(r"(\d+)/(\d+) \[", validate.stderr)[-1])
    assert done == total == tasks.height + rejections.height
    reasons = set(rejections["reason"])
    expected = {"not_covered", "equivalent", "mutant_timeout", "breaks_collection"}
    assert reasons <= expected | {"combo_masks_bug"}
    messages = candidates.select("candidate_id", pl.col("meta").struct.field("message"))
    never_tested = messages.filter(pl.col("message").str.contains("never_tested"))
    if never_tested.height:  # the uncovered function is never kept
        assert set(never_tested["candidate_id"]).isdisjoint(set(tasks["candidate_id"]))

    again = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val2"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "cache_hits" in again.stderr
    rerun = pl.read_parquet(tmp_path / "val2" / "tasks" / "*.parquet")
    assert sorted(rerun["instance_id"]) == sorted(tasks["instance_id"])


def test_coverage_guided_keeps_what_full_suite_keeps(tmp_path: Path, shapes_repo: Path):
    params = load_params(str(write_params(tmp_path / "p.yaml", tmp_path / "cache")))
    repo = open_source(str(shapes_repo), SourceOptions(cache_dir=str(tmp_path / "cache")))
    injected = inject_snapshot(repo, InjectParams(max_candidates=12, seed=1, min_complexity=1), [])
    hang = _hanging(injected.candidates[0])
    candidates = [hang, *injected.candidates]
    commit = candidates[0].base_commit
    profile = detect_profile(repo.path, commit, repo.name)
    sandbox = make_sandbox(params, quiet=True)
    try:
        logs = str(tmp_path / "logs")
        profile = build_env_image(sandbox, profile, repo.path, params.environment, logs)
        assert profile.status == "built", profile.log
        clean = TestTree.at(repo.path, commit, [])
        mutations = [mutation_of(repo.path, c, clean.tree_id) for c in candidates]
        vparams = ValidateParams(test_timeout_s=15)
        guided = validate_mutations(
            sandbox, profile, clean, mutations, vparams, JUNIT_PATH, cache=None, workers=2
        )
        full, clean_run = validate_mutations_full_suite(
            sandbox, profile, clean, mutations, vparams, JUNIT_PATH
        )
    finally:
        sandbox.close()
    first = guided.results[0]
    assert first.rejection is not None and first.rejection.reason == "mutant_timeout"
    kept_guided = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in guided.results if r.task}
    kept_full = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in full if r.task}
    assert kept_guided, [r.rejection for r in guided.results]
    assert kept_guided == kept_full
    # What each bug cost: an equivalent one its covering tests; a kept one its covering tests
    # (a full run where it was audited or coverage could not decide) plus a rerun of the tests
    # it broke, nothing else.
    suite = len(clean_run.tests)
    for result in guided.results:
        reason = result.rejection.reason if result.rejection else ""
        if reason == "equivalent":
            assert len(result.runs) == 1 and len(result.runs[0].tests) < suite
        if reason == "not_covered":  # left unrun (no test executes it), or audited in full
            assert result.runs == () or (
                len(result.runs) == 1 and len(result.runs[0].tests) == suite
            )
        if result.task is not None:
            plan = result.task.provenance["mutant_runs"]  # covering | audit | full
            if plan != "covering":  # audited, or coverage could not decide: the whole suite
                assert len(result.runs[0].tests) == suite
            assert len(result.runs[0].tests) <= suite
            assert set(result.task.FAIL_TO_PASS) <= {t.test_id for t in result.runs[0].tests}


def _hanging(template: Candidate) -> Candidate:
    """A bug the operators could make too: the loop never advances, so the tests hang."""
    path = "shapes/core.py"
    hung = CORE.replace("        i += 1\n", "", 1)
    return dataclasses.replace(
        template,
        candidate_id="hang0000",
        origin="bug/remove_statement",
        bug_patch=unified_diff(path, CORE, hung),
        patch=unified_diff(path, hung, CORE),
    )


def _assert_fix_restores(repo: Path, bug_patch: str, fix: str, tmp: Path) -> None:
    work = tmp / "apply"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    for patch in (bug_patch, fix):
        subprocess.run(["git", "-C", str(work), "apply", "-"], input=patch.encode(), check=True)
    status = subprocess.run(
        ["git", "-C", str(work), "status", "--porcelain"], capture_output=True, check=True
    )
    assert status.stdout == b""
    subprocess.run(["rm", "-rf", str(work)], check=True)
