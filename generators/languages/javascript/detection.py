"""A JavaScript/TypeScript project as found in a working tree: package.json, Node from Debian,
npm/yarn/pnpm, its runner; and the recipe and test command that follow from what was found.

Module functions, not the ``Language`` (``language.py``), so that the profile and environment
modules, which the ``Language`` calls, use them without a circle. Detection reads the working
tree's package.json, lock files and version files: the package manager from ``packageManager``
or the lock file, the runner from the ``test`` script or the dependencies, the Node from
``node_choice.py``. jest, vitest and mocha run with their own JSON reporter, which needs nothing
installed beyond the runner; ``verifiers/reports/`` reads them. Test files follow
``test_files.py``.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import subprocess
from collections.abc import Sequence
from typing import Any

import yaml
from trajforge.generators.languages.base import Detection, ReportError
from trajforge.generators.languages.javascript.node_choice import choose_node
from trajforge.generators.languages.javascript.recipe import render_js_dockerfile
from trajforge.generators.languages.javascript.runners import REPORT_FORMATS, suite_command
from trajforge.generators.languages.javascript.script_fanout import called_scripts
from trajforge.generators.languages.javascript.workspaces import read_package, workspace_dirs
from trajforge.schemas.errors import UserError
from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports import read_report

LOCKS = (  # first match wins: (file, manager)
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
)
NEWEST_PNPM = 10  # pnpm 11 needs Node 22; 10 runs on 18 and 20 and reads lock files 6 to 9
RUNNERS = ("vitest", "jest", "mocha", "ava", "tap")  # package names that are runners
# Options the test command sets itself, dropped from a project's own mocha/node arguments.
_OWN_WITH_VALUE = ("-R", "--reporter", "-O", "--reporter-option", "--reporter-options",
                   "-t", "--timeout", "--test-reporter", "--test-reporter-destination")  # fmt: skip
# --bail/-b too: a run that stops at its first failure would hide the rest of a bug's
# FAIL_TO_PASS (the grader drops it as well)
_OWN = ("--reporter", "--reporter-option", "--timeout", "-w", "--watch", "--inspect", "--bail",
        "--test-reporter", "--test-timeout", "--experimental-test-coverage",
        "--test-coverage")  # fmt: skip
_NODE_TEST = re.compile(r"\bnode\s+((?:\S+\s+)*?--test\b.*)")  # node [opts] --test [paths]
NAME = "javascript"  # the registry's name of the language, the tasks' ``language``


def detect(repo_dir: str) -> Detection | None:
    """The package.json project in the working tree ``repo_dir``, or None when there is none."""
    package = _package_json(repo_dir)
    if package is None:
        return None
    evidence = ["package.json"]
    manager, lockfile = _manager(repo_dir, package)
    if lockfile:
        evidence.append(lockfile)
    runner = _runner(package)
    package_dir, tested = "", package
    if not _names_runner(_test_script(package)):
        package_dir, tested = _tested_workspace(repo_dir, package)
        if package_dir:
            runner = _runner(tested)
            evidence.append(f"{package_dir}/package.json")
    nvmrc = _first_file(repo_dir, (".nvmrc", ".node-version"))
    engines = _table(package, "engines").get("node")
    choice = choose_node(
        engines if isinstance(engines, str) else None,
        _read(repo_dir, nvmrc) if nvmrc else None,
        _commit_date(repo_dir),
    )
    evidence += [nvmrc] if nvmrc else []
    deps = _dependencies(package) | _dependencies(tested)
    typescript = "typescript" in deps or os.path.isfile(os.path.join(repo_dir, "tsconfig.json"))
    return Detection(
        language=NAME,
        package_manager=manager,
        runner=runner,
        runtime=choice.major,
        evidence=tuple(evidence),
        lockfile=lockfile,
        typescript=typescript,
        manager_spec=_pin(repo_dir, package, manager),
        runner_args=_runner_args(tested, runner),
        why=f"{choice.why}; runner {runner or 'none found'}"
        + (f" in workspace package {package_dir}" if package_dir else ""),
        package_dir=package_dir,
    )


def recipe(detection: Detection, install: Sequence[str] = ()) -> str:
    """The project's Dockerfile (``recipe.py``)."""
    return render_js_dockerfile(
        detection.runtime,
        detection.package_manager,
        bool(detection.lockfile),
        detection.manager_spec,
        install,
    )


