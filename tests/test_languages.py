"""The language layer without Docker: Python's answers are exactly today's code's, JavaScript's
detection (package manager, runner, Node), its commands and reports, recipes, the registry."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from repo_factory import RepoBuilder, build_add_fix_repo
from trajforge.generators.languages.base import Detection, ReportError
from trajforge.generators.languages.javascript.language import REPORT_PATH, JavaScript
from trajforge.generators.languages.javascript.node_choice import choose_node, satisfies
from trajforge.generators.languages.javascript.operators import JS_OPERATORS
from trajforge.generators.languages.javascript.recipe import render_js_dockerfile
from trajforge.generators.languages.javascript.test_files import is_js_test_path
from trajforge.generators.languages.python.operators import OPERATORS
from trajforge.generators.languages.python.profile import JUNIT_PATH, TEST_CMD, detect_profile
from trajforge.generators.languages.registry import (
    BY_NAME,
    DEFAULT,
    LANGUAGES,
    for_repo,
    language_named,
    spelled,
)
from trajforge.schemas.errors import UserError
from trajforge.schemas.test_ids import is_test_path

JS = JavaScript()
PATHS = ("tests/test_a.py", "src/a.py", "conftest.py", "a/__tests__/b.js", "src/b.test.ts",
         "src/b.ts", "spec/x.js", "lib/x.spec.mjs", "docs/x.md", "test/x.js")  # fmt: skip


def _js_repo(tmp_path, files: dict[str, str]) -> RepoBuilder:
    repo = RepoBuilder(tmp_path / "js")
    repo.commit("js", files)
    return repo


def test_python_delegates_every_answer_to_todays_code(tmp_path):
    repo = build_add_fix_repo(tmp_path / "calc")
    profile = detect_profile(str(repo.path), "HEAD", "calc")
    language, detection = for_repo(str(repo.path))
    assert language.name == "python" and detection.runtime == profile.python
    assert language.render_recipe(detection, profile.install) == profile.recipe
    assert language.test_command(detection) == TEST_CMD == profile.test_cmd
    assert language.report_path(detection) == JUNIT_PATH
    assert language.bug_operators() is OPERATORS
    assert [language.is_test_file(p) for p in PATHS] == [is_test_path(p) for p in PATHS]
    limited = language.test_command(detection, ("tests/t.py::test_a",), per_test_timeout_s=7)
    assert limited == f"{TEST_CMD} --timeout=7 --timeout-method=signal tests/t.py::test_a"


def test_a_python_project_with_a_package_json_stays_python(tmp_path):
    repo = build_add_fix_repo(tmp_path / "calc")
    repo.commit("docs tooling", {"package.json": json.dumps({"devDependencies": {"jest": "1"}})})
    assert for_repo(str(repo.path))[0].name == "python"
    assert for_repo(str(tmp_path)) is None  # neither


@pytest.mark.parametrize(
    ("files", "manager", "lockfile", "spec"),
    [
        ({"package-lock.json": "{}"}, "npm", "package-lock.json", ""),
        ({}, "npm", "", ""),
        ({"yarn.lock": "# yarn lockfile v1\n"}, "yarn", "yarn.lock", ""),
        ({"yarn.lock": "__metadata:\n  version: 6\n"}, "yarn-berry", "yarn.lock", ""),
        ({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, "pnpm", "pnpm-lock.yaml", "pnpm@8"),
        ({"pnpm-lock.yaml": "lockfileVersion: '9.0'\n"}, "pnpm", "pnpm-lock.yaml", "pnpm@9"),
        # pnpm 10's settings file (no packages: pnpm 9 refuses it), and a workspace pnpm 9 reads
        ({"pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
          "pnpm-workspace.yaml": "onlyBuiltDependencies: [esbuild]\n"},
         "pnpm", "pnpm-lock.yaml", "pnpm@10"),
        ({"pnpm-lock.yaml": "lockfileVersion: '9.0'\n", "pnpm-workspace.yaml": "packages: [a]\n"},
         "pnpm", "pnpm-lock.yaml", "pnpm@9"),
    ],
)  # fmt: skip
def test_the_lock_file_decides_the_package_manager(tmp_path, files, manager, lockfile, spec):
    package = {"name": "x", "devDependencies": {"jest": "^29"}}
    repo = _js_repo(tmp_path, {"package.json": json.dumps(package), **files})
    detection = JS.detect(str(repo.path))
    assert (detection.package_manager, detection.lockfile, detection.manager_spec) == (
        manager, lockfile, spec,
    )  # fmt: skip


def test_package_manager_pin_and_runner_from_the_test_script(tmp_path):
    package = {
        "packageManager": "yarn@4.1.0+sha512.abc",
        "scripts": {"test": "cross-env NODE_ENV=test vitest run --coverage"},
        "devDependencies": {"jest": "^29", "vitest": "^1", "typescript": "^5"},
    }
    repo = _js_repo(tmp_path, {"package.json": json.dumps(package), ".nvmrc": "v16.20.0\n"})
    detection = JS.detect(str(repo.path))
    assert (detection.package_manager, detection.manager_spec) == ("yarn-berry", "yarn@4.1.0")
    assert detection.runner == "vitest" and detection.typescript
    assert detection.runtime == "18" and ".nvmrc" in detection.evidence  # first node >= 16


def test_mocha_keeps_the_projects_own_arguments_but_not_its_reporter(tmp_path):
    script = (
        "nyc mocha --reporter spec --bail --check-leaks -b -t 5000 --require test/setup.js test/"
        " && lint"
    )  # --bail/-b: a first failure must not hide the rest of a bug's FAIL_TO_PASS
    package = {"scripts": {"test": script}, "devDependencies": {"mocha": "^10"}}
    detection = JS.detect(str(_js_repo(tmp_path, {"package.json": json.dumps(package)}).path))
    assert detection.runner_args == ("--check-leaks", "--require", "test/setup.js", "test/")
    command = JS.test_command(detection, per_test_timeout_s=3)
    assert "set -- test/; node_modules/.bin/mocha --check-leaks --require test/setup.js " in command
    assert "--reporter json --reporter-options output=/tmp/trajforge-report.json" in command


def test_the_runner_is_found_through_the_script_the_test_script_runs(tmp_path):
    scripts = {"test": "npm run lint && npm run test-ci", "lint": "eslint lib",
               "test-ci": "nyc --reporter=lcov mocha --require test/support/env"}  # fmt: skip
    package = {"scripts": scripts, "devDependencies": {"mocha": "9.2.2", "jest": "1"}}
    detection = JS.detect(str(_js_repo(tmp_path, {"package.json": json.dumps(package)}).path))
    assert detection.runner == "mocha"  # the script's runner, before a dependency's
    assert detection.runner_args == ("--require", "test/support/env")


def test_a_broken_package_json_is_one_line(tmp_path):
    repo = _js_repo(tmp_path, {"package.json": "{ not json"})
    with pytest.raises(UserError) as caught:
        JS.detect(str(repo.path))
    assert caught.value.reason == "bad_package_json" and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("engines", "nvmrc", "committed", "major"),
    [
        (None, None, "2019-06-01", "12"),
        (None, None, "2023-03-01", "18"),
        (None, None, "2025-03-01", "20"),
        (">=14", None, "2019-06-01", "18"),  # nearest the era that the range allows
        ("^16 || ^18", None, "2025-03-01", "18"),
        (">=12 <17", None, "2025-03-01", "12"),
        ("14.x || 16.x", None, "2025-03-01", "18"),  # no Debian node fits: the next above
        (">=22", None, "2019-06-01", "20"),
        (None, "lts/iron", "2019-06-01", "20"),
        (">=18", "12", "2025-03-01", "12"),  # .nvmrc is the project's own word
    ],
)
def test_node_by_nvmrc_engines_then_era(engines, nvmrc, committed, major):
    assert choose_node(engines, nvmrc, committed).major == major


def test_semver_ranges():
    assert satisfies((18, 20, 4), ">= 14.17.0")
    assert satisfies((18, 20, 4), "^18.0.0") and not satisfies((18, 20, 4), "^18.21")
    assert satisfies((12, 22, 12), "10 - 12") and not satisfies((20, 19, 2), "10 - 12")
    assert satisfies((20, 19, 2), "20.x") and not satisfies((20, 19, 2), "~20.20")
    assert not satisfies((18, 20, 4), "rm -rf /")


def test_javascript_hands_out_the_tree_sitter_operators():
    assert JS.bug_operators() is JS_OPERATORS and "flip_comparison" in JS_OPERATORS


def test_javascript_asks_mining_for_test_files():
    assert [JS.is_test_file(p) for p in PATHS] == [is_js_test_path(p) for p in PATHS]
    assert JS.is_test_file("a/__tests__/b.js") and not JS.is_test_file("src/b.ts")


def _report(*results) -> str:
    return json.dumps({"success": False, "testResults": list(results)})


def _case(title, status, *ancestors):
    return {"ancestorTitles": list(ancestors), "title": title, "status": status}


def test_parse_report_reads_each_runners_own_format():
    jest = _report(
        {"name": "/repo/src/a.test.js", "status": "failed", "assertionResults": [
            _case("adds", "passed", "math", "add"), _case("subtracts", "failed", "math"),
        ]},
    )  # fmt: skip
    statuses = {"src/a.test.js > math > add > adds": "PASSED",
                "src/a.test.js > math > subtracts": "FAILED"}  # fmt: skip
    assert JS.parse_report(jest, "jest") == statuses
    mocha = {"stats": {"passes": 1, "failures": 0, "pending": 0}, "passes": [
        {"title": "adds", "fullTitle": "math adds", "file": "/repo/test/a.js"}],
        "failures": [], "pending": []}  # fmt: skip
    assert list(JS.parse_report(json.dumps(mocha), "mocha").values()) == ["PASSED"]
    for text, runner in (("not json", "jest"), (jest, "karma")):
        with pytest.raises(ReportError) as caught:
            JS.parse_report(text, runner)
        assert "\n" not in str(caught.value)


def test_test_commands_write_the_report_with_a_time_limit():
    base = Detection("javascript", "npm", "jest", "18", ("package.json",))
    picked = ("src/a.test.js > math > adds", "src/a.test.js > math > subtracts")
    jest = JS.test_command(base, picked, per_test_timeout_s=3)
    assert f"--outputFile={REPORT_PATH}" in jest and "--testTimeout=3000" in jest
    assert jest.endswith("' jest src/a.test.js") and "${1:+--runTestsByPath}" in jest
    vitest = JS.test_command(dataclasses.replace(base, runner="vitest"), (), 2)
    assert vitest.startswith("node_modules/.bin/vitest run --reporter=json")
    mocha = JS.test_command(dataclasses.replace(base, runner="mocha"), (), 2)
    assert f"output={REPORT_PATH}" in mocha and "--timeout 2000" in mocha
    with pytest.raises(UserError) as caught:
        JS.test_command(dataclasses.replace(base, runner=""))
    assert caught.value.reason == "unsupported_runner"


@pytest.mark.parametrize("runner", ["jest", "vitest", "mocha"])
def test_test_files_appended_to_the_suite_command_reach_the_runner(tmp_path, runner):
    """A stored full-suite command plus trailing files (as a caller appends them) runs the
    runner with exactly those files; without files, with the project's own spec paths."""
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / runner).write_text('#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\n')
    (bin_dir / runner).chmod(0o755)
    detection = Detection(
        "javascript", "npm", runner, "18", (), runner_args=("--require", "r.js", "spec/")
    )
    suite = JS.suite_command(detection, per_test_timeout_s=2)
    assert JS.test_command(detection, ("a b.test.js > x > y", "c.test.js > z"), 2) == (
        f"{suite} 'a b.test.js' c.test.js"
    )

    def args(command: str) -> list[str]:
        out = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True)
        return [line[4:] for line in out.stdout.splitlines() if line.startswith("arg:")]

    picked = args(f"{suite} 'a b.test.js' c.test.js")
    assert picked[-2:] == ["a b.test.js", "c.test.js"]
    whole = args(suite)
    assert "a b.test.js" not in whole
    if runner == "jest":
        assert picked[-3] == "--runTestsByPath" and "--runTestsByPath" not in whole
    if runner == "mocha":
        assert (
            whole[-1] == "spec/" and "spec/" not in picked and picked[:2] == ["--require", "r.js"]
        )


