"""``import-tasks --format multi-swe-bench`` and ``--format swe-polybench``, and their test names.

The rows are written here in the shapes the two datasets publish (Multi-SWE-bench: a pull
request with ``base.sha``, ``fix_patch``, tests by transition as ``{name: {run, test, fix}}``,
one folder per language; SWE-PolyBench: ``F2P``/``P2P`` as the text of a Python list, a
``language`` column) over a JavaScript/TypeScript repository built here with patches made by
git. The name mapping is checked on names shaped as their harnesses make them (dayjs' jest
``--verbose`` lines, express' mocha titles, PolyBench's jest ``path->full name``, mocha full
titles, TAP lines) and through the label check on runs built by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from repo_factory import RepoBuilder
from trajforge.generators.imports.formats import FORMATS, parse_row
from trajforge.generators.imports.multiswebench import language_of_file
from trajforge.generators.imports.rows import BadRow
from trajforge.schemas.candidate import Candidate, DatasetLabels
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.validation.candidate import ValidationResult
from trajforge.verifiers.validation.label_names import NO_MATCH, WHOLE_FILE, map_names
from trajforge.verifiers.validation.labels import check_labels

REPO = "acme/kit"
LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:fa6b53\nsize 503147289\n"
SUM_TEST = "test/sum.test.js"
FMT_TEST = "test/fmt.test.ts"


class Kit:
    """A JS/TS library: ``base`` with two bugs, ``js_fixed`` fixes sum.js (and adds its test),
    ``ts_fixed`` then fixes fmt.ts (and adds its test)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "kit"
        b = RepoBuilder(self.path)
        self.base = b.commit(
            "kit",
            {
                "package.json": json.dumps(
                    {"name": "kit", "scripts": {"test": "jest"}, "devDependencies": {"jest": "29"}}
                ),
                "src/sum.js": "module.exports = (a, b) => a - b\n",
                "src/fmt.ts": "export const fmt = (n: number): string => `${n}`.trim() + ' '\n",
                SUM_TEST: "const sum = require('../src/sum')\n"
                "test('adds zero', () => expect(sum(1, 0)).toBe(1))\n",
                FMT_TEST: "import { fmt } from '../src/fmt'\n"
                "test('formats', () => expect(typeof fmt(1)).toBe('string'))\n",
            },
        )
        self.js_fixed = b.commit(
            "sum adds",
            {
                "src/sum.js": "module.exports = (a, b) => a + b\n",
                SUM_TEST: "const sum = require('../src/sum')\n"
                "test('adds zero', () => expect(sum(1, 0)).toBe(1))\n"
                "describe('sum', () => { test('adds', () => expect(sum(2, 3)).toBe(5)) })\n",
            },
        )
        self.ts_fixed = b.commit(
            "fmt trims",
            {
                "src/fmt.ts": "export const fmt = (n: number): string => `${n}`\n",
                FMT_TEST: "import { fmt } from '../src/fmt'\n"
                "test('formats', () => expect(typeof fmt(1)).toBe('string'))\n"
                "test('no space', () => expect(fmt(1)).toBe('1'))\n",
            },
        )
        self.js_patch = b.git("diff", self.base, self.js_fixed, "--", "src") + "\n"
        self.js_test_patch = b.git("diff", self.base, self.js_fixed, "--", "test") + "\n"
        self.ts_patch = b.git("diff", self.js_fixed, self.ts_fixed, "--", "src") + "\n"
        self.ts_test_patch = b.git("diff", self.js_fixed, self.ts_fixed, "--", "test") + "\n"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    return Kit(tmp_path_factory.mktemp("import-msb"))


def _statuses(run: str, test: str, fix: str) -> dict[str, str]:
    return {"run": run, "test": test, "fix": fix}


