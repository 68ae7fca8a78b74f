"""Detect how to install and test a Python repository at a commit, with no per-repo spec.

Everything is read from the packaging files alone (pyproject.toml, setup.py, setup.cfg,
requirements files, tox.ini, noxfile.py), so any repository gets an environment without a
hand-written recipe. ``profile_id`` hashes the normalised dependency declarations, not whole
files: a release commit that only bumps the version keeps its image.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.environments.lockfiles import EXPORTABLE_LOCKS, locked_pins
from trajforge.generators.environments.python_choice import (
    LOCK_FILES,
    Choice,
    NoSupportedPython,
    choose,
    declared_ranges,
    is_evidence_file,
    lock_head,
    named_pythons,
)
from trajforge.generators.environments.recipe import image_name, render_dockerfile
from trajforge.generators.environments.relax import is_direct_reference, pypi_release
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import content_id
from trajforge.verifiers.sandbox.base import REPO_DIR
from trajforge.verifiers.sandbox.git_tree import GitError, git

JUNIT_PATH = "/tmp/trajforge-junit.xml"
# --rootdir: a run of selected tests (a rerun) that all sit under a folder with its own pytest.ini
# would otherwise root there, and its test ids would not be the full run's.
TEST_CMD = (
    f"python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --rootdir={REPO_DIR} "
    f"--junitxml={JUNIT_PATH}"
)
PROFILE_FORMAT = "profile-v4"  # v4: ranked install sets, the runner pinned by era
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

# Extras and dependency groups worth installing; "pytest" is where some projects keep their
# runner's plugins (EnvBench's rdmo: pytest-django, without which its conftest cannot load).
TEST_NAMES = ("test", "tests", "testing", "pytest", "dev")
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
_TEST_WORDS = frozenset({"test", "tests", "testing", "dev", "develop", "development", "ci"})
_DOC_WORDS = frozenset({"doc", "docs", "documentation", "sphinx"})
_MAIN_REQUIREMENTS = ("requirements.txt", "requirements/base.txt", "requirements/requirements.txt")
_PACKAGING_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "noxfile.py"})
_SYMLINK_MODE = "120000"
# pip options that take a value, so the next argument is no requirement
_PIP_VALUE_OPTIONS = frozenset(
    {"-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url"}
    | {"-f", "--find-links"}
)


class ProfileError(UserError):
    """The commit cannot get an environment here: no supported Python, or git cannot read it."""

    reason = "no_supported_python"


# --- reading files at a commit ---------------------------------------------------------------


def _git(repo_path: str, commit: str, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git in the repository; a failure is the user's (bad path or commit), so say so."""
    try:
        return git(repo_path, *args, input=stdin)
    except GitError as error:
        raise ProfileError(
            f"{repo_path}@{commit}: git cannot read this commit ({error.detail}); "
            "check the repository path and the commit id",
            reason="unreadable_commit",
        ) from error
    except OSError as error:
        raise ProfileError(
            f"{repo_path}@{commit}: cannot run git ({error}); install git",
            reason="unreadable_commit",
        ) from error


def _ls_tree(repo_path: str, commit: str) -> dict[str, tuple[str, str]]:
    """Every blob path at the commit, with its mode and object id (one git process)."""
    if commit.startswith("-"):
        raise ProfileError(f"{repo_path}@{commit}: not a commit id", reason="unreadable_commit")
    out = _git(repo_path, commit, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: dict[str, tuple[str, str]] = {}
    for entry in out.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) == 3 and fields[1] == "blob":
            entries[path.decode("utf-8", "surrogateescape")] = (fields[0], fields[2])
    return entries


def _cat_blobs(repo_path: str, commit: str, shas: Iterable[str]) -> dict[str, bytes]:
    """Blob contents by object id, all through one ``git cat-file --batch``."""
    unique = list(dict.fromkeys(shas))
    if not unique:
        return {}
    out = _git(
        repo_path, commit, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique).encode()
    )
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:  # "<sha> missing"
            continue
        size = int(header[2])
        blobs[sha] = out[pos : pos + size]
        pos += size + 1
    return blobs


