"""The grader's TAP channel for ava and node-tap: numbered chunks kept in order, read by
validate's TAP parser after validate's own prefixing; every way a chunk could be forged,
reordered or added late is tampering. The TAP texts are as ava 5.3 (``--tap``, one file) and
node-tap 16.3 (``--reporter=tap``) wrote them for the forge kit's project."""

from __future__ import annotations

import json

import pytest
from trajforge.verifiers.grader.channel import read_records
from trajforge.verifiers.grader.rules import verdict
from trajforge.verifiers.languages.javascript import policy as js_policy
from trajforge.verifiers.languages.javascript import tap_runs

AVA_CALC = """\
TAP version 13
ok 1 - divides # SKIP
ok 2 - adds
not ok 3 - multiplies
  ---
    name: AssertionError
    assertion: is
    values:
      'Difference (- actual, + expected):': |-
        - 5
        + 6
    at: ''
  ...

1..3
# tests 3
# pass 1
# skip 1
# fail 1

"""
AVA_MORE = "TAP version 13\nok 1 - squares\n\n1..1\n# tests 1\n# pass 1\n# fail 0\n\n"
AVA_NONE = "TAP version 13\nnot ok 1 - No tests found in test/ava/helper.js\n\n1..0\n"
AVA_IDS = {
    "test/ava/calc.test.js > divides": "SKIPPED",
    "test/ava/calc.test.js > adds": "PASSED",
    "test/ava/calc.test.js > multiplies": "FAILED",
    "test/ava/more.test.js > squares": "PASSED",
}
TAP_CALC = """\
TAP version 13
# Subtest: test/tap/calc.test.js
    # Subtest: adds
        ok 1 - should be equal
        1..1
    ok 1 - adds # time=2.738ms

    # Subtest: multiplies
        not ok 1 - should be equal
          ---
          compare: ===
          ...

        1..1
        # failed 1 test
    not ok 2 - multiplies # time=13.239ms

    1..2
    # failed 1 of 2 tests
not ok 1 - test/tap/calc.test.js # time=20.068ms
  ---
  exitCode: 1
  ...

1..1
# failed 1 test
"""
TAP_IDS = {"test/tap/calc.test.js > adds": "PASSED", "test/tap/calc.test.js > multiplies": "FAILED"}


def chunk(n: int, text: str, file: str = "") -> str:
    return json.dumps({"t": "tap", "n": n, "file": file, "text": text})


def records(pieces: list[tuple[str, str]], finish: bool = True) -> str:
    """The records a driver sends for ``pieces`` ((file, text)), each text cut in two."""
    lines = []
    for file, text in pieces:
        middle = len(text) // 2  # a chunk may end inside a line
        for part in (text[:middle], text[middle:]):
            lines.append(chunk(len(lines), part, file))
    if finish:
        lines.append('{"t": "finish"}')
    return "\n".join(lines) + "\n"


def read(text: str, runner: str, package_dir: str = ""):
    return tap_runs.tap_evidence(read_records(text), runner, package_dir)


def test_ava_files_are_prefixed_as_validate_does_and_read_by_its_parser():
    pieces = [
        ("test/ava/calc.test.js", AVA_CALC),
        ("test/ava/helper.js", AVA_NONE),
        ("test/ava/more.test.js", AVA_MORE),
    ]
    evidence = read(records(pieces), "ava")
    assert (evidence.statuses, evidence.tampering, evidence.finished) == (AVA_IDS, (), True)
    report = tap_runs.ava_report(pieces)
    assert report.startswith("TAP version 13\nok 1 - test/ava/calc.test.js \u203a divides # SKIP")
    assert report.count("TAP version") == 1 and report.endswith("\n1..4\n")
    assert "No tests found" not in report


def test_node_tap_is_read_as_written_and_prefixed_in_a_workspace_package():
    evidence = read(records([("", TAP_CALC)]), "tap")
    assert (evidence.statuses, evidence.tampering, evidence.finished) == (TAP_IDS, (), True)
    in_package = read(records([("", TAP_CALC)]), "tap", "packages/calc")
    assert in_package.statuses == {f"packages/calc/{t}": s for t, s in TAP_IDS.items()}
    ava = read(records([("test/ava/more.test.js", AVA_MORE)]), "ava", "packages/calc")
    assert ava.statuses == {"packages/calc/test/ava/more.test.js > squares": "PASSED"}


