"""The dependency layer: what an environment installs before it sees the repository's source.

A recipe (``recipe.py``) installs the project's dependencies from their declarations alone, in
a layer of its own before ``COPY repo/``, so a new commit whose declarations are the same reuses
that layer from Docker's build cache and pays only for the project itself. The layer's inputs
are files trajforge derives from the repository at the setup commit and puts in the build
context under ``trajforge/deps/``: the requirements and constraints files the install names
(byte for byte, with the files they include), and for each editable install of the project
(``pip install -e '.[test]'``) the requirements its static declarations give (pyproject's
``[project]`` table, setup.cfg's options, setup.py's literal ``install_requires`` and
``extras_require``), one per line. A source-only change leaves these files, and so the layer,
as they were; a changed declaration changes a file, and so rebuilds the layer.

The layer is an accelerator, never a source of truth: the build stage runs every install
command again over it, so a declaration the parser cannot read (dynamic dependencies, poetry)
only makes the top layer install more, and a step that fails here is left to fail there.
"""

from __future__ import annotations

import ast
import configparser
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from trajforge.schemas import python_ast
from trajforge.verifiers.sandbox.git_tree import GitError, git

DEPS_DIR = "/tmp/trajforge"  # where the layer's inputs land (beside the CA bundle)
PROJECT_FILE = "trajforge-project{extras}.txt"  # an editable install's derived requirements
# The project's [build-system] requires: fetched into uv's cache (in a throwaway venv, never
# /venv), so building the project itself in each commit's layer downloads nothing again.
BUILD_FILE = "trajforge-build-requires.txt"
BUILD_VENV = "/tmp/trajforge-build"
# The project installed again, without its dependencies, after a step that may have replaced it
# (a runner that depends on the project itself): the code under test is /repo's.
RELINK = "pip install --no-deps -e ."
_EXPANSION = re.compile(r"[`$\n\\]")  # what a shell would expand or continue
_OPERATOR = re.compile(r"[;&|<>()]+")
_TOOL_NAMES = frozenset({"pytest", "coverage", "pytest-timeout", "pip", "setuptools", "wheel"})
_MAX_INCLUDES = 32


def pip_args(command: str) -> list[str] | None:
    """The arguments of a plain ``pip install ...`` (no shell syntax), else None."""
    if _EXPANSION.search(command):
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
        words = shlex.split(command)
    except ValueError:
        return None
    if any(_OPERATOR.fullmatch(token) for token in tokens):
        return None
    if words[:2] != ["pip", "install"]:
        return None
    return words[2:]


def is_tool_step(command: str) -> bool:
    """A ``pip install`` of only the runner and packaging tools (pytest, coverage, its timeout
    plugin, pip, setuptools, wheel): what every profile of a Python shares, in a layer of its
    own before any project's dependencies."""
    args = pip_args(command)
    if not args:
        return False
    names = [arg for arg in args if not arg.startswith("-")]
    return bool(names) and all(_name(arg) in _TOOL_NAMES for arg in names)


def editable_target(command: str) -> tuple[str, ...] | None:
    """The extras of the project a ``pip install`` installs from its own tree (``-e .``,
    ``-e '.[test,docs]'``, ``.``), or None when the command installs no local project."""
    args = pip_args(command)
    if args is None:
        return None
    if "--no-deps" in args:
        return None  # installs no dependency: nothing for the layer (RELINK)
    for arg in args:
        match = re.fullmatch(r"\.(?:/)?(?:\[([\w.,\s-]*)\])?", arg)
        if match:
            return tuple(e.strip() for e in (match.group(1) or "").split(",") if e.strip())
    return None


def requirement_files(command: str) -> list[str]:
    """The files a ``pip install`` reads with ``-r``/``-c`` (as written, relative to /repo)."""
    args = pip_args(command) or []
    found = []
    for index, arg in enumerate(args):
        if arg in ("-r", "--requirement", "-c", "--constraint") and index + 1 < len(args):
            found.append(args[index + 1])
        elif arg.startswith(("--requirement=", "--constraint=")):
            found.append(arg.partition("=")[2])
        elif arg[:2] in ("-r", "-c") and len(arg) > 2:
            found.append(arg[2:].lstrip("="))
    return found


