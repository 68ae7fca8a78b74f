"""A Multi-SWE-bench JS row end to end: ``import-tasks`` then ``validate`` in real containers, and
the label check reading the row's jest ``--verbose`` names against the ids our jest run reported.

The project is built here (jest from the npm registry, its lock made by npm); the row is written
in the dataset's shape with the names its harness makes: ``file:title`` (the test's own title,
its describe lost) and a whole file's PASS line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from repo_factory import RepoBuilder
from test_js_environments import npm_lock
from trajforge.schemas.label_check import LabelCheck
from trajforge.schemas.storage import read_records

pytestmark = pytest.mark.docker

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "scripts": {"test": "jest"},
    "devDependencies": {"jest": "29.7.0"},
}
CALC = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a + b;\n"
CALC_FIXED = CALC.replace("exports.mul = (a, b) => a + b;", "exports.mul = (a, b) => a * b;")
CALC_TESTS = """\
const { add } = require('../src/calc');

describe('calc', () => {
  test('adds', () => { expect(add(2, 3)).toBe(5); });
});
"""
MUL_TESTS = """\
const { mul } = require('../src/calc');

describe('mul', () => {
  test('multiplies', () => { expect(mul(2, 3)).toBe(6); });
});
"""
PARAMS = "cache_dir: {cache}\nvalidate:\n  test_timeout_s: 180\n  workers: 2\n  gold_runs: 0\n"


def _diff(repo: Path, before: str, after: str, *paths: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-renames", before, after, "--", *paths],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _tests(*names: str) -> dict[str, dict[str, str]]:
    return {n: {"run": "PASS", "test": "FAIL", "fix": "PASS"} for n in names}


def test_a_multi_swe_bench_row_is_validated_and_its_names_checked(tmp_path, docker_engine):
    calc = RepoBuilder(tmp_path / "calc")
    base = calc.commit(
        "calc with jest",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "package-lock.json": npm_lock(PACKAGE),
            "src/calc.js": CALC,
            "__tests__/calc.test.js": CALC_TESTS,
        },
    )
    fixed = calc.commit("fix mul", {"src/calc.js": CALC_FIXED, "__tests__/mul.test.js": MUL_TESTS})
    row = {
        "org": "acme", "repo": "calc", "number": 12, "state": "closed", "title": "mul adds",
        "body": "", "base": {"label": "acme:main", "ref": "main", "sha": base},
        "resolved_issues": [{"number": 11, "title": "mul(2, 3) is 5", "body": ""}],
        "fix_patch": _diff(calc.path, base, fixed, "src"),
        "test_patch": _diff(calc.path, base, fixed, "__tests__"),
        "f2p_tests": _tests("__tests__/mul.test.js:multiplies"),
        "n2p_tests": _tests("__tests__/mul.test.js"),  # the file's PASS line
        "s2p_tests": {},
        "p2p_tests": _tests("__tests__/calc.test.js:adds"),
        "instance_id": "acme__calc-12",
    }  # fmt: skip
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "acme__calc_dataset.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "params.yaml").write_text(PARAMS.format(cache=tmp_path / "cache"))
    for args in (
        ("import-tasks", "--format", "multi-swe-bench", "js", "--source",
         f"acme/calc={calc.path}", "--output", "imported"),
        ("validate", "--input", "imported", "--output", "out"),
    ):  # fmt: skip
        done = run_cli(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    [check] = read_records(LabelCheck, str(tmp_path / "out" / "label_check"))
    assert check.instance_id == "acme__calc-12" and check.dataset == "multi-swe-bench"
    f2p, p2p = check.FAIL_TO_PASS, check.PASS_TO_PASS
    # the file's line is judged as a file: its one test is our FAIL_TO_PASS, none fails fixed
    assert f2p.agrees == ("__tests__/mul.test.js", "__tests__/mul.test.js > mul > multiplies")
    assert p2p.agrees == ("__tests__/calc.test.js > calc > adds",)
    assert (f2p.they_missed, p2p.they_missed, f2p.we_missed, p2p.we_missed) == ((), (), (), ())
    assert f2p.name_unmapped == p2p.name_unmapped == ()
    assert check.verdict == "confirmed"
    assert check.detail == "FAIL_TO_PASS: 2 agree; PASS_TO_PASS: 1 agree"
