"""Injected bugs are proven as exactly as a full run, wherever coverage is blind.

One test-built repository with the places coverage cannot see: a module constant and a decorator
(they run at import), a test that runs the code in a subprocess, and the project's own pytest-cov
in `addopts` (which would take coverage over). Hand-written bugs hit each of them, and bugs add,
delete and rename files. trajforge's one-process validation must keep exactly what SWE-smith's
protocol (a full run per bug) keeps, with the same FAIL_TO_PASS.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, write_params
from full_suite import validate_mutations_full_suite
from repo_factory import RepoBuilder
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.label_check import LabelCheck
from trajforge.schemas.params import ValidateParams, load_params
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
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
name = "gauge"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest", "pytest-cov"]

[tool.setuptools]
packages = ["gauge"]

[tool.pytest.ini_options]
addopts = "--cov=gauge --cov-branch --cov-report=term-missing --junitxml=junit.xml"
"""

CORE = """\
\"\"\"Code that runs at import (a constant, a decorator) beside code that runs when called.\"\"\"

REGISTRY = {}

LIMIT = 10


def register(name):
    def wrap(fn):
        REGISTRY[name] = fn
        return fn

    return wrap


@register("double")
def double(x):
    return 2 * x


def within(x):
    return x <= LIMIT


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
"""

CLI = """\
import sys

from gauge.core import clamp

if __name__ == "__main__":
    print(clamp(int(sys.argv[1]), 0, 10))
"""

TESTS = """\
import subprocess
import sys

from gauge.core import REGISTRY, clamp, within


def test_registry_has_double():
    assert REGISTRY["double"](2) == 4


def test_within_limit():
    assert within(10)


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_cli_clamps():
    out = subprocess.run(
        [sys.executable, "-m", "gauge.cli", "50"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "10"
"""

DEMO = """\
from gauge.core import clamp


def test_demo_clamps():
    assert clamp(11, 0, 10) == 10
"""

T = "tests/test_core.py::"
D = "demo/test_demo.py::test_demo_clamps"
# bug name -> (files it writes, None deletes; the FAIL_TO_PASS a full run proves, or None when
# no test fails)
BUGS: dict[str, tuple[dict[str, str | None], tuple[str, ...] | None]] = {
    "constant": (
        {"gauge/core.py": CORE.replace("LIMIT = 10", "LIMIT = 9")},
        (f"{T}test_within_limit",),
    ),
    "decorator": (
        {"gauge/core.py": CORE.replace('@register("double")', '@register("twice")')},
        (f"{T}test_registry_has_double",),
    ),
    "subprocess": (  # one covering test fails; the subprocess test is found by the full run
        {
            "gauge/core.py": CORE.replace(
                "    if x > hi:\n        return hi", "    if x > hi:\n        return lo"
            )
        },
        (D, f"{T}test_cli_clamps", f"{T}test_clamp_high"),
    ),
    "adds_file": (
        {
            "gauge/bounds.py": "HIGH = 5\n",
            "gauge/core.py": CORE.replace(
                "        return hi", "        from gauge.bounds import HIGH\n\n        return HIGH"
            ),
        },
        (D, f"{T}test_cli_clamps", f"{T}test_clamp_high"),
    ),
    "deletes_file": ({"gauge/cli.py": None}, (f"{T}test_cli_clamps",)),
    "renames_file": ({"gauge/cli.py": None, "gauge/main.py": CLI}, (f"{T}test_cli_clamps",)),
    "low": (
        {
            "gauge/core.py": CORE.replace(
                "    if x < lo:\n        return lo", "    if x < lo:\n        return hi"
            )
        },
        (f"{T}test_clamp_low",),
    ),
    "equivalent": ({"gauge/core.py": CORE.replace("if x < lo:", "if x <= lo:")}, None),
}