def test_command(
    detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
) -> str:
    """The full-suite command (``suite_command``) with the selection's test files appended,
    as a caller appends them to a task's stored command (a runner's title filter is a
    pattern, not an id: the caller limits the statuses to the ids it selected)."""
    files = sorted({test_file(t) for t in selection})
    suite = suite_command(detection, per_test_timeout_s)
    return " ".join([suite, *(shlex.quote(f) for f in files)])


def read_runner_report(report: bytes, runner: str) -> ParsedLog:
    """``runner``'s report read by its format's parser (``verifiers/reports/``)."""
    fmt = REPORT_FORMATS.get(runner)
    if fmt is None:
        raise ReportError(f"no report format for runner {runner!r}")
    return read_report(report, fmt)


def test_file(test_id: str) -> str:
    """The file a JS test id lives in: ``src/a.test.js > sum > adds`` -> ``src/a.test.js``."""
    return test_id.split(" > ", 1)[0]


def _package_json(repo_dir: str) -> dict[str, Any] | None:
    path = os.path.join(repo_dir, "package.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{repo_dir}: package.json does not parse ({str(exc)[:120]}); fix it or leave the "
            "repository out",
            reason="bad_package_json",
        ) from None
    if not isinstance(data, dict):
        raise UserError(
            f"{repo_dir}: package.json is not a JSON object; fix it or leave the repository out",
            reason="bad_package_json",
        )
    return data


def _manager(repo_dir: str, package: dict[str, Any]) -> tuple[str, str]:
    """(package manager, lock file): the lock file decides, ``packageManager`` names yarn's
    generation when there is none; yarn.lock of berry has a ``__metadata`` block."""
    pinned = package.get("packageManager")
    pinned_name = pinned.split("@")[0] if isinstance(pinned, str) else ""
    for lockfile, manager in LOCKS:
        path = os.path.join(repo_dir, lockfile)
        if not os.path.isfile(path):
            continue
        if manager == "yarn" and (_is_berry_lock(path) or _berry_pin(pinned)):
            return "yarn-berry", lockfile
        return manager, lockfile
    if pinned_name == "yarn":
        return ("yarn-berry" if _berry_pin(pinned) else "yarn"), ""
    return (pinned_name if pinned_name in ("pnpm",) else "npm"), ""


def _pin(repo_dir: str, package: dict[str, Any], manager: str) -> str:
    """The manager's version: package.json's ``packageManager`` pin (corepack's name@x.y.z, its
    hash dropped) when it names the manager chosen (a pnpm newer than Debian's Nodes run:
    ``NEWEST_PNPM``, which reads the same lock file); else pnpm's major by its lock file's
    ``lockfileVersion``; else "" (the recipe's default)."""
    pinned = package.get("packageManager")
    if isinstance(pinned, str):
        spec = pinned.split("+", 1)[0]
        name, _, version = spec.partition("@")
        exact = re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", version)
        if exact and manager.split("-")[0] == name:
            too_new = name == "pnpm" and int(version.split(".")[0]) > NEWEST_PNPM
            return f"pnpm@{NEWEST_PNPM}" if too_new else spec
    if manager == "pnpm":
        return _pnpm_for_lock(repo_dir)
    return ""


def _pnpm_for_lock(repo_dir: str) -> str:
    """The pnpm major that reads the lock file's format (5.3: 6, 5.4: 7, 6.x: 8, 9.x: 9, or 10
    when ``pnpm-workspace.yaml`` is pnpm 10's settings file with no ``packages``, which pnpm 9
    refuses: "packages field missing or empty", as ai/nanoid's)."""
    path = os.path.join(repo_dir, "pnpm-lock.yaml")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as handle:
        match = re.search(r"lockfileVersion:\s*'?(\d+)\.?(\d*)", handle.read(512))
    if match is None:
        return ""
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    if major >= 9:
        return f"pnpm@{NEWEST_PNPM}" if _settings_only_workspace(repo_dir) else "pnpm@9"
    if major >= 6:
        return "pnpm@8"
    return "pnpm@7" if minor >= 4 else "pnpm@6"


def _settings_only_workspace(repo_dir: str) -> bool:
    """Whether ``pnpm-workspace.yaml`` exists and names no ``packages`` (pnpm 10's settings)."""
    path = os.path.join(repo_dir, "pnpm-workspace.yaml")
    if not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            said = yaml.safe_load(handle.read(256 * 1024))
    except (yaml.YAMLError, OSError, RecursionError, ValueError):
        return False
    return not (isinstance(said, dict) and said.get("packages"))