def dependency_steps(install: Sequence[str], uv: str) -> list[str]:
    """The install as the dependency layer runs it, in /tmp/trajforge: the tool steps left out
    (their layer ran them), each editable install of the project replaced by its derived
    requirements when the build context has them, steps that are not a plain ``pip install``
    left to the build stage. Every step may fail here (its real run decides): ``|| echo``.
    ``uv`` (its path) fetches the project's build requirements into its cache, through a venv
    of its own that uv makes (no pip seeded: seconds less than ``python3 -m venv``)."""
    steps = []
    if any(editable_target(command) is not None for command in install):
        fetch = f"{uv} pip install -q --python {BUILD_VENV}/bin/python -r {BUILD_FILE}"
        steps.append(
            f"if [ -s {BUILD_FILE} ] && [ -x {uv} ]; then "
            f"{uv} venv -q --python /venv/bin/python {BUILD_VENV} && "
            f"{fetch} || {_skipped(BUILD_FILE)}; rm -rf {BUILD_VENV}; fi"
        )
    for command in install:
        args = pip_args(command)
        if is_tool_step(command) or args is None or "--no-deps" in args:
            continue
        extras = editable_target(command)
        if extras is not None:
            name = project_file(extras)
            steps.append(f"if [ -s {name} ]; then pip install -r {name} || {_skipped(name)}; fi")
        elif any(_outside(path) for path in requirement_files(command)):
            continue
        else:
            steps.append(f"{command} || {_skipped(command)}")
    return steps


def project_file(extras: Sequence[str]) -> str:
    """The file that holds the derived requirements of the project with ``extras``."""
    return PROJECT_FILE.format(extras="".join(f"-{e}" for e in sorted(set(extras))))


def dependency_files(repo_path: str, commit: str, install: Sequence[str]) -> dict[str, bytes]:
    """The dependency layer's inputs for ``install`` at ``commit``: path (relative to the
    layer's folder) -> content. Only what the declarations say; never a source file."""
    files: dict[str, bytes] = {}
    for command in install:
        args = pip_args(command)
        if is_tool_step(command) or args is None or "--no-deps" in args:
            continue
        extras = editable_target(command)
        if extras is not None:
            build = build_requirements(repo_path, commit)
            if build:
                files[BUILD_FILE] = "".join(f"{r}\n" for r in build).encode()
            derived = project_requirements(repo_path, commit, extras)
            if derived:
                files[project_file(extras)] = "".join(f"{r}\n" for r in derived).encode()
            continue
        pending = [posixpath.normpath(p) for p in requirement_files(command)]
        while pending and len(files) < _MAX_INCLUDES:
            path = pending.pop(0)
            if path in files or _outside(path):
                continue
            content = _read(repo_path, commit, path)
            if content is None:
                continue
            files[path] = content
            here = posixpath.dirname(path)
            pending += [
                posixpath.normpath(posixpath.join(here, inc))
                for inc in _includes(content.decode("utf-8", "replace"))
            ]
    return files


def build_requirements(repo_path: str, commit: str) -> list[str]:
    """pyproject.toml's ``[build-system] requires``, sorted, or [] (none, or unreadable)."""
    system = _toml(_read(repo_path, commit, "pyproject.toml")).get("build-system")
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list):
        return []
    return sorted({r for r in requires if isinstance(r, str) and _parses(r)})


def _parses(text: str) -> bool:
    try:
        return not Requirement(text).url
    except InvalidRequirement:
        return False


