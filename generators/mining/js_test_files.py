"""Which paths of a JavaScript/TypeScript project are tests: mining's split into patch and
test_patch, and the language layer's ``is_test_file``.

The conventions of jest, vitest, mocha, ava, tap and node's runner: anything under a test folder
(``test/``, ``tests/``, ``__tests__/``, ``spec/``, with their ``__mocks__``, ``__snapshots__`` and
fixtures, whatever the suffix, as Python's rule counts a test folder whole), and a JS/TS module
named ``*.test.*`` or ``*.spec.*`` wherever it sits. Python's rule (``schemas/test_ids.py``) is
unchanged; a polyglot repository asks each language.
"""

from __future__ import annotations

import fnmatch
import posixpath

from trajforge.schemas.test_ids import TEST_DIRS

JS_SUFFIXES = frozenset({".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"})
JS_TEST_DIRS = TEST_DIRS | {
    "__tests__",
    "__mocks__",
    "__snapshots__",
    "__fixtures__",
    "spec",
    "specs",
}
_TEST_INFIXES = frozenset({"test", "spec", "tests", "specs"})


def is_js_source_path(path: str) -> bool:
    return posixpath.splitext(path)[1] in JS_SUFFIXES


def is_js_test_path(path: str) -> bool:
    """``src/__tests__/a.js``, ``test/fixtures/x.json``, ``lib/a.test.ts``, ``a.spec.tsx``: yes;
    ``src/testing-utils.js``, ``src/contest.js``, ``lib/test.js`` (a module named test): no."""
    parts = path.split("/")
    if any(part in JS_TEST_DIRS for part in parts[:-1]):
        return True
    name = parts[-1]
    if not is_js_source_path(name):
        return False
    infixes = name.split(".")[1:-1]  # `a.test.ts` -> ["test"]; `a.d.ts` -> ["d"]
    return any(part in _TEST_INFIXES for part in infixes)


# Files a JS/TS project's tools write, never a person: lock files, built output, bundles,
# source maps and an installed node_modules. A commit's change to them is no part of a task
# (a patch would carry megabytes no agent writes), as Python's vendored and generated files.
JS_GENERATED = (
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "*.min.js",
    "*.min.mjs",
    "*.min.cjs",
    "*.min.css",
    "*.map",
    "*.bundle.js",
)
JS_GENERATED_DIRS = frozenset({"node_modules", "dist", "bower_components", ".yarn", "coverage"})


def is_js_generated(path: str) -> bool:
    """``package-lock.json``, ``packages/a/yarn.lock``, ``dist/index.js``, ``lib/x.min.js``,
    ``node_modules/left-pad/index.js``: yes; ``src/index.js``, ``src/distance.js``: no."""
    parts = path.split("/")
    if any(part in JS_GENERATED_DIRS for part in parts[:-1]):
        return True
    return any(fnmatch.fnmatch(parts[-1], pattern) for pattern in JS_GENERATED)