@pytest.mark.parametrize(
    ("manager", "locked", "line"),
    [
        ("npm", True, "npm ci"),
        ("npm", False, "npm install"),
        ("yarn", True, "yarn install --frozen-lockfile"),
        ("yarn-berry", True, "yarn install --immutable"),
        ("pnpm", True, "pnpm install --frozen-lockfile"),
    ],
)
def test_recipe_installs_from_the_lock_file(manager, locked, line):
    recipe = render_js_dockerfile("18", manager, locked)
    assert "FROM ${BASE} AS build" in recipe and "ARG BASE=trajforge-base:node18" in recipe
    build, final = recipe.split("\nFROM ${BASE}\n")
    assert line in build and "npm" not in final.split("COPY --from=build")[0].split("ENV")[0]
    assert "COPY --from=build /tmp/trajforge-out/ /repo/" in final  # node_modules, no network


def test_recipe_refuses_a_package_manager_pin_that_is_not_one():
    assert "npm install -g @yarnpkg/cli-dist@4.1.0 && yarn" in render_js_dockerfile(
        "20", "yarn-berry", True, "yarn@4.1.0"
    )
    assert "npm install -g @yarnpkg/cli-dist && yarn" in render_js_dockerfile(
        "20", "yarn-berry", True
    )
    assert "npm install -g pnpm@9" in render_js_dockerfile("18", "pnpm", True, "pnpm@9")
    assert "npm install -g yarn@1" in render_js_dockerfile("18", "yarn", True)
    with pytest.raises(ValueError):
        render_js_dockerfile("20", "yarn-berry", True, "yarn@4; curl evil | sh")