def msb_row(kit: Kit, pr: int, **changes: Any) -> dict[str, Any]:
    """A row as ByteDance-Seed/Multi-SWE-bench publishes it (``js/<org>__<repo>_dataset.jsonl``):
    jest --verbose names, ``file`` and ``file:title``."""
    js = pr == 1
    row = {
        "org": "acme",
        "repo": "kit",
        "number": pr,
        "state": "closed",
        "title": "sum subtracts" if js else "fmt pads",
        "body": "",
        "base": {
            "label": "acme:main",
            "ref": "main",
            "sha": kit.base if js else kit.js_fixed,
        },
        "resolved_issues": [{"number": 7, "title": "sum(2, 3) is -1", "body": "It subtracts."}],
        "fix_patch": kit.js_patch if js else kit.ts_patch,
        "test_patch": kit.js_test_patch if js else kit.ts_test_patch,
        "fixed_tests": {},
        "p2p_tests": {
            f"{SUM_TEST}:adds zero" if js else f"{FMT_TEST}:formats": _statuses(
                "PASS", "PASS", "PASS"
            )
        },
        "f2p_tests": {
            f"{SUM_TEST}:adds" if js else f"{FMT_TEST}:no space": _statuses("NONE", "FAIL", "PASS")
        },
        "s2p_tests": {},
        "n2p_tests": {SUM_TEST if js else FMT_TEST: _statuses("PASS", "NONE", "PASS")},
        "run_result": {"passed_count": 1, "failed_count": 0, "skipped_count": 0},
        "test_patch_result": {"passed_count": 1, "failed_count": 1, "skipped_count": 0},
        "fix_patch_result": {"passed_count": 2, "failed_count": 0, "skipped_count": 0},
        "instance_id": f"acme__kit-{pr}",
    }
    return {**row, **changes}


def polybench_row(kit: Kit, language: str, **changes: Any) -> dict[str, Any]:
    """A row as AmazonScience/SWE-PolyBench publishes it: F2P/P2P as Python list text."""
    js = language == "JavaScript"
    test = SUM_TEST if js else FMT_TEST
    row = {
        "repo": REPO,
        "instance_id": f"acme__kit-{10 if js else 20}",
        "base_commit": kit.base if js else kit.js_fixed,
        "patch": kit.js_patch if js else kit.ts_patch,
        "test_patch": kit.js_test_patch if js else kit.ts_test_patch,
        "problem_statement": "sum subtracts" if js else "fmt pads",
        "created_at": "2024-02-03T04:05:06Z",
        "language": language,
        "Dockerfile": "FROM ubuntu:22.04\n",
        "test_command": "npx jest --json",
        "F2P": repr([f"/testbed/{test}->sum adds" if js else f"/testbed/{test}->no space"]),
        "P2P": repr([f"/testbed/{test}->adds zero" if js else f"/testbed/{test}->formats"]),
        "modified_nodes": json.dumps([]),
    }
    return {**row, **changes}


def _write(path: Path, rows: list[Any], extra: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(x + "\n" for x in extra))
    return path


def _tables(out: Path) -> tuple[list[Candidate], dict[str, list[Rejection]]]:
    candidates = [c for f in sorted((out / "candidates").glob("*.parquet"))
                  for c in read_records(Candidate, str(f))]  # fmt: skip
    rejections: dict[str, list[Rejection]] = {}
    for f in sorted((out / "rejections").glob("*.parquet")):
        for r in read_records(Rejection, str(f)):
            rejections.setdefault(r.reason, []).append(r)
    return candidates, rejections


# --- the importer -------------------------------------------------------------------------------


def test_formats_are_offered():
    assert {"multi-swe-bench", "swe-polybench"} <= set(FORMATS)
    assert language_of_file("data/ts/darkreader__darkreader_dataset.jsonl:3") == "typescript"
    assert language_of_file("hub/go.jsonl#row=4") == "go"
    assert language_of_file("s3://bucket/rows.jsonl:1") == ""