def project_requirements(repo_path: str, commit: str, extras: Sequence[str]) -> list[str]:
    """The requirements the project's static declarations give for ``extras``, sorted and once
    each, the project itself left out; [] when they are dynamic or unreadable."""
    pyproject = _toml(_read(repo_path, commit, "pyproject.toml"))
    project = pyproject.get("project") if isinstance(pyproject.get("project"), dict) else None
    if project is not None and "dependencies" not in (project.get("dynamic") or []):
        base = project.get("dependencies") or []
        optional = project.get("optional-dependencies") or {}
        return _expanded(project.get("name"), base, optional, extras)
    if project is not None:
        return []
    cfg = _ini(_read(repo_path, commit, "setup.cfg"))
    if cfg is not None and cfg.has_option("options", "install_requires"):
        base = _lines(cfg.get("options", "install_requires"))
        optional = (
            {k: _lines(v) for k, v in cfg.items("options.extras_require")}
            if cfg.has_section("options.extras_require")
            else {}
        )
        name = cfg.get("metadata", "name", fallback=None)
        declared = [*base, *(line for lines in optional.values() for line in lines)]
        if not any(line.startswith("file:") for line in declared):
            return _expanded(name, base, optional, extras)
        return []
    return _setup_py(_read(repo_path, commit, "setup.py"), extras)


def _expanded(
    own: Any, base: Iterable[Any], optional: dict[str, Any], extras: Sequence[str]
) -> list[str]:
    """``base`` and the named extras' requirements, a self-reference (``widget[all]``) expanded
    into the extras it names, the project itself never listed."""
    own_name = canonicalize_name(own) if isinstance(own, str) else None
    groups = {canonicalize_name(k): v for k, v in optional.items() if isinstance(v, list)}
    found: list[str] = []
    pending = [*base, *(r for e in extras for r in groups.get(canonicalize_name(e), []))]
    seen_extras = {canonicalize_name(e) for e in extras}
    while pending:
        text = pending.pop(0)
        if not isinstance(text, str):
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.url:
            continue
        if own_name is not None and canonicalize_name(requirement.name) == own_name:
            for extra in map(canonicalize_name, requirement.extras):
                if extra not in seen_extras:
                    seen_extras.add(extra)
                    pending += groups.get(extra, [])
            continue
        found.append(str(requirement))
    return sorted(set(found))


def _setup_py(content: bytes | None, extras: Sequence[str]) -> list[str]:
    """setup.py's ``install_requires`` and ``extras_require`` when both are literals in the
    ``setup(...)`` call (a computed one is read by the build stage's real install)."""
    if content is None:
        return []
    try:
        tree = python_ast.parse(content)
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"):
            continue
        values: dict[str, Any] = {"install_requires": [], "extras_require": {}, "name": None}
        for keyword in node.keywords:
            if keyword.arg in values:
                try:
                    values[keyword.arg] = python_ast.literal_eval(keyword.value)
                except ValueError:
                    return []
        base, optional = values["install_requires"], values["extras_require"]
        if isinstance(base, str):
            base = _lines(base)
        if not isinstance(base, list | tuple) or not isinstance(optional, dict):
            return []
        return _expanded(values["name"], base, optional, extras)
    return []


def _includes(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        match = re.match(r"\s*(?:-r|-c|--requirement|--constraint)(?:\s*=\s*|\s*)(\S+)", line)
        if match:
            found.append(match.group(1))
    return found


def _outside(path: str) -> bool:
    normal = posixpath.normpath(path)
    return normal.startswith(("/", "..")) or "://" in path or normal in ("ca.crt", ".")


def _read(repo_path: str, commit: str, path: str) -> bytes | None:
    try:
        return git(repo_path, "show", "--end-of-options", f"{commit}:{path}")
    except (GitError, OSError):
        return None


def _toml(content: bytes | None) -> dict[str, Any]:
    try:
        return tomllib.loads(content.decode()) if content else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _ini(content: bytes | None) -> configparser.ConfigParser | None:
    if not content:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(content.decode("utf-8", "replace"))
    except configparser.Error:
        return None
    return parser


def _lines(value: str) -> list[str]:
    return [line.split("#")[0].strip() for line in value.splitlines() if line.split("#")[0].strip()]


def _name(arg: str) -> str:
    try:
        return str(canonicalize_name(Requirement(arg).name))
    except InvalidRequirement:
        return ""


def _skipped(what: str) -> str:
    return f"echo {shlex.quote(f'trajforge: dependency layer left to the build: {what}')}"
