"""What a Python project declares: its packaging files parsed (never raising), its extras,
dependency groups and requirements files, and the normalised declarations ``profile_id`` hashes.
"""

from __future__ import annotations

import ast
import configparser
import json
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from trajforge.generators.languages.python.lockfiles import EXPORTABLE_LOCKS
from trajforge.schemas import python_ast

# Extras and dependency groups worth installing; "pytest" is where some projects keep their
# runner's plugins (EnvBench's rdmo: pytest-django, without which its conftest cannot load).
TEST_NAMES = ("test", "tests", "testing", "pytest", "dev")


_TEST_WORDS = frozenset({"test", "tests", "testing", "dev", "develop", "development", "ci"})


_DOC_WORDS = frozenset({"doc", "docs", "documentation", "sphinx"})


_MAIN_REQUIREMENTS = ("requirements.txt", "requirements/base.txt", "requirements/requirements.txt")


_PACKAGING_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "noxfile.py"})


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
        tree = python_ast.parse(text)
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