def test_multi_swe_bench_js_and_ts_rows_become_candidates(kit, tmp_path):
    data = tmp_path / "msb"
    go = msb_row(kit, 3, org="gin-gonic", repo="gin", instance_id="gin-gonic__gin-3")
    _write(data / "js" / "acme__kit_dataset.jsonl", [
        msb_row(kit, 1),
        msb_row(kit, 4, base={"ref": "main"}),  # no sha
        msb_row(kit, 5, f2p_tests=["test/sum.test.js:adds"]),  # a list, not {name: statuses}
        msb_row(kit, 6, fix_patch="sum() should add, not subtract"),  # not a diff
        msb_row(kit, 7, number="seven", instance_id=None),
        msb_row(kit, 8, repo="kit; rm -rf /"),
    ], extra=("version https://git-lfs.github.com/spec/v1",))  # fmt: skip
    _write(data / "ts" / "acme__kit_dataset.jsonl", [msb_row(kit, 2)])
    _write(data / "go" / "gin-gonic__gin_dataset.jsonl", [go])
    _write(tmp_path / "labelled.jsonl", [msb_row(kit, 9, language="Rust")])
    (data / "ts" / "vuejs__core_dataset.jsonl").write_text(LFS)
    proc = run_cli(
        "import-tasks", "--format", "multi-swe-bench", "msb", "labelled.jsonl",
        "--source", f"{REPO}={kit.path}", "--output", "out", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "import-tasks: 11 inputs, 2 kept, 9 rejected" in proc.stderr, proc.stderr
    candidates, rejections = _tables(tmp_path / "out")
    by_id = {c.labels.instance_id: c for c in candidates if c.labels is not None}
    js, ts = by_id["acme__kit-1"], by_id["acme__kit-2"]
    assert (js.repo, js.base_commit, js.patch, js.test_patch, js.origin) == (
        REPO, kit.base, kit.js_patch, kit.js_test_patch, "commit"
    )  # fmt: skip
    assert js.labels == DatasetLabels(
        "multi-swe-bench", "acme__kit-1", (f"{SUM_TEST}:adds", SUM_TEST), (f"{SUM_TEST}:adds zero",)
    )
    assert js.meta is not None and js.meta.message == "sum(2, 3) is -1"
    assert ts.base_commit == kit.js_fixed and "src/fmt.ts" in ts.patch
    assert ts.labels is not None
    ts_fixed = ts.labels.FAIL_TO_PASS
    assert ts_fixed == (f"{FMT_TEST}:no space", FMT_TEST)
    counts = {reason: len(found) for reason, found in rejections.items()}
    assert counts == {
        "language_not_supported": 1, "unknown_repo": 1, "no_base_commit": 1, "bad_row": 5,
        "bad_input_file": 1,
    }, rejections  # fmt: skip
    [lfs] = rejections["bad_input_file"]
    assert "vuejs__core_dataset.jsonl: is a Git LFS pointer, not the data" in lfs.detail
    langs = {r.input: r.detail for r in rejections["language_not_supported"]}
    [gin] = rejections["unknown_repo"]  # Go is a language now: the row wants its source
    assert gin.input == "gin-gonic__gin-3" and "gin-gonic/gin" in gin.detail
    assert "language 'Rust' is not supported" in langs["acme__kit-9"]
    bad = {r.input: r.detail for r in rejections["bad_row"]}
    assert "f2p_tests must map test names to their statuses" in bad["acme__kit-5"]
    assert "fix_patch is not a unified diff" in bad["acme__kit-6"]
    assert "is not a pull request number" in bad["msb/js/acme__kit_dataset.jsonl:5"]
    assert "must name a GitHub repo" in bad["acme__kit-8"]
    assert "msb/js/acme__kit_dataset.jsonl:7" in bad  # the LFS pointer line: not JSON


def test_polybench_js_and_ts_rows_become_candidates(kit, tmp_path):
    rows = [
        polybench_row(kit, "JavaScript"),
        polybench_row(kit, "TypeScript"),
        polybench_row(kit, "Java", instance_id="google__gson-1", repo="google/gson"),
        polybench_row(kit, "JavaScript", instance_id="acme__kit-30", F2P="['unclosed"),
        polybench_row(kit, "JavaScript", instance_id="acme__kit-31", P2P="__import__('os')"),
        polybench_row(kit, "JavaScript", instance_id="acme__kit-32", repo="kit"),
    ]
    _write(tmp_path / "pb.jsonl", rows)
    proc = run_cli(
        "import-tasks", "--format", "swe-polybench", "pb.jsonl",
        "--source", f"{REPO}={kit.path}", "--output", "out", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "import-tasks: 6 inputs, 2 kept, 4 rejected" in proc.stderr, proc.stderr
    candidates, rejections = _tables(tmp_path / "out")
    by_id = {c.labels.instance_id: c for c in candidates if c.labels is not None}
    js = by_id["acme__kit-10"]
    assert js.labels == DatasetLabels(
        "swe-polybench", "acme__kit-10", (f"/testbed/{SUM_TEST}->sum adds",),
        (f"/testbed/{SUM_TEST}->adds zero",),
    )  # fmt: skip
    assert js.created_at == "2024-02-03T04:05:06Z" and js.base_commit == kit.base
    assert by_id["acme__kit-20"].base_commit == kit.js_fixed
    [java] = rejections["language_not_supported"]
    assert java.input == "google__gson-1" and "language 'Java'" in java.detail
    bad = {r.input: r.detail for r in rejections["bad_row"]}
    assert "F2P is text but not a list literal" in bad["acme__kit-30"]
    assert "P2P is text but not a list literal" in bad["acme__kit-31"]  # literals only: no call
    assert "must be owner/name" in bad["acme__kit-32"]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([], "a row must be an object"),
        ({"org": "acme", "repo": "kit", "number": 1, "base": {"sha": "ab"}, "fix_patch": 3},
         "fix_patch must be text"),
        ({"org": "acme", "repo": "kit", "number": True}, "number must be the pull request"),
        ({"org": "acme", "repo": "kit", "number": 1, "base": {"sha": "ab"},
          "fix_patch": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
          "p2p_tests": {"t": "PASS"}}, "p2p_tests must map test names"),
    ],
)  # fmt: skip
def test_hostile_multi_swe_bench_rows_are_one_line(raw, says):
    with pytest.raises(BadRow) as caught:
        parse_row("multi-swe-bench", "rows.jsonl:1", raw)
    assert says in str(caught.value) and "\n" not in str(caught.value)