def _read_paths(
    repo_path: str, commit: str, tree: dict[str, tuple[str, str]], paths: Sequence[str]
) -> dict[str, bytes]:
    """Read ``paths``; a symlink (requirements.txt -> requirements/base.txt) reads its target."""
    blobs = _cat_blobs(repo_path, commit, (tree[p][1] for p in paths))
    files = {p: blobs[tree[p][1]] for p in paths if tree[p][1] in blobs}
    targets: dict[str, str] = {}
    for path in [p for p in files if tree[p][0] == _SYMLINK_MODE]:
        link = files.pop(path).decode("utf-8", "surrogateescape")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
        if target in tree and tree[target][0] != _SYMLINK_MODE:
            targets[path] = target
    linked = _cat_blobs(repo_path, commit, (tree[t][1] for t in targets.values()))
    for path, target in targets.items():
        if tree[target][1] in linked:
            files[path] = linked[tree[target][1]]
    return files


def _matters(path: str) -> bool:
    """The files that decide the install: packaging files, requirements files, tox and nox."""
    if path in _PACKAGING_FILES or path in EXPORTABLE_LOCKS:
        return True
    if not path.endswith(".txt"):
        return False
    if "/" not in path:
        return "requirements" in path
    return path.count("/") == 1 and (path.startswith("requirements/") or _in_tests_folder(path))


def _in_tests_folder(path: str) -> bool:
    """``tests/requirements.txt``: a test folder's own requirements (parse keeps pytest-cov
    there). Only the ranked sets read these; the legacy detector did not."""
    folder, _, name = path.partition("/")
    return folder in ("test", "tests", "testing") and "requirements" in name


# --- parsing, never raising ------------------------------------------------------------------


def _load_toml(text: str) -> dict[str, Any] | None:
    """pyproject.toml as a dict, or None when it is not valid TOML."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None


def _load_ini(text: str) -> configparser.ConfigParser | None:
    """setup.cfg / tox.ini, or None when configparser cannot read it."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _table(data: Any, *keys: str) -> dict[str, Any]:
    """A nested TOML table, or {} when any level is missing or of the wrong type."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _ini_get(parser: configparser.ConfigParser | None, section: str, key: str) -> str | None:
    if parser is None or not parser.has_section(section):
        return None
    return parser.get(section, key, fallback=None)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _requirement_name(requirement: str) -> str:
    """The canonical project name of a requirement, or the string itself (URLs, odd syntax)."""
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return requirement


def _first_per_name(requirements: Iterable[str], seen: Iterable[str] = ()) -> list[str]:
    """One requirement per project (the first), so differing pins cannot make pip fail."""
    names = set(seen)
    kept = []
    for requirement in requirements:
        name = _requirement_name(requirement)
        if name not in names:
            names.add(name)
            kept.append(requirement)
    return kept


# --- python ----------------------------------------------------------------------------------


def _python_spec(
    pyproject: dict[str, Any] | None, setup_cfg: configparser.ConfigParser | None, setup_py: str
) -> str | None:
    """The declared Python range: pyproject first, then setup.cfg, then setup.py."""
    declared = _table(pyproject, "project").get("requires-python")
    if isinstance(declared, str):
        return declared
    declared = _ini_get(setup_cfg, "options", "python_requires")
    if declared:
        return declared.strip()
    match = re.search(r"python_requires\s*=\s*([\"'])(.+?)\1", setup_py)
    return match.group(2) if match else None


def choose_python(
    texts: dict[str, str],
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
    committed: str | None,
    default: str,
    pythons: Sequence[str],
    where: str,
    legacy: bool = False,
) -> Choice:
    """The Python the project was written for, by ``python_choice``'s rule over its own
    evidence (``texts`` holds the evidence files too). ``legacy``: the detector before it,
    which read ``requires-python`` alone."""
    spec = _python_spec(pyproject, setup_cfg, texts.get("setup.py", ""))
    if legacy:
        ranges, named, committed = ([("requires-python", spec)] if spec else []), [], None
    else:
        poetry = _table(pyproject, "tool", "poetry", "dependencies").get("python")
        ranges = declared_ranges(spec, poetry if isinstance(poetry, str) else None, texts)
        classifiers = _table(pyproject, "project").get("classifiers")
        named = named_pythons(texts, classifiers if isinstance(classifiers, list) else ())
    try:
        return choose(ranges, named, committed, default, pythons, where)
    except NoSupportedPython as exc:
        raise ProfileError(str(exc), reason="no_supported_python") from None


def _python_evidence(
    repo_path: str, commit: str, tree: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """The files read only to choose the Python (CI workflows, .python-version, runtime.txt),
    with lock files cut to the lines that say it."""
    paths = [p for p in tree if is_evidence_file(p)]
    texts = _decode_all(_read_paths(repo_path, commit, tree, paths))
    return {p: lock_head(p, t) if p in LOCK_FILES else t for p, t in texts.items()}


# --- the package itself and its extras -------------------------------------------------------


def _installable(
    paths: set[str], pyproject: dict[str, Any] | None, setup_cfg: configparser.ConfigParser | None
) -> bool:
    """Whether ``pip install -e .`` can build the project (pip needs setup.py or pyproject)."""
    if "setup.py" in paths:
        return True
    if pyproject is None:
        return False
    if _table(pyproject, "project") or _table(pyproject, "build-system"):
        return True
    has_cfg_metadata = setup_cfg is not None and setup_cfg.has_section("metadata")
    return "pyproject.toml" in paths and has_cfg_metadata


def _setup_py_extras(text: str) -> list[str]:
    """The extras_require keys of setup.py, read with ast (regex fallback for Python 2 code)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return _regex_extras(text)
    assigned: dict[str, ast.expr] = {}
    subscripted: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _note_assignment(target, node.value, assigned, subscripted)
    keys: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            keys += _dict_keys(node.value, assigned, subscripted, depth=0)
        elif isinstance(node, ast.Dict):  # setup(**{"extras_require": {...}})
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "extras_require":
                    keys += _dict_keys(value, assigned, subscripted, depth=0)
    return _dedupe(keys)


