"""Sentinel tests for a JS task: drawn by the host per run, planted by the grader's guard.

The names and outcomes are drawn as the Python sentinels' are (``sentinels.draw_names``,
``sentinels.draw_outcomes``: the system's randomness, words of the file's own test titles); each
body is a small computation checked as the graded tests check theirs (jest's ``expect(...)
.toBe``/``toEqual``, else ``assert.strictEqual``/``deepStrictEqual``), some written to fail by a
small mistake. The spec goes into the grader's root-owned folder (``supervised.SENTINELS``);
``in_container/trajforge_guard.js`` registers them at the top of the graded file's own scope, so
their ids are ``file > name``. Which runners plant them: ``SENTINEL_RUNNERS``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping

from trajforge.verifiers.grader.sentinels import FAIL, PASS, Sentinel, draw_names, draw_outcomes

# The runners whose guard plants sentinels in the graded file's scope (ava and node-tap
# give the grader no per-file hook: docs/security.md).
SENTINEL_RUNNERS = frozenset({"jest", "mocha", "node", "vitest"})
SEPARATOR = " > "  # a JS id's parts (verifiers/reports/ids.py)
_RANDOM = secrets.SystemRandom()
_TITLE = re.compile(r"""\b(?:test|it|specify)\s*\(\s*(['"`])((?:(?!\1).){1,200})\1""")
_WORDS = ("value", "result", "items", "empty", "order", "basic", "round", "simple", "check", "case")


def draw(
    files: dict[str, bytes], graded: tuple[str, ...] = ()
) -> tuple[bytes, tuple[Sentinel, ...]]:
    """(the guard's spec as JSON, the sentinels) for the graded test files ``files``; no
    sentinel takes the id of a ``graded`` test (one whose title the file's text does not hold:
    made in a loop, or by a helper from another file), as Python's take no graded name."""
    paths = sorted(files)
    if not paths:
        return b"{}", ()
    spec: dict[str, list[dict[str, object]]] = {}
    planted: list[Sentinel] = []
    for path, oks in sorted(draw_outcomes(paths).items()):
        titles = {m.group(2) for m in _TITLE.finditer(files[path].decode("utf-8", "replace"))}
        words = {w.lower() for t in titles for w in re.findall(r"[A-Za-z]{3,}", t)}
        top = {t[len(path) + len(SEPARATOR) :] for t in graded if t.startswith(path + SEPARATOR)}
        for name, ok in zip(draw_names(words, titles | top, len(oks), "", " "), oks, strict=True):
            body = _body(ok)
            spec.setdefault(path, []).append({"name": name, **body})
            planted.append(Sentinel(f"{path}{SEPARATOR}{name}", PASS if ok else FAIL, str(body)))
    return json.dumps(spec).encode(), tuple(planted)


def heard(planted: tuple[Sentinel, ...], statuses: Mapping[str, str]) -> tuple[Sentinel, ...]:
    """The sentinels to judge: none when the run reported none of them at all (a runner the
    guard does not reach plants none, and an honest run must not read as forged); otherwise all
    of them, each judged as Python's are."""
    return planted if any(s.test_id in statuses for s in planted) else ()


def _body(ok: bool) -> dict[str, object]:
    """One body's numbers (the guard's ``kind``s); ``ok`` False makes the wanted value wrong."""
    r = _RANDOM
    a, b, c = r.randint(2, 97), r.randint(2, 97), r.randint(2, 97)
    kind = r.randrange(4)
    if kind == 0:  # [a, b, c] sorted
        ordered = sorted((a, b, c))
        return {"kind": 0, "a": a, "b": b, "c": c,
                "want": ordered if ok else [*sorted((a, b, c), reverse=True), a]}  # fmt: skip
    if kind == 1:  # a word upper-cased
        word = r.choice(_WORDS)
        return {"kind": 1, "word": word, "want": word.upper() if ok else word.upper()[:-1]}
    if kind == 2:  # the sum of 0..a-1
        return {"kind": 2, "a": a, "want": a * (a - 1) // 2 + (0 if ok else b)}
    return {"kind": 3, "a": a, "b": b, "want": a * b if ok else a * b + 1}