def _berry_pin(pinned: Any) -> bool:
    if not isinstance(pinned, str) or not pinned.startswith("yarn@"):
        return False
    major = pinned[5:].split(".")[0]
    return major.isdigit() and int(major) >= 2


def _is_berry_lock(path: str) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return "__metadata:" in handle.read(4096)


def _runner(package: dict[str, Any]) -> str:
    """The runner the ``test`` script calls (first named), else one in the dependencies."""
    script = _test_script(package)
    if script:
        words = re.findall(r"[\w@/.-]+", script)
        for word in words:
            name = posixpath.basename(word)
            if name in RUNNERS:
                return name
            if name == "react-scripts" and "test" in words:
                return "jest"
        if _NODE_TEST.search(script):
            return "node"
    deps = _dependencies(package)
    return next((runner for runner in RUNNERS if runner in deps), "")


def _test_script(package: dict[str, Any]) -> str:
    """The ``test`` script, or the script it starts (``npm run test-ci``, ``yarn test:unit``,
    a fan-out's ``run-p test:*``, ``concurrently "npm:test:*"``, ``pnpm run /^test:/``:
    ``script_fanout.py``; three deep at most) that names a runner when the ``test`` script
    does not: the first in order that leads to one, else the last started."""
    scripts = _table(package, "scripts")
    script = scripts.get("test")
    for _ in range(3):
        if not isinstance(script, str):
            return ""
        if _names_runner(script):
            return script
        nested = _started(script, scripts)
        if not nested:
            return script
        leading = [n for n in nested if _leads_to_runner(n, scripts, 2)]
        script = leading[0] if leading else nested[-1]
    return script if isinstance(script, str) else ""


def _started(script: str, scripts: dict[str, Any]) -> list[str]:
    """The commands of the package scripts ``script`` starts (not itself)."""
    called = (scripts[name] for name in called_scripts(script, scripts))
    return [command for command in called if isinstance(command, str) and command != script]


def _leads_to_runner(script: str, scripts: dict[str, Any], depth: int) -> bool:
    if _names_runner(script):
        return True
    return depth > 0 and any(
        _leads_to_runner(nested, scripts, depth - 1) for nested in _started(script, scripts)
    )


def _tested_workspace(repo_dir: str, package: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The first workspace package whose ``test`` script names a runner, with its package.json;
    ("", the root's) when there is none (``workspaces.py``)."""
    for rel in workspace_dirs(repo_dir, package):
        member = read_package(repo_dir, rel)
        if member is not None and _names_runner(_test_script(member)):
            return rel, member
    return "", package


def _names_runner(script: str) -> bool:
    return bool(_NODE_TEST.search(script)) or any(
        re.search(rf"\b{runner}\b", script) for runner in RUNNERS
    )


def _runner_args(package: dict[str, Any], runner: str) -> tuple[str, ...]:
    """mocha's or node's arguments in the ``test`` script (spec paths, ``--require``,
    ``--import tsx``...), without what the test command sets itself (reporter, watch, time
    limit); other runners read their configuration files. Shell text from the repository:
    split, and quoted when used."""
    script = _test_script(package)
    segments = re.split(r"&&|\|\||;|\|", script)
    if runner == "mocha":
        found = [seg.split("mocha", 1)[1] for seg in segments if "mocha" in seg]
    elif runner == "node":
        found = [m.group(1) for seg in segments if (m := _NODE_TEST.search(seg))]
    else:
        return ()
    try:
        words = shlex.split(found[0]) if found else []
    except ValueError:
        return ()
    args: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _OWN_WITH_VALUE:
            skip = True
        elif word == "-b":
            continue
        elif not word.startswith(_OWN) and not word.startswith("$") and word != "--test":
            args.append(word)
    return tuple(args)


def _dependencies(package: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for key in ("dependencies", "devDependencies"):
        names |= set(_table(package, key))
    return names


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _first_file(repo_dir: str, names: Sequence[str]) -> str:
    return next((n for n in names if os.path.isfile(os.path.join(repo_dir, n))), "")


def _read(repo_dir: str, name: str) -> str:
    with open(os.path.join(repo_dir, name), encoding="utf-8", errors="replace") as handle:
        return handle.read(200)


def _commit_date(repo_dir: str) -> str | None:
    """HEAD's commit date (ISO), None outside a git repository."""
    try:
        out = subprocess.run(
            ["git", "-C", repo_dir, "log", "-1", "--format=%cI"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