def _note_assignment(
    target: ast.expr,
    value: ast.expr,
    assigned: dict[str, ast.expr],
    subscripted: dict[str, list[str]],
) -> None:
    """Remember ``NAME = ...`` and ``NAME["key"] = ...`` so extras_require=NAME can be resolved."""
    if isinstance(target, ast.Name):
        assigned[target.id] = value
    elif (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and isinstance(target.slice, ast.Constant)
        and isinstance(target.slice.value, str)
    ):
        subscripted.setdefault(target.value.id, []).append(target.slice.value)


def _dict_keys(
    expr: ast.expr, assigned: dict[str, ast.expr], subscripted: dict[str, list[str]], depth: int
) -> list[str]:
    """The string keys of a dict literal, dict(...) call or a name bound to one."""
    if depth > 5:
        return []
    keys: list[str] = []
    if isinstance(expr, ast.Dict):
        for key, value in zip(expr.keys, expr.values, strict=True):
            if key is None:  # {**other}
                keys += _dict_keys(value, assigned, subscripted, depth + 1)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.append(key.value)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        for arg in expr.args:
            keys += _dict_keys(arg, assigned, subscripted, depth + 1)
        for keyword in expr.keywords:
            if keyword.arg is None:
                keys += _dict_keys(keyword.value, assigned, subscripted, depth + 1)
            else:
                keys.append(keyword.arg)
    elif isinstance(expr, ast.Name):
        keys += subscripted.get(expr.id, [])
        if expr.id in assigned:
            keys += _dict_keys(assigned[expr.id], assigned, subscripted, depth + 1)
    return keys


def _regex_extras(text: str) -> list[str]:
    """Keys near ``extras_require`` when setup.py does not parse; a wrong guess only warns."""
    keys: list[str] = []
    for match in re.finditer(r"extras_require", text):
        window = text[match.end() : match.end() + 2000]
        for quoted, bare in re.findall(r"[\"']([\w.-]+)[\"']\s*:|\b(\w+)\s*=\s*\[", window):
            keys.append(quoted or bare)
    return _dedupe(keys)


def _test_extras(
    pyproject: dict[str, Any] | None, setup_cfg: configparser.ConfigParser | None, setup_py: str
) -> list[str]:
    """The test/dev extras the project declares, in TEST_NAMES order, as the project spells them."""
    declared = [
        *_table(pyproject, "project", "optional-dependencies"),
        *_table(pyproject, "tool", "poetry", "extras"),
        *_ini_section(setup_cfg, "options.extras_require"),
        *_setup_py_extras(setup_py),
    ]
    spelled: dict[str, str] = {}
    for name in declared:
        spelled.setdefault(canonicalize_name(name), name)
    return [spelled[n] for n in TEST_NAMES if n in spelled]


