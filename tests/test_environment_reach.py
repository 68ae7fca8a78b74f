"""Issue 14's failure classes, each a test-built repository (tests/reach_repos.py), end to end.

The detector before ranking (``legacy``) fails on each of them as it failed on a public library;
``prepare_environment`` builds each one, with the install set, repair or exclusion the class
needs, and its suite collects and runs. Then the CLI as a user drives it: one ``inject`` over
every repository and ``validate`` give tasks from each, bad input ends with a counted reason, and
a rerun reuses the repaired environments (no image built).
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from reach_repos import PRIVATE_REQUIREMENT, REACH_REPOS
from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.languages.python.prepare import prepare_environment
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params, load_params
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.git_tree import archive
from trajforge.verifiers.test_runner import RunContext, run_tests

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

PYTHONS = ("3.11", "3.13")
NEW_PYTHON_BASE = "trajforge-base:py3.13"
COLLECTION_WARNING = "-W ignore::pytest.PytestCollectionWarning"
DEPRECATION_WARNING = "-W ignore::pytest.PytestRemovedIn10Warning"


@dataclass(frozen=True)
class Expect:
    """What each mode does with a failure class."""

    legacy: str  # the reason the detector before ranking ends with
    legacy_says: str = ""  # in its one-line detail
    python: str = "3.11"
    repairs: tuple[str, ...] = ()  # the repairs made, each starting so, in order
    excluded: tuple[str, ...] = ()  # the test modules left out
    in_test_cmd: tuple[str, ...] = ()
    never_installed: str = ""  # in no install command
    runner_below: int | None = None  # the runner pinned below a pytest major at most this


EXPECTED = {
    "docs_group": Expect("install_failed", "sphinx", never_installed="sphinx"),
    "tox_vcs": Expect("install_failed", never_installed="git+"),
    "extra_import": Expect("collection_failed", "click", repairs=("click -> click",)),
    "extra_import_alias": Expect(
        "collection_failed", "dateutil", repairs=("dateutil -> python-dateutil",)
    ),
    "missing_submodule": Expect(
        "collection_failed",
        "tests/test_vendor.py",
        excluded=("tests/test_vendor.py",),
        in_test_cmd=("--ignore=tests/test_vendor.py",),
    ),
    "runner_era": Expect("collection_failed", "PytestRemovedIn10Warning", runner_below=9),
    "runner_deprecation": Expect(
        "collection_failed",
        "tests/test_table.py",
        repairs=(DEPRECATION_WARNING,),
        in_test_cmd=(DEPRECATION_WARNING,),
    ),
    "runner_warning": Expect(
        "collection_failed",
        "PytestCollectionWarning",
        repairs=(COLLECTION_WARNING,),
        in_test_cmd=(COLLECTION_WARNING,),
    ),
    "new_python": Expect("no_supported_python", ">=3.12", python="3.13"),
}
FAILURE_CLASSES = list(EXPECTED)


# --- fixtures: the repositories, params, one sandbox; images removed at the end -------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory):
    """The module's folder; every image a build under it made is removed afterwards (each build
    writes ``<cache>/build-logs/<profile_id>.log``)."""
    root = tmp_path_factory.mktemp("reach")
    yield root
    built = sorted({log.stem for log in root.glob("*/build-logs/*.log")})
    if built:
        images = [f"trajforge-env:{profile_id}" for profile_id in built]
        subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


@pytest.fixture(scope="module")
def repos(work: Path) -> dict[str, Path]:
    paths = {}
    for name, repo in REACH_REPOS.items():
        paths[name] = work / "repos" / name
        repo.build(paths[name])
    return paths


def write_params(path: Path, cache_dir: Path, pythons: tuple[str, ...] = PYTHONS) -> Path:
    """No combinations of bugs: each would be two more runs per snapshot (a third of the CLI
    test's time), and what this module proves is that each failure class yields tasks;
    combinations are test_inject_e2e's."""
    listed = ", ".join(f"'{p}'" for p in pythons)
    path.write_text(
        f"cache_dir: {cache_dir}\n"
        "validate:\n  test_timeout_s: 60\n  workers: 2\n  gold_runs: 0\n"
        f"environment:\n  pythons: [{listed}]\n"
        "inject:\n  combos: 0\n"
    )
    return path


@pytest.fixture(scope="module")
def env(work: Path):
    params = load_params(str(write_params(work / "prepare.yaml", work / "prepare-cache")))
    sandbox = make_sandbox(params, quiet=True)
    yield params, sandbox
    sandbox.close()


def head(path: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def detect(path: Path, params: Params, legacy: bool) -> EnvProfile:
    """As the benchmark and the stage detect: the pre-ranking detector had one base image (the
    default Python); the name is the stage's, so the images are the ones the CLI tests use."""
    environment = params.environment
    pythons = (environment.default_python,) if legacy else tuple(environment.pythons)
    return detect_profile(
        str(path), head(path), f"local/{path.name}",
        default_python=environment.default_python, pythons=pythons, legacy=legacy,
    )  # fmt: skip


def prepare(
    sandbox: Sandbox, params: Params, path: Path, legacy: bool = False
) -> tuple[Prepared | None, str, str, collections.Counter[str]]:
    """(prepared or None when detection failed, reason, detail, counters)."""
    counted: collections.Counter[str] = collections.Counter()

    def count(name: str, value: int = 1) -> None:
        counted[name] += value

    try:
        profile = detect(path, params, legacy)
    except UserError as error:
        return None, error.reason, str(error), counted
    prepared = prepare_environment(sandbox, profile, str(path), params, legacy=legacy, count=count)
    return prepared, prepared.reason, prepared.detail, counted


def clean_suite(sandbox: Sandbox, profile: EnvProfile, path: Path) -> dict[str, str]:
    """Test id -> status of one run of ``profile.test_cmd`` in its image, at its setup commit,
    with no network: what validation's base run does."""
    ctx = RunContext("reach", profile.profile_id, profile.test_cmd, JUNIT_PATH, 120)
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(archive(str(path), profile.setup_commit, prefix="repo/"))
        run = run_tests(session, ctx, "clean", attempt=0)
    assert run.suite_ran, run.log[-3000:]
    return {test.test_id: test.status for test in run.tests}


# --- each failure class, legacy against ranked ----------------------------------------------------


@pytest.mark.parametrize("name", FAILURE_CLASSES)
def test_each_failure_class_prepares(name: str, repos: dict[str, Path], env) -> None:
    params, sandbox = env
    path, expected = repos[name], EXPECTED[name]

    old, reason, detail, _ = prepare(sandbox, params, path, legacy=True)
    assert reason == expected.legacy, (reason, detail)
    assert expected.legacy_says in detail
    if old is not None and expected.legacy == "collection_failed":
        assert old.profile.status == "built"  # it installed, but the suite as a whole cannot run
        assert (old.profile.repairs, old.profile.excluded) == ((), ())

    if name == "new_python" and not sandbox.has_image(NEW_PYTHON_BASE):
        profile = detect(path, params, legacy=False)  # no base image to build on: the choice only
        assert profile.python == expected.python
        return
    prepared, reason, detail, _ = prepare(sandbox, params, path)
    assert prepared is not None and reason == "", detail
    built = prepared.profile
    assert (built.status, built.origin, built.python) == ("built", "rules", expected.python)
    assert prepared.collected == REACH_REPOS[name].collected, built.log[-2000:]
    assert len(built.repairs) == len(expected.repairs), built.repairs
    for made, wanted in zip(built.repairs, expected.repairs, strict=True):
        assert made.startswith(wanted), built.repairs
    assert [e.split(": ", 1)[0] for e in built.excluded] == list(expected.excluded)
    assert all(e.split(": ", 1)[1].strip() for e in built.excluded), built.excluded
    for flag in expected.in_test_cmd:
        assert flag in built.test_cmd
    if not expected.excluded:
        assert "--ignore" not in built.test_cmd
    if not expected.repairs:
        assert " -W " not in built.test_cmd
    installed = " ".join(built.install)
    if expected.never_installed:
        assert expected.never_installed not in installed, built.install
    if expected.runner_below is not None:
        pins = [int(major) for major in re.findall(r"pytest<(\d+)", installed)]
        assert pins and max(pins) <= expected.runner_below, built.install

    statuses = clean_suite(sandbox, built, path)  # the suite runs, every test passes
    assert len(statuses) == prepared.collected
    assert set(statuses.values()) == {"PASSED"}, statuses

    again, reason, _, counted = prepare(sandbox, params, path)  # the repaired profile is reused
    assert again is not None and reason == ""
    assert counted["images_built"] == 0, counted
    assert (again.profile.image, again.profile.test_cmd) == (built.image, built.test_cmd)
    assert again.collected == prepared.collected


def test_missing_submodule_is_named_with_its_error(repos: dict[str, Path], env) -> None:
    """The exclusion says why: the module the folder of a never-checked-out submodule lacks."""
    params, sandbox = env
    prepared, reason, detail, _ = prepare(sandbox, params, repos["missing_submodule"])
    assert prepared is not None and reason == "", detail
    (excluded,) = prepared.profile.excluded
    assert excluded.startswith("tests/test_vendor.py: ") and "toml_test_data" in excluded


def test_requires_python_312_chooses_313(repos: dict[str, Path], env) -> None:
    """Unit level, no build: 3.13 among the pythons is chosen; without it, a counted reason."""
    params, _ = env
    path, sha = repos["new_python"], head(repos["new_python"])
    for pythons in (PYTHONS, ("3.9", "3.11", "3.13")):
        assert detect_profile(str(path), sha, "local/new_python", pythons=pythons).python == "3.13"
    with pytest.raises(UserError) as raised:
        detect_profile(str(path), sha, "local/new_python", pythons=("3.9", "3.11"))
    assert raised.value.reason == "no_supported_python"
    assert detect(repos["docs_group"], params, legacy=False).python == "3.11"  # the default fits


# --- bad input ------------------------------------------------------------------------------------


def test_bad_inputs_end_with_a_reason(repos: dict[str, Path], env) -> None:
    params, sandbox = env
    prepared, reason, detail, _ = prepare(sandbox, params, repos["no_tests"])
    assert prepared is not None and reason == "no_tests", detail
    assert prepared.collected == 0 and len(detail.splitlines()) == 1

    prepared, reason, detail, _ = prepare(sandbox, params, repos["private_index"])
    assert prepared is not None and reason == "install_failed", detail
    assert prepared.profile.status == "failed"
    assert len(detail.splitlines()) == 1
    assert PRIVATE_REQUIREMENT.split("==")[0] in detail  # pip's line names what is not there
    assert prepared.profile.attempts, prepared.profile  # each set tried says why it failed


# --- the CLI as a user runs it --------------------------------------------------------------------


def test_failure_class_repos_yield_tasks(repos: dict[str, Path], work: Path, env) -> None:
    _, sandbox = env
    names = [n for n in REACH_REPOS if n != "new_python" or sandbox.has_image(NEW_PYTHON_BASE)]
    run_dir = work / "cli"
    run_dir.mkdir()
    params = write_params(run_dir / "params.yaml", run_dir / "cache")
    sources = [arg for name in names for arg in ("--repo", str(repos[name]))]
    inject = run_cli(
        "inject", *sources, "--max-candidates", "3", "--seed", "0",
        "--params", str(params), "--output", str(run_dir / "inject"), cwd=run_dir,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    candidates = pl.read_parquet(run_dir / "inject" / "candidates" / "*.parquet")
    assert set(candidates["repo"]) == {f"local/{n}" for n in names if n != "no_tests"}
    # No tests: inject already says so, in one counted line, and goes on with the rest.
    skipped = pl.read_parquet(run_dir / "inject" / "rejections" / "*.parquet").to_dicts()
    assert [(r["input"], r["reason"]) for r in skipped] == [
        (str(repos["no_tests"]), "no_tests_at_commit")
    ]
    assert len(skipped[0]["detail"].splitlines()) == 1 and "local/no_tests" in skipped[0]["detail"]

    validate = run_cli(
        "validate", "--input", str(run_dir / "inject"), "--output", str(run_dir / "val"),
        "--params", str(params), cwd=run_dir,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = pl.read_parquet(run_dir / "val" / "tasks" / "*.parquet")
    rejections = pl.read_parquet(run_dir / "val" / "rejections" / "*.parquet")
    repo_of = dict(zip(candidates["candidate_id"], candidates["repo"], strict=True))
    rejected = collections.defaultdict(list)
    for row in rejections.to_dicts():
        rejected[repo_of.get(row["input"], row["input"])].append(row)
    per_repo = collections.Counter(tasks["repo"])
    for name in names:
        if name in ("no_tests", "private_index"):
            continue
        assert per_repo[f"local/{name}"] >= 1, (name, rejected[f"local/{name}"])

    for task in tasks.filter(pl.col("repo") == "local/missing_submodule").to_dicts():
        assert "--ignore=tests/test_vendor.py" in task["test_cmd"]
        assert [e.split(": ", 1)[0] for e in task["excluded_tests"]] == ["tests/test_vendor.py"]
        assert not any("test_vendor" in t for t in task["FAIL_TO_PASS"] + task["PASS_TO_PASS"])
    for task in tasks.filter(pl.col("repo") == "local/runner_warning").to_dicts():
        assert COLLECTION_WARNING in task["test_cmd"]

    # A private index: every candidate a counted install_failed whose first line says what pip
    # could not find; the other repositories gave tasks all the same (above).
    summary = json.loads((run_dir / "val" / "summary.json").read_text())
    rows = rejected["local/private_index"]
    assert rows and {row["reason"] for row in rows} == {"install_failed"}, rows
    assert per_repo["local/private_index"] == 0
    assert summary["rejected"]["install_failed"] == len(rows)
    first = rows[0]["detail"].splitlines()[0]
    assert "local/private_index" in first and PRIVATE_REQUIREMENT.split("==")[0] in first, first

    again = run_cli(
        "validate", "--input", str(run_dir / "inject"), "--output", str(run_dir / "val2"),
        "--params", str(params), cwd=run_dir,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    rerun = json.loads((run_dir / "val2" / "summary.json").read_text())
    assert rerun.get("images_built", 0) == 0, rerun
    retasks = pl.read_parquet(run_dir / "val2" / "tasks" / "*.parquet")
    assert sorted(retasks["instance_id"]) == sorted(tasks["instance_id"])
