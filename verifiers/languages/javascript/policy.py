"""What a model's patch may change in a JavaScript/TypeScript task: its source, nothing that
decides how the tests run.

Three classes, each decided by what the file is:

- **refused** (``forbidden_file``): the installed packages (anything under ``node_modules``)
  and the package managers' own files that load code or settings before any test
  (``.npmrc``, ``.yarnrc``/``.yarnrc.yml``, ``.pnpmfile.cjs``, ``.yarn/`` with its plugins and
  releases, yarn's Plug'n'Play loaders ``.pnp.*``). No fix of a project's code needs one, and at
  test time nothing is installed again.
- **reset to the task's own**: test files (``schemas/js_test_paths.py``, mining's rule), the
  runners' and transforms' configuration by name (jest, vitest/vite, mocha, ava, node-tap's
  ``.taprc``, babel, TypeScript, swc, every ``package.json``: its ``jest``/``mocha``/``ava``/
  ``tap``/``babel`` keys and ``type`` decide how tests load, and at test time nothing is
  installed from it), and every repository file a runner's or babel's configuration names (setup
  files, global setup, environments, transformers, resolvers, node-tap's before/after scripts,
  the modules a ``node --test`` script preloads, babel plugins): a file a configuration names
  is configuration. TypeScript's and
  vite's configurations are reset but not read for names: they name the source they build.
- everything else is source, and counts.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable

from trajforge.schemas.js_test_paths import JS_SUFFIXES, is_js_test_path
from trajforge.verifiers.languages.javascript.node_args import children_options

FORBIDDEN_NAMES = frozenset({".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs"})
FORBIDDEN_DIRS = frozenset({"node_modules", ".yarn"})
CONFIG_PREFIXES = (
    "jest.config.", "vitest.config.", "vitest.workspace.", "vite.config.", ".mocharc",
    "babel.config.", ".babelrc", "tsconfig", "jsconfig", ".swcrc", "jest.preset.",
    "vitest.projects.", "ava.config.", ".taprc",
)  # fmt: skip
CONFIG_NAMES = frozenset({"package.json", "jest.json", "vitest.json"})
# The configurations whose strings name setup code (read whole), and package.json's keys that do.
NAMING_PREFIXES = ("jest.config.", "jest.preset.", "vitest.workspace.", ".mocharc", "babel.config.",
                   ".babelrc", "jest.json", "ava.config.")  # fmt: skip
PACKAGE_KEYS = ("jest", "mocha", "babel", "ava", "tap")
# node-tap's .taprc is YAML, its paths unquoted (``before: test/setup.js``): read word by word.
_YAML_WORD = re.compile(r"""[^\s'",:\[\]{}#]+""")
# A string literal in a configuration: where it names a repository file, that file is config.
_LITERAL = re.compile(r"""(['"`])((?:(?!\1)[^\\\n]){1,300})\1""")
_ROOT_TOKENS = ("<rootDir>/", "<rootdir>/")
# vite's and vitest's configurations name the source they build (aliases, coverage) beside their
# setup code: only the values of the keys that name setup code are read from them.
VITE_PREFIXES = ("vitest.config.", "vite.config.", "vitest.workspace.", "vitest.projects.")
_VITE_SETUP = re.compile(
    r"""\b(?:setupFiles|globalSetup)\s*:\s*(\[[^\]]{0,2000}\]|(['"`])[^'"`\n]{1,300}\2)"""
)
_RESOLVED_SUFFIXES = ("", *sorted(JS_SUFFIXES), ".json")


def forbidden_file(path: str) -> str | None:
    """Why the patch may not hold ``path`` at all, or None."""
    parts = path.split("/")
    for part in parts[:-1]:
        if part in FORBIDDEN_DIRS:
            return f"{path}: inside {part}/ (installed packages and their manager's files)"
    name = parts[-1]
    if name in FORBIDDEN_NAMES:
        return f"{path}: the package manager's configuration, read before any test"
    if name.startswith(".pnp.") or name in FORBIDDEN_DIRS:
        return f"{path}: loaded before any module (yarn Plug'n'Play / installed packages)"
    return None


def is_config_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in CONFIG_NAMES or name.startswith(CONFIG_PREFIXES)


def is_grading_path(path: str) -> bool:
    """A test file or a runner's configuration file, by name."""
    return is_js_test_path(path) or is_config_name(path)


def grading_files(tree_paths: Iterable[str], read: Callable[[str], bytes | None]) -> set[str]:
    """Every path of the tree that decides how the tests run: tests, configuration by name, and
    the repository files a runner's or transform's configuration names (``read``: a path's
    bytes in the same tree)."""
    paths = set(tree_paths)
    found = {p for p in paths if is_grading_path(p)}
    for config in sorted(p for p in found if is_config_name(p)):
        text = _naming_text(config, read(config))
        if text:
            found |= named_files(config, text, paths)
    return found


def _naming_text(config: str, data: bytes | None) -> str:
    """The part of ``config`` whose strings name setup code: a runner's or babel's file whole,
    ``package.json``'s runner and babel keys only (its ``main``/``files`` name the source),
    vite's and vitest's ``setupFiles``/``globalSetup`` values only (the rest names source).
    TypeScript's configuration names the source it builds, not setup: none."""
    if not data:
        return ""
    name = config.rsplit("/", 1)[-1]
    if name.startswith(NAMING_PREFIXES):
        return data.decode("utf-8", "replace")
    if name.startswith(".taprc"):
        return json.dumps(_YAML_WORD.findall(data.decode("utf-8", "replace")[:1_000_000]))
    if name.startswith(VITE_PREFIXES):  # setupFiles / globalSetup values only
        text = data.decode("utf-8", "replace")[:1_000_000]
        return "\n".join(match.group(1) for match in _VITE_SETUP.finditer(text))
    if name == "package.json":
        try:
            package = json.loads(data)
        except ValueError:
            return ""
        if isinstance(package, dict):  # and the modules its test script preloads for node
            loaded = [w.split("=", 1)[-1] for w in children_options(data)]
            return json.dumps([package.get(key) for key in PACKAGE_KEYS] + loaded)
    return ""


def named_files(config: str, text: str, paths: set[str]) -> set[str]:
    """The files of ``paths`` that a string in ``config``'s text names, relative to its folder
    (``<rootDir>`` is that folder), with or without a module suffix."""
    folder = posixpath.dirname(config)
    named: set[str] = set()
    for match in _LITERAL.finditer(text[:1_000_000]):
        literal = match.group(2)
        for token in _ROOT_TOKENS:
            if literal.startswith(token):
                literal = "./" + literal[len(token) :]
        if "/" not in literal and "." not in literal:
            continue  # a package name ("ts-jest", "node"), not a file of the repository
        base = posixpath.normpath(posixpath.join(folder, literal))
        named.update(base + suffix for suffix in _RESOLVED_SUFFIXES if base + suffix in paths)
    return named