@pytest.fixture(scope="module")
def gauge(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Candidate]]:
    path = tmp_path_factory.mktemp("exact") / "gauge"
    builder = RepoBuilder(path)
    files = {
        "pyproject.toml": PYPROJECT,
        "gauge/__init__.py": "",
        "gauge/core.py": CORE,
        "gauge/cli.py": CLI,
        "tests/test_core.py": TESTS,
        # a folder with its own pytest.ini: a rerun of only its tests must keep the full run's ids
        "demo/pytest.ini": "[pytest]\n",
        "demo/test_demo.py": DEMO,
    }
    base = builder.commit("gauge", files)
    candidates = []
    for name, (changes, _) in BUGS.items():
        builder.git("checkout", "-q", "-b", f"bug-{name}", base)
        bugged = builder.commit(f"bug {name}", changes)
        candidates.append(
            Candidate(
                candidate_id=f"bug-{name}",
                repo="gauge",
                source=str(path),
                base_commit=base,
                patch=_diff(path, bugged, base),
                test_patch="",
                origin="bug/hand_written",
                created_at="2026-01-01T00:00:00Z",
                bug_patch=_diff(path, base, bugged),
            )
        )
        builder.git("checkout", "-q", base)
    return path, candidates


def _diff(repo: Path, before: str, after: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-renames", before, after],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_one_process_validation_keeps_exactly_what_full_runs_keep(
    tmp_path: Path, gauge: tuple[Path, list[Candidate]]
):
    path, candidates = gauge
    params = load_params(str(write_params(tmp_path / "p.yaml", tmp_path / "cache")))
    repo = open_source(str(path), SourceOptions(cache_dir=str(tmp_path / "cache")))
    commit = candidates[0].base_commit
    profile = detect_profile(repo.path, commit, repo.name)
    sandbox = make_sandbox(params, quiet=True)
    try:
        logs = str(tmp_path / "logs")
        profile = build_env_image(sandbox, profile, repo.path, params.environment, logs)
        assert profile.status == "built", profile.log
        clean = TestTree.at(repo.path, commit, [])
        mutations = [mutation_of(repo.path, c, clean.tree_id) for c in candidates]
        vparams = ValidateParams(test_timeout_s=60)
        ours = validate_mutations(
            sandbox, profile, clean, mutations, vparams, JUNIT_PATH, cache=None, workers=2
        )
        full, clean_run = validate_mutations_full_suite(
            sandbox, profile, clean, mutations, vparams, JUNIT_PATH
        )
    finally:
        sandbox.close()

    # The project's pytest-cov did not take coverage over: the clean run measured per test.
    assert all(run.suite_ran for run in ours.clean_runs)
    by_id = {m.candidate.candidate_id: r for m, r in zip(mutations, ours.results, strict=True)}
    for name, (_, expected) in BUGS.items():
        result = by_id[f"bug-{name}"]
        if expected is None:
            assert result.task is None and result.rejection is not None, name
            assert result.rejection.reason == "equivalent", result.rejection
            continue
        assert result.task is not None, (name, result.rejection)
        assert tuple(sorted(expected)) == result.task.FAIL_TO_PASS, name
        assert result.task.flaky_tests == (), name  # nothing flipped between identical runs
        assert not set(result.task.PASS_TO_PASS) & set(expected)
    subprocess_bug = by_id["bug-subprocess"].task
    assert subprocess_bug is not None
    # coverage worked: the clamp tests, and the test whose subprocess runs clamp
    assert subprocess_bug.provenance["covering_tests"] == "3"
    assert subprocess_bug.provenance["fail_to_pass_outside_coverage"] == "0"
    # The equivalent bug cost its covering tests only: the run stopped after them.
    stopped = by_id["bug-equivalent"].runs[0]
    assert len(stopped.tests) < len(clean_run.tests)
    assert "the rest of the suite was not run" in stopped.log

    kept_ours = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in ours.results if r.task}
    kept_full = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in full if r.task}
    assert kept_ours == kept_full


