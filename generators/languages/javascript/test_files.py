"""Which paths of a JavaScript/TypeScript project are tests: mining's split into patch and
test_patch, and the language layer's ``is_test_file``.

The conventions of jest, vitest, mocha, ava, tap and node's runner: anything under a test folder
(``test/``, ``tests/``, ``__tests__/``, ``spec/``, with their ``__mocks__``, ``__snapshots__`` and
fixtures, whatever the suffix, as Python's rule counts a test folder whole), and a JS/TS module
named ``*.test.*`` or ``*.spec.*`` wherever it sits (written in ``schemas/js_test_paths.py``,
which the grader reads too). Python's rule (``schemas/test_ids.py``) is unchanged; a polyglot
repository asks each language.
"""

from __future__ import annotations

import fnmatch

from trajforge.schemas.js_test_paths import (  # the rule itself: the grader reads it too
    JS_SUFFIXES,
    JS_TEST_DIRS,
    is_js_source_path,
    is_js_test_path,
)

__all__ = [
    "JS_SUFFIXES",
    "JS_TEST_DIRS",
    "is_js_generated",
    "is_js_source_path",
    "is_js_test_path",
]


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