def _ini_section(parser: configparser.ConfigParser | None, section: str) -> dict[str, str]:
    """One ini section as a dict, {} when absent."""
    if parser is None or not parser.has_section(section):
        return {}
    return dict(parser.items(section))


def _editable_command(extras: Sequence[str]) -> str:
    target = f".[{','.join(extras)}]" if extras else "."
    return f"pip install -e {shlex.quote(target)}"


# --- requirements files ----------------------------------------------------------------------


def _requirement_files(paths: Iterable[str]) -> list[str]:
    """The main requirements file(s) first, then the test/dev ones; docs ones are left out."""
    present = set(paths)
    main = [p for p in _MAIN_REQUIREMENTS if p in present]
    extra = []
    for path in sorted(present - set(main)):
        if not _matters(path) or not path.endswith(".txt") or path in _PACKAGING_FILES:
            continue
        if _in_tests_folder(path):
            continue
        words = set(re.split(r"[^a-z0-9]+", path.lower().removesuffix(".txt")))
        if words & _TEST_WORDS and not words & _DOC_WORDS:
            extra.append(path)
    return main + extra


def _included_files(path: str, text: str) -> list[str]:
    """Files a requirements file pulls in with -r/-c, relative to its own folder (as pip does)."""
    found = []
    for line in text.splitlines():
        match = re.match(r"\s*(?:-r|-c|--requirement|--constraint)(?:\s*=\s*|\s*)(\S+)", line)
        if match:
            found.append(
                posixpath.normpath(posixpath.join(posixpath.dirname(path), match.group(1)))
            )
    return found


def _repo_file(raw: str, paths: set[str]) -> str | None:
    """A path named in tox/nox, normalised against the repository root, if it exists there."""
    cleaned = raw.strip().strip("\"'").replace("{toxinidir}/", "")
    if not cleaned or "{" in cleaned:
        return None
    normal = posixpath.normpath(cleaned)
    return normal if normal in paths else None


def _pip_r(path: str) -> str:
    return f"pip install -r {shlex.quote(path)}"


def _pip(requirements: Sequence[str]) -> str:
    return "pip install " + " ".join(shlex.quote(r) for r in requirements)


# --- PEP 735 dependency groups ---------------------------------------------------------------


def _group_requirements(pyproject: dict[str, Any] | None) -> list[str]:
    """The requirement strings of the test/dev dependency groups, includes followed."""
    groups = {
        str(canonicalize_name(k)): v for k, v in _table(pyproject, "dependency-groups").items()
    }
    found: list[str] = []
    for name in TEST_NAMES:
        found += _expand_group(groups, name, frozenset())
    return _dedupe(found)


def _expand_group(groups: dict[str, Any], name: str, visiting: frozenset[str]) -> list[str]:
    """One group's requirements with ``{include-group = ...}`` expanded (cycles end quietly)."""
    items = groups.get(name)
    if name in visiting or not isinstance(items, list):
        return []
    found: list[str] = []
    for item in items:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            included = canonicalize_name(item["include-group"])
            found += _expand_group(groups, included, visiting | {name})
    return found


# --- tox -------------------------------------------------------------------------------------


def _tox_deps(text: str, python: str, paths: set[str]) -> tuple[list[str], list[str]]:
    """[testenv] deps as (requirements files, requirements) for the chosen Python."""
    parser = _load_ini(text)
    raw = _ini_get(parser, "testenv", "deps") or ""
    files: list[str] = []
    definite: list[str] = []
    maybe: list[str] = []  # behind a non-Python factor (django32: ...): only if not pinned already
    for line in raw.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).replace("{toxinidir}/", "").strip()
        factors, dep = _split_factors(line)
        if not dep or (factors is not None and not _factors_match(factors, python)):
            continue
        if dep.startswith(("-r", "--requirement")):
            path = _repo_file(re.sub(r"^(-r|--requirement)=?", "", dep), paths)
            files += [path] if path else []
        elif not dep.startswith(("-", ".", "/")) and "{" not in dep:
            unsure = factors is not None and _has_unknown_factor(factors)
            (maybe if unsure else definite).extend(_split_requirements(dep))
    definite = _dedupe(definite)
    return files, definite + _first_per_name(maybe, map(_requirement_name, definite))


def _split_factors(line: str) -> tuple[str | None, str]:
    """``py38,py39: pkg`` -> ("py38,py39", "pkg"); a URL's ``https:`` is no factor."""
    match = re.match(r"^([!\w.,{}-]+(?:\s*,\s*[!\w.,{}-]+)*)\s*:(?!//)\s*(.*)$", line)
    if match:
        return match.group(1), match.group(2).strip()
    return None, line