def test_swesmith_rows_import_validate_and_check_labels(
    tmp_path: Path, gauge: tuple[Path, list[Candidate]]
):
    """SWE-smith-shaped rows of these bugs, with labels as a dataset might get them wrong."""
    path, candidates = gauge
    by_name = {c.candidate_id.removeprefix("bug-"): c for c in candidates}
    c8 = candidates[0].base_commit[:8]
    names = ("registry_has_double", "within_limit", "clamp_high", "clamp_low", "cli_clamps")
    everyone = [D] + [f"{T}test_{name}" for name in names]
    planted = {  # name -> (their FAIL_TO_PASS, what the check must say)
        "constant": ([f"{T}test_within_limit"], "confirmed"),
        # they missed the subprocess test (our FAIL_TO_PASS, their PASS_TO_PASS)
        "subprocess": ([D, f"{T}test_clamp_high"], "differs"),
        # a test that does not exist here
        "adds_file": (
            [D, f"{T}test_cli_clamps", f"{T}test_clamp_high", f"{T}test_gone"],
            "differs",
        ),
        "low": ([f"{T}test_clamp_low"], "confirmed"),
        # a wrong label: the bug changes nothing test_clamp_low sees
        "equivalent": ([f"{T}test_clamp_low"], "rejected"),
    }
    rows = []
    for name, (f2p, _) in planted.items():
        rows.append({
            "instance_id": f"gauge__gauge.{c8}.func_pm_{name}__{name[:4]}",
            "repo": f"swesmith/gauge__gauge.{c8}",
            "patch": by_name[name].bug_patch,
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": [t for t in everyone if t not in f2p],
            "image_name": f"swesmith.x86_64.gauge__gauge.{c8}",
            "problem_statement": "",
        })  # fmt: skip
    (tmp_path / "smith.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")
    # one lane: the audit's first kept bug is then the first to run (two lanes may audit both)
    params.write_text(params.read_text().replace("workers: 2", "workers: 1"))
    imported = run_cli(
        "import-tasks", "--format", "swe-smith", "smith.jsonl", "--source", f"gauge/gauge={path}",
        "--output", "imported", "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    validated = run_cli(
        "validate", "--input", "imported", "--output", "val", "--params", str(params),
        cwd=tmp_path,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stderr
    assert "labels confirmed: 2 of 5" in validated.stderr
    checks = {
        check.instance_id.split(".")[-1].split("__")[0].removeprefix("func_pm_"): check
        for check in read_records(LabelCheck, str(tmp_path / "val" / "label_check"))
    }
    assert {name: check.verdict for name, check in checks.items()} == {
        name: verdict for name, (_, verdict) in planted.items()
    }
    subprocess_check = checks["subprocess"]
    assert subprocess_check.FAIL_TO_PASS.they_missed == (f"{T}test_cli_clamps",)
    assert subprocess_check.PASS_TO_PASS.we_missed == (f"{T}test_cli_clamps",)
    assert checks["adds_file"].FAIL_TO_PASS.not_run_here == (f"{T}test_gone",)
    agreed = (D, f"{T}test_clamp_high", f"{T}test_cli_clamps")
    assert checks["adds_file"].FAIL_TO_PASS.agrees == agreed
    wrong = checks["equivalent"]
    assert wrong.reason == "equivalent"
    assert wrong.FAIL_TO_PASS.we_missed == (f"{T}test_clamp_low",)
    assert wrong.FAIL_TO_PASS.why[f"{T}test_clamp_low"] == "our PASS_TO_PASS"  # passes with it
    kept = read_records(TaskInstance, str(tmp_path / "val" / "tasks"))
    assert {t.instance_id for t in kept} == {row["instance_id"] for row in rows[:4]}  # their ids
    # Imported rows are decided like fresh bugs: the covering tests (and the tests the dataset
    # names), a full run only for the audit and where coverage cannot place the bug (a new file).
    plans = {
        t.instance_id.split("__")[-2].split(".")[-1]: t.provenance["mutant_runs"] for t in kept
    }
    assert plans["func_pm_adds_file"] == "full", plans
    assert plans["func_pm_constant"] == "full", plans  # a module-level line: run at import
    # the first kept bug of a profile is audited; the other function-body bug is decided by its
    # covering tests, and its labels are still confirmed
    assert sorted((plans["func_pm_subprocess"], plans["func_pm_low"])) == ["audit", "covering"]
