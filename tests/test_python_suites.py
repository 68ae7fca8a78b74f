"""Issue 43's Python suites, each a test-built repository (tests/suite_repos.py), end to end.

- A suite needing a standard-library name the chosen Python lacks (``typing.Unpack``,
  ``tomllib`` on 3.10) moves up the Python ladder to the first that has it (3.11), instead of
  ``collection_failed``; the interpreters are asked, no table is kept.
- A test module that fails to import at validate's clean run (added by a commit after the one
  the environment was prepared at) is left out, counted with its error, and the rest decides.

Then the CLI as a user drives them: ``inject`` + ``validate`` give tasks from each.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import remove_built_images, run_cli
from reach_repos import CORE_TEST_COUNT
from suite_repos import (
    LATE_MODULE,
    STDLIB_REPOS,
    UNKNOWN_IMPORT,
    add_late_module,
    build_conftest_import,
    build_late_module,
)
from test_environment_reach import clean_suite, detect, head, prepare
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.languages.python.stdlib_ladder import (
    Missing,
    missing_names,
    newer_python,
)
from trajforge.schemas.params import load_params
from trajforge.verifiers.collection import CollectError
from trajforge.verifiers.sandbox.factory import make_sandbox

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

PYTHONS = ("3.10", "3.11", "3.13")
DEFAULT = "3.11"


def write_params(path: Path, cache_dir: Path) -> Path:
    listed = ", ".join(f"'{p}'" for p in PYTHONS)
    path.write_text(
        f"cache_dir: {cache_dir}\n"
        "validate:\n  test_timeout_s: 60\n  workers: 2\n  gold_runs: 0\n"
        f"environment:\n  pythons: [{listed}]\n  default_python: '{DEFAULT}'\n"
        "inject:\n  combos: 0\n"
    )
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory):
    """The module's folder; every environment image a build under it made is removed after."""
    root = tmp_path_factory.mktemp("suites")
    yield root
    remove_built_images(root)


@pytest.fixture(scope="module")
def repos(work: Path) -> dict[str, Path]:
    paths = {}
    for name, (build, _) in STDLIB_REPOS.items():
        paths[name] = work / "repos" / name
        build(paths[name])
    paths["conftest_import"] = work / "repos" / "conftest_import"
    build_conftest_import(paths["conftest_import"])
    return paths


@pytest.fixture(scope="module")
def env(work: Path):
    params = load_params(str(write_params(work / "prepare.yaml", work / "prepare-cache")))
    sandbox = make_sandbox(params, quiet=True)
    yield params, sandbox
    sandbox.close()


# --- the interpreters answer ----------------------------------------------------------------------


def test_collection_errors_name_what_is_missing() -> None:
    errors = [
        CollectError("a.py", "ImportError: cannot import name 'Unpack' from 'typing' (/x.py)"),
        CollectError("b.py", "ModuleNotFoundError: No module named 'tomllib'", missing="tomllib"),
        CollectError("c.py", "AttributeError: module 'typing' has no attribute 'override'"),
        CollectError("d.py", "ImportError: cannot import name 'Unpack' from 'typing' (/y.py)"),
        CollectError("e.py", "ValueError: bad"),
    ]
    assert missing_names(errors) == [
        Missing("typing", "Unpack"),
        Missing("tomllib"),
        Missing("typing", "override"),
    ]


def test_the_next_interpreter_that_has_the_name_is_chosen(env) -> None:
    """Asked in each base image: 3.11 has typing.Unpack and tomllib, 3.13 typing.override; a
    third-party module is in no standard library, so no rung is taken for it."""
    _, sandbox = env
    assert all(sandbox.has_image(base_image_tag(p)) for p in PYTHONS)
    move = newer_python(sandbox, "3.10", PYTHONS, [Missing("typing", "Unpack"), Missing("tomllib")])
    assert move is not None and move.python == "3.11", move
    assert "typing.Unpack" in move.why and "tomllib" in move.why
    move = newer_python(sandbox, "3.10", PYTHONS, [Missing("typing", "override")])
    assert move is not None and move.python == "3.13", move
    assert newer_python(sandbox, "3.10", PYTHONS, [Missing("yaml")]) is None
    assert newer_python(sandbox, "3.13", PYTHONS, [Missing("typing", "Unpack")]) is None


# --- the ladder, prepared -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(STDLIB_REPOS))
def test_a_standard_library_name_moves_up_the_ladder(
    name: str, repos: dict[str, Path], env
) -> None:
    params, sandbox = env
    path = repos[name]
    assert detect(path, params, legacy=False).python == "3.10"  # what the project names

    prepared, reason, detail, counted = prepare(sandbox, params, path)
    assert prepared is not None and reason == "", detail
    built = prepared.profile
    assert (built.status, built.python) == ("built", "3.11"), built.log[-2000:]
    assert built.repairs[0].startswith("python 3.10 -> 3.11 ("), built.repairs
    assert "3.11 has it" in built.repairs[0]
    assert built.excluded == ()
    assert prepared.collected == STDLIB_REPOS[name][1]
    assert counted["python_moves"] == 1 and counted["excluded_modules"] == 0, counted
    statuses = clean_suite(sandbox, built, path)
    assert len(statuses) == prepared.collected and set(statuses.values()) == {"PASSED"}

    again, reason, _, counted = prepare(sandbox, params, path)  # reused: nothing built
    assert again is not None and reason == ""
    assert counted["images_built"] == 0, counted
    assert (again.profile.image, again.profile.python) == (built.image, "3.11")