def _expand_braces(text: str) -> list[str]:
    """tox's ``py{38,39}-django`` -> ["py38-django", "py39-django"]."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [e for part in match.group(1).split(",") for e in _expand_braces(head + part + tail)]


def _factor_alternatives(factors: str) -> list[list[str]]:
    """The OR'ed alternatives of a factor prefix, each an AND of factors."""
    return [
        [f for f in alternative.strip().split("-") if f]
        for expanded in _expand_braces(factors)
        for alternative in expanded.split(",")
        if alternative.strip()
    ]


def _python_factor(factor: str) -> str | None:
    """The Python a factor names (py311, py3.11, 3.11 -> "3.11"; pypy3 -> "pypy"), else None."""
    match = re.fullmatch(r"(?:py)?(\d)\.?(\d+)", factor)
    if match and (factor.startswith("py") or "." in factor):
        return f"{match.group(1)}.{match.group(2)}"
    return "pypy" if factor.startswith("pypy") else None


def _factors_match(factors: str, python: str) -> bool:
    """Whether some alternative can hold for our Python; unknown factors count as on."""
    for alternative in _factor_alternatives(factors):
        if all(_factor_holds(factor, python) for factor in alternative):
            return True
    return False


def _factor_holds(factor: str, python: str) -> bool:
    negated = factor.startswith("!")
    named = _python_factor(factor.lstrip("!"))
    if named is None:
        return True
    return (named == python) != negated


def _has_unknown_factor(factors: str) -> bool:
    return any(
        _python_factor(f.lstrip("!")) is None for alt in _factor_alternatives(factors) for f in alt
    )


def _split_requirements(dep: str) -> list[str]:
    """One deps line as requirements; old tox configs put several on a line."""
    try:
        Requirement(dep)
        return [dep]
    except InvalidRequirement:
        pass
    parts = dep.split()
    if len(parts) > 1 and all(_parses(p) for p in parts):
        return parts
    return [dep]  # a URL or something pip may still understand


def _parses(requirement: str) -> bool:
    try:
        Requirement(requirement)
    except InvalidRequirement:
        return False
    return True


# --- nox -------------------------------------------------------------------------------------


def _nox_installs(text: str, paths: set[str]) -> tuple[list[str], list[str]]:
    """Literal ``session.install`` arguments as (requirements files, requirements).

    Test sessions are preferred when any install something, so pins in lint or docs sessions
    cannot clash with the test ones.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], []
    constants = _module_strings(tree)
    test_sessions = [
        f
        for f in tree.body
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and _is_test_session(f)
    ]
    args = [a for f in test_sessions for a in _install_args(f, constants)]
    if not args:
        args = _install_args(tree, constants)
    return _parse_install_args(args, paths)


def _module_strings(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``NAME = "x"`` / ``NAME = ["x", "y"]`` so ``*NAME`` arguments resolve."""
    constants: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            values = _literal_strings(node.value)
            if isinstance(target, ast.Name) and values is not None:
                constants[target.id] = values
    return constants


def _literal_strings(expr: ast.expr) -> list[str] | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.List | ast.Tuple):
        values = [e.value for e in expr.elts if isinstance(e, ast.Constant)]
        if len(values) == len(expr.elts) and all(isinstance(v, str) for v in values):
            return [str(v) for v in values]
    return None


