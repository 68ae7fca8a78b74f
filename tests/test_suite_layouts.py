"""Suites run as the project's tox env runs them (issue 43 item 3): tox's ``changedir`` and a
Django project under ``test_project/`` (tests/layout_repos.py), with test ids that stay
repository-relative, so validate's lists and the grader agree.

Read from the files alone first (no container), then the CLI as a user drives it: one
environment per layout, ``inject`` + ``validate``, the gold patch through the grader.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import remove_built_images, run_cli, write_params
from layout_repos import DJANGO_TESTS, build_django_app, build_tox_changedir
from test_environment_reach import head
from trajforge.generators.environments.commit_files import ProfileError
from trajforge.generators.languages.python.profile import TEST_CMD, detect_profile
from trajforge.generators.languages.python.suite_layout import PYTEST_DJANGO, REASON


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory):
    """The module's folder; every environment image a build under it made is removed after."""
    root = tmp_path_factory.mktemp("layouts")
    yield root
    remove_built_images(root)


@pytest.fixture(scope="module")
def repos(work: Path) -> dict[str, Path]:
    paths = {name: work / "repos" / name for name in ("tox_changedir", "django_app")}
    build_tox_changedir(paths["tox_changedir"])
    build_django_app(paths["django_app"], start=ERA_OF_PYTEST_7)
    return paths


# a 2023 commit gets the era's runner (pytest<8), which resolves -o pythonpath only against a
# config file: the Django app, which has none, runs on it
ERA_OF_PYTEST_7 = "2023-06-01"


def detect(path: Path):
    return detect_profile(str(path), head(path), f"local/{path.name}")


TOX_TOML = """\
env_list = ["py311"]

[env_run_base]
change_dir = "{tox_root}/tests"
commands = [["pytest"]]
"""
DJANGO_INI = """\
[pytest]
DJANGO_SETTINGS_MODULE = test_project.settings
python_files = tests.py
"""


OWN_RUNTEST = """\
diff --git a/test_project/library/__init__.py b/test_project/library/__init__.py
--- a/test_project/library/__init__.py
+++ b/test_project/library/__init__.py
@@ -0,0 +1,7 @@
+import _pytest.unittest
+
+
+def _runtest(self):
+    self._testcase(result=self)
+
+_pytest.unittest.TestCaseFunction.runtest = _runtest
"""


# --- read from the files --------------------------------------------------------------------------


def test_changedir_becomes_options_from_the_root(repos: dict[str, Path]) -> None:
    profile = detect(repos["tox_changedir"])
    flags = "-c tests/pytest.ini -o testpaths=tests"
    assert profile.test_cmd == f"{TEST_CMD} {flags}"
    assert not any(PYTEST_DJANGO in step for step in profile.install)


def test_django_runs_through_pytest_django(repos: dict[str, Path]) -> None:
    """The settings module from manage.py, imported from manage.py's folder; pytest-django
    (declared nowhere) installed with the runner; Django's ``tests.py`` collected."""
    profile = detect(repos["django_app"])
    assert profile.test_cmd == (  # no pytest config: pytest 7 resolves pythonpath against one's
        f"{TEST_CMD} -c /dev/null -o pythonpath=/repo/test_project -o testpaths=test_project "
        "--ds=test_project.settings -o 'python_files=test*.py *_test.py *tests.py'"
    )
    assert profile.install[-1].endswith(f" {PYTEST_DJANGO}"), profile.install
    assert "pip install -r requirements.txt" in profile.install  # Django: the project's own


def test_tox_toml_and_a_pytest_config_say_it_too(tmp_path: Path) -> None:
    """tox 4's ``tox.toml``; a settings module the pytest config names wins over manage.py's,
    the config's ``python_files`` stays the project's, and a declared pytest-django is its own."""
    plain = tmp_path / "toml"
    build_tox_changedir(plain).commit("tox.toml", {"tox.ini": None, "tox.toml": TOX_TOML})
    assert detect(plain).test_cmd == f"{TEST_CMD} -c tests/pytest.ini -o testpaths=tests"

    django = tmp_path / "ini"
    build_django_app(django, settings="missing.settings").commit(
        "pytest-django configured",
        {"pytest.ini": DJANGO_INI, "requirements.txt": "Django>=4.2,<5.2\npytest-django\n"},
    )
    profile = detect(django)
    assert profile.test_cmd == (
        f"{TEST_CMD} -o pythonpath=/repo/test_project -o testpaths=test_project "
        "--ds=test_project.settings"
    )
    assert not profile.install[-1].endswith(PYTEST_DJANGO), profile.install


NAMED_ENV = """\
[tox]
envlist = lint, django

[testenv]
deps = -r{toxinidir}/requirements.txt

[testenv:lint]
commands = flake8 test_project

[testenv:django]
changedir = {toxinidir}/test_project
setenv =
    DJANGO_SETTINGS_MODULE = test_project.settings
commands = python manage.py test
"""