def test_a_chunk_out_of_order_is_tampering():
    lines = records([("", TAP_CALC)]).splitlines()
    swapped = [lines[1], lines[0], *lines[2:]]
    evidence = read("\n".join(swapped), "tap")
    assert evidence.tampering and "TAP chunk 1 came where chunk 0 was due" in evidence.tampering
    repeated = [lines[0], lines[0], *lines[1:]]
    assert read("\n".join(repeated), "tap").tampering


@pytest.mark.parametrize(
    "forged",
    [
        "unkeyed " + chunk(2, "ok 1 - adds\n"),  # as the supervisor keeps an unkeyed line
        json.dumps({"t": "tap", "n": "2", "file": "", "text": "ok 1 - adds\n"}),
        json.dumps({"t": "tap", "n": True, "file": "", "text": "ok 1 - adds\n"}),
        json.dumps({"t": "tap", "n": 2, "file": "", "text": "ok\n", "ok": True}),
        json.dumps({"t": "tap", "n": 2, "text": "ok 1 - adds\n"}),
        json.dumps({"t": "tap", "n": 2, "file": "", "text": ["ok 1 - adds"]}),
    ],
)
def test_a_forged_chunk_is_tampering(forged):
    lines = records([("", TAP_CALC)], finish=False).splitlines()
    evidence = read("\n".join([*lines[:2], forged, '{"t": "finish"}']), "tap")
    assert evidence.tampering, forged
    resolved, reason, trusted = verdict(
        evidence.statuses, evidence.tampering, evidence.finished, 1, False, tuple(TAP_IDS), []
    )
    assert (resolved, reason, trusted) == (False, "forged_result", False)


def test_text_after_finish_is_tampering():
    text = records([("", TAP_CALC)]) + chunk(2, "ok 3 - late\n") + "\n"
    assert "came after the session finished" in " ".join(read(text, "tap").tampering)


def test_a_stream_that_contradicts_itself_is_tampering():
    fake = TAP_CALC.replace("    # Subtest: adds\n", "    ok 9 - adds\n    # Subtest: adds\n", 1)
    evidence = read(records([("", fake)]), "tap")
    assert evidence.statuses == {}
    assert "contradicts itself" in evidence.tampering[-1]
    assert "plan" in evidence.tampering[-1]


def test_a_stream_that_bailed_out_did_not_finish_a_run():
    bailed = TAP_CALC.replace("not ok 1 - test/tap/calc.test.js", "Bail out! # stopped")
    evidence = read(records([("", bailed)]), "tap")
    assert (evidence.statuses, evidence.tampering) == ({}, ())
    assert verdict({}, (), True, 1, False, tuple(TAP_IDS), [])[1] == "suite_did_not_run"


def test_no_chunks_is_a_suite_that_did_not_run():
    evidence = read('{"t": "finish"}\n', "ava")
    assert (evidence.statuses, evidence.tampering) == ({}, ())


def test_node_arguments():
    files = ("test/a.test.js", "test/b.test.js")
    assert tap_runs.ava_args("D", "node_modules/ava/entrypoints/cli.mjs", 5, files, 30) == [
        "D", "node_modules/ava/entrypoints/cli.mjs", "--tap", "--no-worker-threads",
        "--timeout=30s", "--", *files,
    ]  # fmt: skip
    assert "--no-worker-threads" not in tap_runs.ava_args("D", "cli.js", 3, files, 30)
    assert tap_runs.tap_args("R", "node_modules/tap/bin/run.js", files, 30) == [
        "-r", "R", "node_modules/tap/bin/run.js", "--reporter=tap", "--no-coverage",
        "--timeout=300", *files,
    ]  # fmt: skip
    assert tap_runs.installed_major(b'{"version": "16.3.10"}') == 16
    assert tap_runs.installed_major(b'{"version": 5}') == 5
    assert tap_runs.installed_major(b"not json") == tap_runs.installed_major(None) == 0


def test_ava_and_tap_configuration_is_reset_with_the_files_it_names():
    tree = {
        ".taprc": b"before: scripts/setup.js\nnode-arg: [--require, ./support/hook.js]\n",
        "ava.config.cjs": b"module.exports = { require: ['./helpers/env.js'] };\n",
        "package.json": json.dumps({"main": "src/a.js", "tap": {"after": "lib/done.js"}}).encode(),
        "scripts/setup.js": b"",
        "support/hook.js": b"",
        "helpers/env.js": b"",
        "lib/done.js": b"",
        "src/a.js": b"",
    }
    found = js_policy.grading_files(tree, tree.get)
    assert found == set(tree) - {"src/a.js"}