def _is_test_session(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A nox session whose function or ``name=`` mentions test."""
    decorators = [ast.unparse(d) for d in func.decorator_list]
    if not any("session" in d for d in decorators):
        return False
    return "test" in func.name.lower() or any("test" in d.lower() for d in decorators)


def _install_args(root: ast.AST, constants: dict[str, list[str]]) -> list[str]:
    """The literal arguments of every ``<x>.install(...)`` call under ``root``."""
    args: list[str] = []
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr != "install":
                continue
            for arg in node.args:
                inner = arg.value if isinstance(arg, ast.Starred) else arg
                if isinstance(inner, ast.Name):
                    args += constants.get(inner.id, [])
                else:
                    args += _literal_strings(inner) or []
    return args


def _parse_install_args(args: Sequence[str], paths: set[str]) -> tuple[list[str], list[str]]:
    """pip arguments as (requirements files, requirements); options and local paths are dropped."""
    files: list[str] = []
    requirements: list[str] = []
    remaining = iter(args)
    for arg in remaining:
        if arg in ("-r", "--requirement"):
            path = _repo_file(next(remaining, ""), paths)
        elif arg.startswith(("-r", "--requirement=")):
            path = _repo_file(re.sub(r"^(-r|--requirement=)", "", arg), paths)
        else:
            if arg in _PIP_VALUE_OPTIONS:
                next(remaining, None)
            elif arg.strip() and not arg.startswith(("-", ".", "/")) and "{" not in arg:
                requirements.append(arg.strip())
            continue
        files += [path] if path else []
    return _dedupe(files), _first_per_name(requirements)


# --- ranked install sets --------------------------------------------------------------------


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


def commit_date(repo_path: str, commit: str) -> str | None:
    """The commit's date (YYYY-MM-DD, committer's), or None when git cannot say."""
    try:
        out = git(repo_path, "show", "-s", "--format=%cs", commit)
    except (GitError, OSError):
        return None
    text = out.decode("ascii", "replace").strip()
    return text if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else None


def encode_set(install_set: InstallSet) -> str:
    """An install set as one string (``name<TAB>cmd<LF>cmd...``) for the profile's row."""
    return install_set.name + "\t" + "\n".join(install_set.commands)


def decode_set(encoded: str) -> InstallSet:
    name, _, commands = encoded.partition("\t")
    return InstallSet(name, tuple(commands.split("\n")) if commands else ())


# --- assembling the profile ------------------------------------------------------------------


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
        texts.update(_decode_all(_read_paths(repo_path, commit, tree, missing)))
        fresh = [p for p in _dedupe(pending) if p in texts and p not in used]
        used += fresh
        pending = [inc for p in fresh for inc in _included_files(p, texts[p]) if inc not in used]
    return used


def _decode_all(files: dict[str, bytes]) -> dict[str, str]:
    return {p: data.decode("utf-8", "replace") for p, data in files.items()}


_VERSION_VALUE = re.compile(
    r"""(?i)(\b\w*version\w*\s*(?::\s*\w+\s*)?=\s*)"""  # version=, __version__ =, VERSION: str =
    r"""(?:(["'])[^"'\n]*\2|\([^()\n]*\)|\d[\w.+-]*)"""  # "1.2", (1, 2), 1.2
)


def _without_versions(text: str) -> str:
    """The text with every value assigned to a version name blanked, so release bumps hash
    the same. Whole lines are kept: ``setup(name=..., version=..., install_requires=[...])`` on
    one line, or a ``python_version`` marker, must still change the hash when a dependency does.
    """
    return _VERSION_VALUE.sub(r"\1", text)


def _pyproject_declaration(pyproject: dict[str, Any] | None, text: str) -> str:
    """What in pyproject.toml decides the install, as canonical JSON (not the whole file)."""
    if pyproject is None:
        return _without_versions(text)
    project = _table(pyproject, "project")
    poetry = _table(pyproject, "tool", "poetry")
    dynamic = {
        k: v
        for k, v in _table(pyproject, "tool", "setuptools", "dynamic").items()
        if k != "version"
    }
    declared = {
        "requires-python": project.get("requires-python"),
        "build-system": {
            k: _table(pyproject, "build-system").get(k) for k in ("requires", "build-backend")
        },
        "dependencies": project.get("dependencies"),
        "optional-dependencies": project.get("optional-dependencies"),
        "dependency-groups": pyproject.get("dependency-groups"),
        "poetry": {
            k: poetry.get(k) for k in ("dependencies", "dev-dependencies", "group", "extras")
        },
        "setuptools-dynamic": dynamic,
    }
    return json.dumps(declared, sort_keys=True, default=str)


def _setup_cfg_declaration(parser: configparser.ConfigParser | None, text: str) -> str:
    """setup.cfg's dependency options and extras as canonical JSON."""
    if parser is None:
        return _without_versions(text)
    keys = ("install_requires", "python_requires", "tests_require", "setup_requires")
    options = {k: _ini_get(parser, "options", k) for k in keys}
    extras = _ini_section(parser, "options.extras_require")
    return json.dumps({"options": options, "extras_require": extras}, sort_keys=True)


