"""Which paths of a JavaScript/TypeScript project are tests, written once for every room.

The conventions of jest, vitest, mocha, ava, tap and node's runner: anything under a test folder
(``test/``, ``tests/``, ``__tests__/``, ``spec/``, with their ``__mocks__``, ``__snapshots__`` and
fixtures, whatever the suffix, as Python's rule counts a test folder whole), and a JS/TS module
named ``*.test.*`` or ``*.spec.*`` wherever it sits, and a module named ``test`` or ``tests`` at
the repository's root (``test.js``: ava's default and many small packages'). It lives here,
beside Python's rule (``test_ids.py``), because mining's split
(``generators/languages/javascript/test_files.py``) and the grader's reset of test files
(``verifiers/languages/javascript/policy.py``) must agree, and the grader may not import
``generators``.
"""

from __future__ import annotations

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
_ROOT_TEST_NAMES = frozenset({"test", "tests"})  # test.js at the root; lib/test.js is a module


def is_js_source_path(path: str) -> bool:
    return posixpath.splitext(path)[1] in JS_SUFFIXES


def is_js_test_path(path: str) -> bool:
    """``src/__tests__/a.js``, ``test/fixtures/x.json``, ``lib/a.test.ts``, ``a.spec.tsx``,
    ``test.js`` (at the root): yes; ``src/testing-utils.js``, ``src/contest.js``, ``lib/test.js``
    (a module named test): no."""
    parts = path.split("/")
    if any(part in JS_TEST_DIRS for part in parts[:-1]):
        return True
    name = parts[-1]
    if not is_js_source_path(name):
        return False
    if len(parts) == 1 and posixpath.splitext(name)[0] in _ROOT_TEST_NAMES:
        return True
    infixes = name.split(".")[1:-1]  # `a.test.ts` -> ["test"]; `a.d.ts` -> ["d"]
    return any(part in _TEST_INFIXES for part in infixes)