# --- a conftest's undeclared import ---------------------------------------------------------------


def test_a_conftest_import_on_pypi_is_installed(repos: dict[str, Path], env) -> None:
    """``toolz``: declared nowhere, in no folder or file of the repository, on PyPI."""
    params, sandbox = env
    prepared, reason, detail, counted = prepare(sandbox, params, repos["conftest_import"])
    assert prepared is not None and reason == "", detail
    built = prepared.profile
    assert built.repairs == (
        "toolz -> toolz (on PyPI; tests/conftest.py imports it and nothing declares it)",
    ), built.repairs
    assert prepared.collected == CORE_TEST_COUNT + 2 and built.excluded == ()
    assert counted["repairs"] == 1, counted
    statuses = clean_suite(sandbox, built, repos["conftest_import"])
    assert set(statuses.values()) == {"PASSED"} and len(statuses) == prepared.collected


def test_a_conftest_import_nowhere_ends_in_one_line(work: Path, env) -> None:
    """A name PyPI does not have is not guessed at: the suite cannot collect, said in one line."""
    params, sandbox = env
    path = work / "repos" / "conftest_unknown"
    build_conftest_import(path, UNKNOWN_IMPORT)
    prepared, reason, detail, _ = prepare(sandbox, params, path)
    assert prepared is not None and reason == "collection_failed", detail
    assert len(detail.splitlines()) == 1 and "local/conftest_unknown" in detail
    assert "tests/conftest.py cannot be collected" in detail and UNKNOWN_IMPORT in detail
    assert prepared.profile.repairs == ()
    assert not any(UNKNOWN_IMPORT in step for step in prepared.profile.install)


# --- the CLI as a user runs it --------------------------------------------------------------------


def test_suites_yield_tasks(repos: dict[str, Path], work: Path) -> None:
    run_dir = work / "cli"
    run_dir.mkdir()
    params = write_params(run_dir / "params.yaml", run_dir / "cache")
    late = build_late_module(work / "repos" / "late_module")

    # The environment is prepared at the first commit (its suite collects there) ...
    first = run_cli(
        "inject", "--repo", str(late.path), "--max-candidates", "1", "--seed", "0",
        "--params", str(params), "--output", str(run_dir / "first"), cwd=run_dir,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    first = run_cli(
        "validate", "--input", str(run_dir / "first"), "--output", str(run_dir / "first-val"),
        "--params", str(params), cwd=run_dir,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    before = pl.read_parquet(run_dir / "first-val" / "tasks" / "*.parquet").to_dicts()
    assert before and all(task["excluded_tests"] == [] for task in before), before
    # ... and reused at the next, whose new module imports what the image lacks.
    add_late_module(late)
    names = {**{name: path for name, path in repos.items()}, "late_module": late.path}
    sources = [arg for path in names.values() for arg in ("--repo", str(path))]
    inject = run_cli(
        "inject", *sources, "--max-candidates", "3", "--seed", "0",
        "--params", str(params), "--output", str(run_dir / "inject"), cwd=run_dir,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    candidates = pl.read_parquet(run_dir / "inject" / "candidates" / "*.parquet")
    assert set(candidates["repo"]) == {f"local/{n}" for n in names}
    late_candidates = candidates.filter(pl.col("repo") == "local/late_module")
    assert set(late_candidates["base_commit"]) == {head(late.path)}

    validate = run_cli(
        "validate", "--input", str(run_dir / "inject"), "--output", str(run_dir / "val"),
        "--params", str(params), cwd=run_dir,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = pl.read_parquet(run_dir / "val" / "tasks" / "*.parquet")
    rejections = pl.read_parquet(run_dir / "val" / "rejections" / "*.parquet").to_dicts()
    per_repo = collections.Counter(tasks["repo"])
    for name in names:
        assert per_repo[f"local/{name}"] >= 1, (name, rejections)
    assert not [r for r in rejections if r["reason"].startswith("collection_error")], rejections

    for task in tasks.filter(pl.col("repo") == "local/late_module").to_dicts():
        assert f"--ignore={LATE_MODULE}" in task["test_cmd"]
        (excluded,) = task["excluded_tests"]
        assert excluded.startswith(f"{LATE_MODULE}: ") and "generated_cases" in excluded
        assert excluded.endswith("(at the clean run)")
        assert not any("test_generated" in t for t in task["FAIL_TO_PASS"] + task["PASS_TO_PASS"])
    summary = json.loads((run_dir / "val" / "summary.json").read_text())
    (line,) = [summary["excluded_at_clean"]]  # the count, each module and its error
    assert "local/late_module@" in line and f": 1 ({LATE_MODULE}: " in line, line
    # the environments are prepared by inject (coverage on first contact), validate reuses them
    injected = json.loads((run_dir / "inject" / "summary.json").read_text())
    moves = injected.get("python_moves", 0) + summary.get("python_moves", 0)
    assert moves == 2, (injected, summary)
