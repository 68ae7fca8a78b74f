"""JS sentinels: drawn per run as the Python ones are, judged by the same rule with JS ids."""

from __future__ import annotations

import json

from trajforge.verifiers.grader import rules
from trajforge.verifiers.languages.javascript import sentinels as js_sentinels

CALC_TESTS = b"""\
const { add } = require('../src/calc');
describe('calc', () => {
  test('adds two numbers', () => { expect(add(2, 3)).toBe(5); });
  it("keeps order", () => { expect(add(1, 0)).toBe(1); });
});
"""
GRADED = ("__tests__/calc.test.js > calc > adds two numbers",)


def _value(body: dict) -> object:
    """What the guard's sentinel computes for ``body`` (trajforge_guard.js's ``kind``s)."""
    kind = body["kind"]
    if kind == 0:
        return sorted((body["a"], body["b"], body["c"]))
    if kind == 1:
        return body["word"].upper()
    if kind == 2:
        return sum(range(body["a"]))
    return body["a"] * body["b"]


def test_each_draw_has_a_sentinel_to_pass_and_one_to_fail_and_the_spec_says_so():
    for _ in range(40):
        spec, planted = js_sentinels.draw({"__tests__/calc.test.js": CALC_TESTS})
        said = json.loads(spec)
        bodies = said["__tests__/calc.test.js"]
        assert 2 <= len(bodies) == len(planted) <= 5
        assert {s.expected for s in planted} == {"PASSED", "FAILED"}
        for body, sentinel in zip(bodies, planted, strict=True):
            assert sentinel.test_id == f"__tests__/calc.test.js > {body['name']}"
            assert body["name"] not in ("adds two numbers", "keeps order")
            passes = _value(body) == body["want"]
            assert sentinel.expected == ("PASSED" if passes else "FAILED")


def test_names_are_made_of_the_files_own_words():
    words = {"adds", "two", "numbers", "keeps", "order"}
    seen = set()
    for _ in range(40):
        _, planted = js_sentinels.draw({"__tests__/calc.test.js": CALC_TESTS})
        seen |= {w for s in planted for w in s.test_id.split(" > ")[1].split(" ")}
    assert seen & words


def test_no_sentinel_takes_a_graded_title_the_text_does_not_hold():
    """A top-level test made in a loop (``for (const w of words) test(`${w} two`, ...)``) has a
    title no regex reads: its graded id is never drawn as a sentinel's (two reports for one id
    would be tampering)."""
    looped = b"for (const w of ['adds', 'keeps']) { test(`${w} order`, () => {}); }\n" + CALC_TESTS
    path = "__tests__/calc.test.js"
    held = {f"{a} {b}" for a in ("adds", "keeps", "two", "numbers", "order")
            for b in ("adds", "keeps", "two", "numbers", "order")}  # fmt: skip
    graded = tuple(f"{path} > {title}" for title in sorted(held))
    drawn = set()
    for _ in range(300):
        drawn |= {s.test_id for s in js_sentinels.draw({path: looped}, graded)[1]}
    assert drawn and not drawn & set(graded)
    unaware = {s.test_id for _ in range(300) for s in js_sentinels.draw({path: looped})[1]}
    assert unaware & set(graded)


def test_no_files_no_sentinels():
    assert js_sentinels.draw({}) == (b"{}", ())


def _verdict(statuses: dict[str, str], planted):
    pairs = [(s.test_id, s.expected) for s in planted]
    return rules.verdict(statuses, (), True, 1, False, GRADED, pairs, "", " > ")


def test_a_bent_or_missing_sentinel_is_a_forged_result():
    _, planted = js_sentinels.draw({"__tests__/calc.test.js": CALC_TESTS})
    honest = {GRADED[0]: "PASSED", **{s.test_id: s.expected for s in planted}}
    assert _verdict(honest, planted)[:2] == (True, "resolved")
    bent = {**honest, **{s.test_id: "PASSED" for s in planted}}  # every failure swallowed
    assert _verdict(bent, planted)[:2] == (False, "forged_result")
    missing = {GRADED[0]: "PASSED"}  # the file reported, its sentinels did not
    assert _verdict(missing, planted)[:2] == (False, "forged_result")
    # a file that reported nothing (did not load) is no sign of forgery
    assert _verdict({}, planted)[:2] == (False, "suite_did_not_run")


def test_a_run_that_reported_no_sentinel_is_judged_without_them():
    """A runner the guard does not reach plants none: an honest run must not read as forged."""
    _, planted = js_sentinels.draw({"__tests__/calc.test.js": CALC_TESTS})
    assert js_sentinels.heard(planted, {GRADED[0]: "PASSED"}) == ()
    one = {GRADED[0]: "PASSED", planted[0].test_id: planted[0].expected}
    assert js_sentinels.heard(planted, one) == planted  # one heard: every one is judged