def _declarations(
    texts: dict[str, str],
    used_requirements: Sequence[str],
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
) -> dict[str, str]:
    """Each deciding file's normalised declaration, keyed by path, for ``profile_id``.

    noxfile.py adds nothing beyond the install commands it yields (which are hashed), and
    tox.ini only its [testenv] deps: edits to sessions, envlists or commands keep the image.
    """
    declared: dict[str, str] = {}
    for path in sorted(set(texts) & (_PACKAGING_FILES | set(used_requirements))):
        text = texts[path]
        if path == "pyproject.toml":
            declared[path] = _pyproject_declaration(pyproject, text)
        elif path == "setup.cfg":
            declared[path] = _setup_cfg_declaration(setup_cfg, text)
        elif path == "setup.py":
            declared[path] = _without_versions(text)
        elif path == "tox.ini":
            declared[path] = _tox_declaration(text)
        elif path != "noxfile.py":
            declared[path] = text
    return declared


def _tox_declaration(text: str) -> str:
    """tox.ini's [testenv] deps (the whole text when it does not parse)."""
    parser = _load_ini(text)
    return text if parser is None else _ini_get(parser, "testenv", "deps") or ""


def config_files(repo_path: str, commit: str) -> dict[str, str]:
    """The packaging, requirements, tox and nox files at ``commit``: what the setup agent reads."""
    tree = _ls_tree(repo_path, commit)
    return _decode_all(_read_paths(repo_path, commit, tree, [p for p in tree if _matters(p)]))


def detect_profile(
    repo_path: str,
    commit: str,
    repo: str,
    *,
    default_python: str = "3.11",
    pythons: Sequence[str] = ("3.11",),
    source: str | None = None,
    registry: str | None = None,
    legacy: bool = False,
) -> EnvProfile:
    """How to install and test ``repo`` at ``commit``, read from its packaging files alone.

    The install renders to a Dockerfile (``recipe``), hashed into ``profile_id``: a changed recipe
    is a new profile and a new image name, never a stale tag. With a ``registry`` the image is
    named there (``<registry>/env:<profile_id>``), so any machine can pull it.

    ``profile_id`` (and so the image) is keyed by ``source``, the identity of where the code
    comes from (``RepoRef.identity``; the repository's real path when not given), never by the
    display name ``repo``: two repositories that share a name and a setup.py must not share an
    image, or one's install-time code would run inside the other's tests.
    """
    identity = source or f"file://{os.path.realpath(repo_path)}"
    tree = _ls_tree(repo_path, commit)
    texts = _decode_all(_read_paths(repo_path, commit, tree, [p for p in tree if _matters(p)]))
    paths = set(tree)
    pyproject = _load_toml(texts["pyproject.toml"]) if "pyproject.toml" in texts else None
    setup_cfg = _load_ini(texts["setup.cfg"]) if "setup.cfg" in texts else None
    committed = commit_date(repo_path, commit)
    evidence = {**texts, **_python_evidence(repo_path, commit, tree)}
    chosen = choose_python(
        evidence, pyproject, setup_cfg, committed, default_python, pythons, f"{repo}@{commit}",
        legacy,
    )  # fmt: skip
    python = chosen.python
    if legacy:
        commands, req_files = _legacy_install_commands(texts, paths, python, pyproject, setup_cfg)
        sets = [InstallSet("legacy", tuple(commands))]
    else:
        runner = runner_requirement(python, committed)
        sets, req_files = _install_sets(texts, paths, python, pyproject, setup_cfg, runner)
    used = _read_includes(repo_path, commit, tree, texts, req_files)
    declared = _declarations(texts, used, pyproject, setup_cfg)
    install = list(sets[0].commands)
    recipe = render_dockerfile(python, install)
    recipes = [render_dockerfile(python, s.commands) for s in sets]
    profile_id = content_id(PROFILE_FORMAT, identity, repo, recipes, declared, length=16)
    return EnvProfile(
        profile_id=profile_id,
        repo=repo,
        python=python,
        install=tuple(install),
        test_cmd=TEST_CMD,
        image=image_name(registry, profile_id),
        status="detected",
        log=f"python {python}: {chosen.why}",
        setup_commit=commit,
        recipe=recipe,
        install_set=sets[0].name,
        origin="legacy" if legacy else "rules",
        alternatives=tuple(encode_set(s) for s in sets[1:]),
        declared=tuple(_declared_requirements(texts, pyproject, setup_cfg)),
    )