# --- their names onto ours ----------------------------------------------------------------------

OURS_JS = {
    "test/timezone.test.js > TZ with Locale",
    "test/timezone.test.js > Utc Offset",
    "test/plugin/utc.test.js > UTC > parses",
    "test/plugin/utc.test.js > local > parses",
    "test/app.router.js > app.router > methods > should include PATCH",
    "test/app.router.js > app.router > should be chainable",
    "test/res.send.js > res > .send() > should be chainable",
}


def test_multi_swe_bench_names_map_only_where_exact():
    names = [
        "test/timezone.test.js:TZ with Locale",  # dayjs jest --verbose: file, own title
        "test/timezone.test.js",  # the file's PASS/FAIL line
        "test/plugin/utc.test.js:parses",  # two tests of that file are titled so
        "should include PATCH",  # express' mocha spec line: the bare title
        "should be chainable",  # two files have one
        "test/gone.test.js:vanished",
        "test/timezone.test.js > Utc Offset",  # already ours
    ]
    found = map_names("multi-swe-bench", names, OURS_JS)
    assert found.ours == {
        "test/timezone.test.js:TZ with Locale": "test/timezone.test.js > TZ with Locale",
        "should include PATCH": "test/app.router.js > app.router > methods > should include PATCH",
    }
    assert found.files == {
        "test/timezone.test.js": {
            "test/timezone.test.js > TZ with Locale", "test/timezone.test.js > Utc Offset"
        }
    }  # fmt: skip
    assert found.unmapped["test/gone.test.js:vanished"] == NO_MATCH
    for ambiguous in ("test/plugin/utc.test.js:parses", "should be chainable"):
        assert found.unmapped[ambiguous].startswith("2 tests here answer to it")
    assert "test/timezone.test.js > Utc Offset" not in found.unmapped | found.ours | found.files


def test_polybench_names_map_only_where_exact():
    ours = {
        "src/components/__tests__/Button.test.js > Button component > renders correctly",
        "test/calc.spec.js > Calculator > add > should add two numbers correctly",
        "test/calc.spec.js > Calculator > divide > should handle division by zero",
        "tests/plugins/divide.test.ts > divide > works",
        "tests/plugins/space.test.ts > space > works",
    }
    names = [
        "/testbed/src/components/__tests__/Button.test.js->Button component renders correctly",
        "Calculator add should add two numbers correctly",  # mocha's fullTitle
        "2 Calculator divide should handle division by zero",  # a TAP line after "ok "
        "/testbed/tests/plugins/divide.test.ts->works",  # tailwind's parser: the bare title
        "works",
        "/elsewhere/nothing.test.js->x",
    ]
    found = map_names("swe-polybench", names, ours)
    assert found.ours == {
        names[0]: "src/components/__tests__/Button.test.js > Button component > renders correctly",
        names[1]: "test/calc.spec.js > Calculator > add > should add two numbers correctly",
        names[2]: "test/calc.spec.js > Calculator > divide > should handle division by zero",
        names[3]: "tests/plugins/divide.test.ts > divide > works",
    }
    assert found.unmapped["works"].startswith("2 tests here answer to it")
    assert found.unmapped["/elsewhere/nothing.test.js->x"] == NO_MATCH


def test_go_names_map_to_the_one_package_that_has_the_test():
    ours = {".::TestParse/empty", "internal/lex::TestParse/empty", "internal/lex::TestLex",
            "cmd/tool::TestMain_flags"}  # fmt: skip
    found = map_names("multi-swe-bench", ["TestLex", "TestParse/empty", "TestMain_flags",
                                          "TestGone"], ours)  # fmt: skip
    assert found.ours == {
        "TestLex": "internal/lex::TestLex",
        "TestMain_flags": "cmd/tool::TestMain_flags",
    }
    assert found.unmapped["TestParse/empty"].startswith("2 tests here answer to it")
    assert found.unmapped["TestGone"] == NO_MATCH