def test_a_named_tox_env_that_runs_the_tests_is_read(tmp_path: Path) -> None:
    """A project whose only test env is named (``[testenv:django]``, beside a lint env): its
    changedir and setenv are read; two named envs running tests from two folders are a guess,
    so the suite runs from the root."""
    named = tmp_path / "named"
    build_django_app(named, settings="").commit("named env", {"tox.ini": NAMED_ENV})
    assert detect(named).test_cmd == (
        f"{TEST_CMD} -c /dev/null -o pythonpath=/repo/test_project -o testpaths=test_project "
        "--ds=test_project.settings -o 'python_files=test*.py *_test.py *tests.py'"
    )

    two = tmp_path / "two"
    second = NAMED_ENV + "\n[testenv:checks]\nchangedir = tests\ncommands = pytest\n"
    build_tox_changedir(two).commit("two named envs", {"tox.ini": second})
    assert detect(two).test_cmd == TEST_CMD


@pytest.mark.parametrize(
    ("build", "cause"),
    [
        (lambda p: build_tox_changedir(p, changedir="nowhere"), "tox's changedir 'nowhere'"),
        (
            lambda p: build_django_app(p, settings="missing.settings"),
            "DJANGO_SETTINGS_MODULE missing.settings (from test_project/manage.py)",
        ),
    ],
)
def test_a_layout_that_cannot_be_is_one_line(build, cause: str, tmp_path: Path) -> None:
    path = tmp_path / "bad"
    build(path)
    with pytest.raises(ProfileError) as raised:
        detect(path)
    message = str(raised.value)
    assert raised.value.reason == REASON
    assert message.startswith("local/bad@") and cause in message and "\n" not in message


# --- the CLI as a user runs it --------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_layouts_yield_tasks_the_grader_resolves(repos: dict[str, Path], work: Path) -> None:
    run_dir = work / "cli"
    run_dir.mkdir()
    # two bugs a repository and no combinations: the suite is near its time budget
    extra = "inject:\n  combos: 0\n"
    params = write_params(run_dir / "params.yaml", run_dir / "cache", extra, gold_runs=1)
    bad = work / "repos" / "django_unset"
    build_django_app(bad, settings="missing.settings")
    sources = [arg for path in (*repos.values(), bad) for arg in ("--repo", str(path))]
    inject = run_cli(
        "inject", *sources, "--max-candidates", "2", "--seed", "0",
        "--params", str(params), "--output", str(run_dir / "inject"), cwd=run_dir,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    injected = json.loads((run_dir / "inject" / "summary.json").read_text())
    assert injected["coverage_unmeasured_bad_suite_layout"] == 1, injected  # counted
    line = injected["coverage_unmeasured"]
    assert line.startswith(f"local/django_unset: {REASON}: local/django_unset@"), line
    assert "missing.settings" in line and "\n" not in line
    executed = [s for s in injected["sites"] if s.startswith("local/django_app: ")]
    assert executed and " 48/48 sites executed" in executed[0], injected["sites"]

    validate = run_cli(
        "validate", "--input", str(run_dir / "inject"), "--output", str(run_dir / "val"),
        "--params", str(params), cwd=run_dir,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = pl.read_parquet(run_dir / "val" / "tasks" / "*.parquet").to_dicts()
    rejections = pl.read_parquet(run_dir / "val" / "rejections" / "*.parquet").to_dicts()
    bad_rows = [r for r in rejections if "local/django_unset" in r["detail"]]
    assert bad_rows and {r["reason"] for r in bad_rows} == {REASON}, bad_rows
    by_repo = {name: [t for t in tasks if t["repo"] == f"local/{name}"] for name in repos}
    for name, own in by_repo.items():
        assert own, (name, rejections)
        assert {t["gold_runs"] for t in own} == {"1/1"}, (name, own)
    for task in by_repo["django_app"]:
        assert "--ds=test_project.settings" in task["test_cmd"]
        assert task["FAIL_TO_PASS"] and all(
            t.startswith(f"{DJANGO_TESTS}::") for t in task["FAIL_TO_PASS"]
        ), task["FAIL_TO_PASS"]
    for task in by_repo["tox_changedir"]:
        assert all(t.startswith("tests/check_core.py::") for t in task["FAIL_TO_PASS"])

    # The seal allows pytest-django's own runtest, not another: the gold fix plus a runtest of
    # the patch's own (doing the same) is forged.
    task = by_repo["django_app"][0]
    row = {"instance_id": task["instance_id"], "model_name_or_path": "forger"}
    row["model_patch"] = task["patch"] + OWN_RUNTEST
    predictions = run_dir / "predictions.jsonl"
    predictions.write_text(json.dumps(row) + "\n")
    done = run_cli("evaluate", "--tasks", str(run_dir / "val"), "--predictions", str(predictions),
                   "--output", str(run_dir / "eval"), cwd=run_dir)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = (run_dir / "eval").rglob("evaluation.json")
    record = json.loads(path.read_text())
    assert (record["resolved"], record["reason"]) == (False, "forged_result"), record
