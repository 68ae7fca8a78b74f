"""Ranked install sets: the commands an environment may install with, widest first (lock file,
extras and groups, tox or nox, requirements files), each with the test runner pinned by era.

``encode_set``/``decode_set`` store the alternatives on the profile, so prepare can fall back to
the next set when one does not install.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from trajforge.generators.environments.commit_files import decode_all, read_paths
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.languages.python.declarations import (
    _MAIN_REQUIREMENTS,
    _dedupe,
    _editable_command,
    _expand_group,
    _group_requirements,
    _in_tests_folder,
    _included_files,
    _ini_get,
    _ini_section,
    _installable,
    _load_ini,
    _pip,
    _pip_r,
    _repo_file,
    _requirement_files,
    _requirement_name,
    _table,
    _test_extras,
)
from trajforge.generators.languages.python.lockfiles import EXPORTABLE_LOCKS, locked_pins
from trajforge.generators.languages.python.relax import is_direct_reference, pypi_release
from trajforge.generators.languages.python.tox_nox import (
    _nox_installs,
    _parses,
    _split_factors,
    _split_requirements,
    _tox_deps,
)

UPGRADE_PIP = "pip install --upgrade pip setuptools wheel"


# coverage: per-test contexts (bug injection); pytest-timeout: a hanging test fails alone
# (validate.per_test_timeout_s), the rest of the suite decides
INSTALL_PYTEST = "pip install pytest coverage pytest-timeout"


# pytest-timeout 2.3 and later need pytest 7; 2.2 runs on pytest 5 and 6
TIMEOUT_PLUGIN_FOR_PYTEST_6 = "'pytest-timeout<2.3'"


# The first day of each pytest major: a commit older than a major gets the one before it, so a
# suite written for pytest 8 with filterwarnings=error does not meet pytest 9's new deprecations.
# The floor per Python is the oldest major that runs on it at all.
PYTEST_MAJORS = (("2020-07-28", 6), ("2022-02-03", 7), ("2024-01-27", 8), ("2025-11-05", 9))


PYTEST_FLOOR = {"3.8": 6, "3.9": 6, "3.10": 7, "3.11": 7, "3.12": 8, "3.13": 8, "3.14": 9}


# Groups (and requirements files) for docs, lint, type checking and releases: the tests need none
# of them, and their newest pins are what most often fails to install (sphinx>=9.1 on 3.11).
_TOOL_WORDS = frozenset(
    {"doc", "docs", "documentation", "sphinx", "lint", "linting", "linters", "style", "fix"}
    | {"format", "formatting", "type", "types", "typing", "typecheck", "mypy", "release"}
    | {"publish", "pkg-meta", "meta", "build", "dist", "pre-commit", "precommit", "bench"}
)


_TOOL_DISTS = frozenset(
    {"sphinx", "furo", "towncrier", "twine", "ty", "mypy", "pyright", "ruff", "black", "isort"}
    | {"flake8", "pylint", "pre-commit", "codespell", "check-manifest", "build", "pyroma"}
    | {"myst-parser", "mkdocs", "pydocstyle", "pycodestyle", "autopep8", "yapf", "bandit"}
    | {"tox", "nox", "interrogate", "pyupgrade", "readme-renderer", "docformatter"}
    | {"alabaster", "reno", "poethepoet", "pydata-sphinx-theme", "zest-releaser", "bump2version"}
)


_TOOL_PREFIXES = ("sphinx", "types-", "mkdocs", "flake8-", "furo", "tox-", "pre-commit-")


@dataclass(frozen=True)
class InstallSet:
    """One way to install the project for its tests; detection ranks several, widest first."""

    name: str
    commands: tuple[str, ...]
    # How prepare's relaxation ladder (relax.py) changed it: the rung, the day it resolves as of
    # (uv's --exclude-newer; "" for today), the Debian packages the build stage gets first.
    rung: str = "declared"
    exclude_newer: str = ""
    apt: tuple[str, ...] = ()


def _is_tool(requirement: str) -> bool:
    """A docs, lint, type-checking or release tool: what no test imports."""
    name = _requirement_name(requirement)
    return name in _TOOL_DISTS or name.startswith(_TOOL_PREFIXES)


def _installable_here(requirements: Iterable[str]) -> list[str]:
    """Requirements with each VCS or URL reference replaced by the PyPI release of the name the
    project gave it (``lightning @ git+https://...`` -> ``lightning``), or left out when it
    names none (offline, or a private host)."""
    return [found for r in requirements for found in [pypi_release(r)] if found]


def _without_tools(requirements: Iterable[str]) -> list[str]:
    """A catch-all list (a ``dev`` group) without its docs/lint/type/release tools. Test-named
    sources keep theirs: a suite may run mypy on purpose (schema's tests do)."""
    return [r for r in requirements if not _is_tool(r)]


def _is_tool_name(name: str) -> bool:
    words = set(re.split(r"[^a-z0-9]+", name.lower())) | {canonicalize_name(name)}
    return bool(words & _TOOL_WORDS)


def _test_group_requirements(pyproject: dict[str, Any] | None) -> list[str]:
    """The test groups' requirements (``dev`` only when no test group exists), with included
    docs/lint/type/release groups left out."""
    groups = {
        str(canonicalize_name(k)): v for k, v in _table(pyproject, "dependency-groups").items()
    }
    names: list[str] = [n for n in ("test", "tests", "testing") if n in groups]
    tools = frozenset(n for n in groups if _is_tool_name(n))
    found: list[str] = []
    for name in names or ["dev"]:
        found += _expand_group(groups, name, tools)
    found = _installable_here(_dedupe(found))
    return found if names else _without_tools(found)


def _requirements_step(path: str, texts: dict[str, str]) -> list[str]:
    """``pip install -r path``, or its plain requirements inline when the file also names VCS or
    URL requirements or another index (which would fail the whole file)."""
    text = texts.get(path)
    if text is None:
        return [_pip_r(path)]
    lines = [re.sub(r"(^|\s)#.*$", "", line).strip() for line in text.splitlines()]
    risky = [
        line
        for line in lines
        if is_direct_reference(line) or line.startswith(("-i", "--index-url", "--extra-index"))
    ]
    if not risky:
        return [_pip_r(path)]
    steps: list[str] = []
    plain: list[str] = []
    for line in lines:
        if line.startswith(("-r", "--requirement")):
            included = _repo_file(re.sub(r"^(-r|--requirement)=?", "", line), set(texts))
            steps += [_pip_r(included)] if included else []
        elif line and not line.startswith("-"):
            plain += [line] if is_direct_reference(line) else _split_requirements(line)
    plain = _installable_here(plain)
    return steps + ([_pip(plain)] if plain else [])


def runner_requirement(python: str, committed: str | None) -> str:
    """The test runner to install: pytest of the commit's era, never below what runs on Python,
    with the per-test time limit's plugin of a release that runs on that pytest."""
    floor = PYTEST_FLOOR.get(python, 7)
    later = [major for day, major in PYTEST_MAJORS if committed and committed < day]
    if not later:
        return INSTALL_PYTEST
    below = max(later[0], floor + 1)
    if below > PYTEST_MAJORS[-1][1]:
        return INSTALL_PYTEST
    plugin = TIMEOUT_PLUGIN_FOR_PYTEST_6 if below <= 7 else "pytest-timeout"
    return f"pip install 'pytest<{below}' coverage {plugin}"


def _install_sets(
    texts: dict[str, str],
    paths: set[str],
    python: str,
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
    runner: str,
) -> tuple[list[InstallSet], list[str]]:
    """The ranked install sets (widest first, each narrower one a retry when a wider one fails to
    install) and the requirements files they name."""
    main_files = [p for p in _MAIN_REQUIREMENTS if p in texts]
    test_files = [
        p for p in _requirement_files(texts) if p not in main_files and not _is_tool_name(p)
    ] + sorted(p for p in texts if _in_tests_folder(p))
    main = [step for path in main_files for step in _requirements_step(path, texts)]
    tests_files = [step for path in test_files for step in _requirements_step(path, texts)]
    installable = _installable(paths, pyproject, setup_cfg)
    extras = _test_extras(pyproject, setup_cfg, texts.get("setup.py", ""))
    package = [_editable_command(extras)] if installable else []
    bare = [_editable_command([])] if installable else []
    group_reqs = _test_group_requirements(pyproject)
    groups = [_pip(group_reqs)] if group_reqs else []
    runners: list[str] = []
    runner_files: list[str] = []
    for files, requirements in (
        _tox_deps(texts.get("tox.ini", ""), python, paths),
        _nox_installs(texts.get("noxfile.py", ""), paths),
    ):
        files = [f for f in files if not _is_tool_name(f)]
        runner_files += files
        runners += [step for path in files for step in _requirements_step(path, texts)]
        kept = _installable_here(requirements)
        runners += [_pip(kept)] if kept else []
    lock = _lock_steps(texts, python, pyproject, setup_cfg, installable)
    candidates = [
        *([("lock", lock)] if lock else []),  # what the project last resolved to, first
        ("tests+tox/nox", main + package + groups + tests_files + runners),
        ("tests", main + package + groups + tests_files),
        ("extras", main + package),
        ("package", main + bare),
        ("package-only", bare),
    ]
    sets: list[InstallSet] = []
    for name, steps in candidates:
        if installable and steps and steps[-1] not in (*package, *bare):
            # a test dependency that depends on the project (filelock's tools need filelock)
            # replaces the editable install with PyPI's release: link /repo back last
            steps = [*steps, RELINK]
        commands = tuple(_dedupe([UPGRADE_PIP, *steps, runner]))
        if all(commands != s.commands for s in sets) and (steps or not sets):
            sets.append(InstallSet(name, commands))
    return sets, _dedupe(main_files + test_files + runner_files)


def _lock_steps(
    texts: dict[str, str],
    python: str,
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
    installable: bool,
) -> list[str]:
    """The project's lock file (``lockfiles.py``) as pinned installs, then the project itself
    with no dependencies of its own resolving: what the project last resolved to. [] without
    a lock."""
    own = (
        _table(pyproject, "project").get("name")
        or _table(pyproject, "tool", "poetry").get("name")
        or _ini_get(setup_cfg, "metadata", "name")
    )
    for path in EXPORTABLE_LOCKS:
        pins = locked_pins(path, texts.get(path, ""), python, own if isinstance(own, str) else None)
        if pins:
            return [_pip(pins), *([RELINK] if installable else [])]
    return []


def _declared_requirements(
    texts: dict[str, str],
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
) -> list[str]:
    """Every requirement the project names anywhere (all extras, groups, tox deps, requirements
    files): the pool a repair draws from when a test imports something not installed."""
    found: list[str] = []
    for values in _table(pyproject, "project", "optional-dependencies").values():
        found += [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
    groups = {
        str(canonicalize_name(k)): v for k, v in _table(pyproject, "dependency-groups").items()
    }
    for name in groups:
        found += _expand_group(groups, name, frozenset())
    for value in _ini_section(setup_cfg, "options.extras_require").values():
        found += [line.strip() for line in value.splitlines() if line.strip()]
    for path, text in texts.items():
        if path.endswith(".txt"):
            found += [
                line.split("#")[0].strip()
                for line in text.splitlines()
                if line.strip() and not line.strip().startswith(("-", "#"))
            ]
    parser = _load_ini(texts.get("tox.ini", ""))
    for line in (_ini_get(parser, "testenv", "deps") or "").splitlines():
        dep = _split_factors(re.sub(r"(^|\s)#.*$", "", line).strip())[1]
        if dep and not dep.startswith(("-", ".", "/")) and "{" not in dep:
            found += _split_requirements(dep)
    own = _table(pyproject, "project").get("name") or _ini_get(setup_cfg, "metadata", "name")
    own_name = canonicalize_name(own) if isinstance(own, str) else None
    return [  # never the project itself ("widget[test]"): PyPI's release would replace /repo's
        r
        for r in _dedupe(found)
        if _parses(r) and not is_direct_reference(r) and _requirement_name(r) != own_name
    ]


def encode_set(install_set: InstallSet) -> str:
    """An install set as one string (``name<TAB>cmd<LF>cmd...``) for the profile's row."""
    return install_set.name + "\t" + "\n".join(install_set.commands)


def decode_set(encoded: str) -> InstallSet:
    name, _, commands = encoded.partition("\t")
    return InstallSet(name, tuple(commands.split("\n")) if commands else ())


def _legacy_install_commands(
    texts: dict[str, str],
    paths: set[str],
    python: str,
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
) -> tuple[list[str], list[str]]:
    """The pre-ranking detector's one install (everything at once, newest pytest), kept as the
    baseline ``benchmarks/environments.py`` measures the ranked sets against."""
    req_files = _requirement_files(texts)
    commands = [UPGRADE_PIP, *(_pip_r(p) for p in req_files)]
    if _installable(paths, pyproject, setup_cfg):
        commands.append(
            _editable_command(_test_extras(pyproject, setup_cfg, texts.get("setup.py", "")))
        )
    groups = _group_requirements(pyproject)
    if groups:
        commands.append(_pip(groups))
    for files, requirements in (
        _tox_deps(texts.get("tox.ini", ""), python, paths),
        _nox_installs(texts.get("noxfile.py", ""), paths),
    ):
        req_files += files
        commands += [_pip_r(f) for f in files]
        if requirements:
            commands.append(_pip(requirements))
    commands.append(INSTALL_PYTEST)
    return _dedupe(commands), _dedupe(req_files)


def _read_includes(
    repo_path: str,
    commit: str,
    tree: dict[str, tuple[str, str]],
    texts: dict[str, str],
    roots: list[str],
) -> list[str]:
    """The requirements files installed, with everything they -r/-c include (read as needed)."""
    used: list[str] = []
    pending = list(roots)
    while pending:
        missing = [p for p in pending if p not in texts and p in tree]
        texts.update(decode_all(read_paths(repo_path, commit, tree, missing)))
        fresh = [p for p in _dedupe(pending) if p in texts and p not in used]
        used += fresh
        pending = [inc for p in fresh for inc in _included_files(p, texts[p]) if inc not in used]
    return used