def test_python_datasets_and_runless_checks_map_nothing():
    assert map_names("swe-bench", ["tests/test_a.py::test_x"], {"tests/test_a.py::t"}).ours == {}
    assert map_names("multi-swe-bench", ["test/a.test.js"], ()).unmapped == {}


def _run(state: str, statuses: dict[str, str]) -> TestRun:
    tests = tuple(TestStatus(t, s) for t, s in sorted(statuses.items()))
    return TestRun(
        f"{state}-0", "c1", "p1", state, 0, (), 1, True, False, 0.1, tests, (), "d" * 64, "log"
    )


def test_label_check_classes_their_names_as_ours():
    adds, zero = f"{SUM_TEST} > sum > adds", f"{SUM_TEST} > adds zero"
    other = "test/other.test.js > works"
    task = TaskInstance(
        "acme__kit-1", REPO, "abc", "p", "tp", "", "", "2024-01-01", (adds,), (zero, other),
        "abc", "img", "jest", "commit", "p1", "c1", "/src", (), None,
    )  # fmt: skip
    runs = (_run("base", {adds: "FAILED", zero: "PASSED", other: "PASSED"}),
            _run("gold", {adds: "PASSED", zero: "PASSED", other: "PASSED"}))  # fmt: skip
    labels = DatasetLabels(
        "multi-swe-bench", "acme__kit-1",
        # dayjs-like: a test by file:title, its file's line, and a file absent from their
        # test-patch run (n2p) that passes with the bug here
        (f"{SUM_TEST}:adds", SUM_TEST, "test/other.test.js"),
        (f"{SUM_TEST}:adds zero", f"{SUM_TEST}:gone"),
    )  # fmt: skip
    candidate = Candidate("c1", REPO, "/src", "abc", "p", "tp", "commit", "2024", labels=labels)
    check = check_labels(candidate, ValidationResult(task, None, runs))
    assert check is not None and check.verdict == "differs"
    f2p, p2p = check.FAIL_TO_PASS, check.PASS_TO_PASS
    assert f2p.agrees == (SUM_TEST, adds)
    assert f2p.we_missed == ("test/other.test.js",) and f2p.they_missed == ()
    assert f2p.why == {
        "test/other.test.js": f"{WHOLE_FILE}: 1 of its 1 tests not our FAIL_TO_PASS "
        f"({other}: our PASS_TO_PASS)"
    }
    assert p2p.agrees == (zero,) and p2p.they_missed == (other,)
    assert p2p.name_unmapped == (f"{SUM_TEST}:gone",) and p2p.why == {f"{SUM_TEST}:gone": NO_MATCH}
    assert check.detail == (
        "FAIL_TO_PASS: 2 agree, 1 we missed; PASS_TO_PASS: 1 agree, 1 they missed, 1 name unmapped"
    )


def test_label_check_reads_go_names_against_our_package_ids():
    # Multi-SWE-bench's Go harness prints `--- FAIL: TestMul` with no package: the name is ours
    # where one package alone has the test; `TestParse/empty` is in two packages here
    mul, sub, root_parse, lex_parse = (".::TestMul", ".::TestSub", ".::TestParse/empty",
                                       "internal/lex::TestParse/empty")  # fmt: skip
    task = TaskInstance(
        "acme__gocalc-1", REPO, "abc", "p", "tp", "", "", "2024-01-01", (mul,),
        (sub, root_parse, lex_parse), "abc", "img", "go", "commit", "p1", "c1", "/src", (), None,
        language="go",
    )  # fmt: skip
    passing = {sub: "PASSED", root_parse: "PASSED", lex_parse: "PASSED"}
    runs = (_run("base", {mul: "FAILED", **passing}), _run("gold", {mul: "PASSED", **passing}))
    labels = DatasetLabels(
        "multi-swe-bench", "acme__gocalc-1", ("TestMul",), ("TestSub", "TestParse/empty")
    )
    candidate = Candidate("c1", REPO, "/src", "abc", "p", "tp", "commit", "2024", labels=labels)
    check = check_labels(candidate, ValidationResult(task, None, runs))
    assert check is not None
    assert check.FAIL_TO_PASS.agrees == (mul,) and check.FAIL_TO_PASS.we_missed == ()
    assert check.PASS_TO_PASS.agrees == (sub,)
    assert check.PASS_TO_PASS.name_unmapped == ("TestParse/empty",)
    assert check.PASS_TO_PASS.why["TestParse/empty"].startswith("2 tests here answer to it")