# --- the registry and the callers' interface --------------------------------------------------


def test_the_registry_names_each_language_once_and_resolves_dataset_spellings():
    names = [language.name for language in LANGUAGES]
    spellings = [s for language in LANGUAGES for s in (language.name, *language.aliases)]
    assert DEFAULT is LANGUAGES[0] and DEFAULT.name == "python"
    assert len(spellings) == len(set(spellings)) and all(s == s.lower() for s in spellings)
    assert [language_named(name) for name in names] == list(LANGUAGES)
    assert spelled("py") is DEFAULT and spelled(" TypeScript ") is spelled("js") is BY_NAME[JS.name]
    assert spelled("JavaScript") is BY_NAME[JS.name] and spelled("golang") is BY_NAME["go"]
    assert spelled("rust") is None


def test_an_unknown_language_name_is_one_line():
    with pytest.raises(UserError) as raised:
        language_named("cobol")
    message = str(raised.value)
    assert "\n" not in message and "'cobol'" in message and "javascript, python" in message
    assert raised.value.reason == "unknown_language"


@pytest.mark.parametrize(
    ("path", "python", "javascript"),
    [
        ("pkg/core.py", True, False), ("setup.py", False, False),
        ("tests/test_a.py", False, False), ("src/stats.js", False, True),
        ("src/a.d.ts", False, False), ("vite.config.ts", False, False),
        ("dist/a.js", False, False), ("src/a.test.js", False, False),
        ("Gruntfile.js", False, False),
    ],
)  # fmt: skip
def test_library_sources_are_each_languages_own(path, python, javascript):
    assert (DEFAULT.is_library_source(path), JS.is_library_source(path)) == (python, javascript)


def test_suite_files_and_mining_rules_are_each_languages_own():
    assert DEFAULT.is_suite_file("tests/test_a.py") and not DEFAULT.is_suite_file(
        "tests/conftest.py"
    )
    assert JS.is_suite_file("src/a.test.ts") and not JS.is_suite_file("node_modules/a/a.test.js")
    assert DEFAULT.is_source_file("ext/speed.c") and not DEFAULT.is_generated("package-lock.json")
    assert JS.is_generated("package-lock.json") and not JS.is_source_file("README.md")


def test_only_python_writes_model_bugs_and_probes_collection():
    assert [(lang.writes_model_bugs, lang.probes_collection) for lang in LANGUAGES] == [
        (True, True),
        (False, False),
        (False, False),
    ]


def test_each_language_says_its_prompts():
    assert "Python repository" in DEFAULT.agent_system_prompt("pytest")
    assert "npx jest" in JS.agent_system_prompt("npx jest")
    assert (DEFAULT.issue_text.prompt.fence, JS.issue_text.prompt.fence) == ("python", "javascript")
    assert DEFAULT.issue_text.prompt.version != JS.issue_text.prompt.version
