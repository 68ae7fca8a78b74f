"""JavaScript through `trajforge validate`: a mined fix and injected bugs of a test-built npm +
jest project become tasks; a bug no test sees is not_covered; a failed install is one line.

One run of the real CLI over one candidates table (the way mine and inject write it) holding
both repositories' candidates: the project's image is built once, from the npm registry.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from repo_factory import RepoBuilder
from test_js_environments import npm_lock
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.storage import write_records

pytestmark = pytest.mark.docker

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "scripts": {"test": "jest"},
    "devDependencies": {"jest": "29.7.0"},
}
CALC = """\
exports.add = (a, b) => a + b;
exports.sub = (a, b) => a - b;
exports.mul = (a, b) => a + b;
"""
CALC_FIXED = CALC.replace("exports.mul = (a, b) => a + b;", "exports.mul = (a, b) => a * b;")
UNUSED = "exports.shout = (s) => s.toUpperCase() + '!';\n"
CALC_TESTS = """\
const { add, sub } = require('../src/calc');

describe('calc', () => {
  test('adds', () => { expect(add(2, 3)).toBe(5); });
  test('subtracts', () => { expect(sub(5, 3)).toBe(2); });
});
"""
MUL_TESTS = """\
const { mul } = require('../src/calc');

describe('mul', () => {
  test('multiplies', () => { expect(mul(2, 3)).toBe(6); });
});
"""
ADDS = "__tests__/calc.test.js > calc > adds"
SUBTRACTS = "__tests__/calc.test.js > calc > subtracts"
MULTIPLIES = "__tests__/mul.test.js > mul > multiplies"
# A project whose install cannot succeed: a dependency the npm registry does not have.
BROKEN = {
    "name": "broken",
    "version": "1.0.0",
    "scripts": {"test": "jest"},
    "devDependencies": {"jest": "29.7.0", "trajforge-no-such-package-0b6f": "1.0.0"},
}
PARAMS = """\
cache_dir: {cache}
validate:
  test_timeout_s: 180
  workers: 2
  gold_runs: 0
environment:
  pythons: ['3.11']
"""


def _diff(repo: Path, before: str, after: str, *paths: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-renames", before, after, "--", *paths],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _candidate(cid: str, repo: Path, base: str, **fields: str) -> Candidate:
    return Candidate(
        candidate_id=cid, repo=repo.name, source=str(repo), base_commit=base,
        patch=fields.get("patch", ""), test_patch=fields.get("test_patch", ""),
        origin=fields.get("origin", "commit"), created_at=fields.get("created_at", "2026-01-02"),
        meta=CandidateMeta(fields.get("commit", ""), cid, "2026-01-02", 1, 1, 1),
        bug_patch=fields.get("bug_patch", ""),
    )  # fmt: skip


def _bug(cid: str, builder: RepoBuilder, clean: str, files: dict[str, str]) -> Candidate:
    """A hand-written bug as inject writes one: bug_patch breaks, patch undoes it."""
    builder.git("checkout", "-q", "-b", cid, clean)
    bugged = builder.commit(cid, files)
    builder.git("checkout", "-q", clean)
    path = builder.path
    return _candidate(
        cid, path, clean, origin="bug/hand_written", created_at="2026-01-03",
        patch=_diff(path, bugged, clean), bug_patch=_diff(path, clean, bugged),
    )  # fmt: skip


@pytest.fixture(scope="module")
def validated(tmp_path_factory, docker_engine):
    root = tmp_path_factory.mktemp("jsval")
    calc = RepoBuilder(root / "calc")
    initial = calc.commit(
        "calc with jest",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "package-lock.json": npm_lock(PACKAGE),
            "src/calc.js": CALC,
            "src/unused.js": UNUSED,
            "__tests__/calc.test.js": CALC_TESTS,
        },
    )
    fixed = calc.commit("fix mul", {"src/calc.js": CALC_FIXED, "__tests__/mul.test.js": MUL_TESTS})
    mined = _candidate(
        "mined-mul", calc.path, initial, commit=fixed, created_at="2026-01-01",
        patch=_diff(calc.path, initial, fixed, "src"),
        test_patch=_diff(calc.path, initial, fixed, "__tests__"),
    )  # fmt: skip
    bugs = [
        _bug("bug-sub", calc, fixed, {"src/calc.js": CALC_FIXED.replace("a - b", "a - b - 1")}),
        _bug("bug-unused", calc, fixed, {"src/unused.js": UNUSED.replace("'!'", "'?'")}),
    ]
    broken = RepoBuilder(root / "broken")
    b0 = broken.commit("broken", {"package.json": json.dumps(BROKEN), "index.js": CALC})
    b1 = broken.commit("fix", {"index.js": CALC_FIXED, "index.test.js": MUL_TESTS})
    failing = _candidate("mined-broken", broken.path, b0, commit=b1,
                         patch=_diff(broken.path, b0, b1, "index.js"),
                         test_patch=_diff(broken.path, b0, b1, "index.test.js"))  # fmt: skip
    work = root / "work"
    (work / "cands").mkdir(parents=True)
    (work / "params.yaml").write_text(PARAMS.format(cache=work / "cache"))
    write_records(
        str(work / "cands" / "part-0.parquet"), [mined, *bugs, failing], Candidate.ARROW_SCHEMA
    )
    done = run_cli("validate", "--input", "cands", "--output", "out", cwd=work)
    assert done.returncode == 0, done.stderr
    return work, done.stderr


def _tasks(work: Path) -> dict[str, dict]:
    frame = pl.read_parquet(work / "out" / "tasks" / "*.parquet")
    return {row["candidate_id"]: row for row in frame.to_dicts()}


def _rejections(work: Path) -> dict[str, tuple[str, str]]:
    frame = pl.read_parquet(work / "out" / "rejections" / "*.parquet")
    return {r["input"]: (r["reason"], r["detail"]) for r in frame.to_dicts()}


def test_a_mined_js_fix_is_a_javascript_task_with_exact_lists(validated):
    work, _ = validated
    row = _tasks(work)["mined-mul"]
    assert row["FAIL_TO_PASS"] == [MULTIPLIES]
    assert row["PASS_TO_PASS"] == [ADDS, SUBTRACTS]
    assert (row["language"], row["test_runner"]) == ("javascript", "jest")
    assert "node_modules/.bin/jest" in row["test_cmd"] and row["image_name"].startswith(
        "trajforge-env:"
    )
    assert row["validation"]["base_exit_code"] == 1 and row["validation"]["gold_exit_code"] == 0
    assert row["validation"]["reruns"] == 2  # the decisive test's file rerun at base and gold
    runs = pl.read_parquet(work / "out" / "runs" / "*.parquet")
    reruns = runs.filter((pl.col("candidate_id") == "mined-mul") & (pl.col("attempt") == 1))
    for tests in reruns["tests"].to_list():  # a rerun by file reports only the selected ids
        assert [t["test_id"] for t in tests] == [MULTIPLIES]


def test_an_injected_js_bug_is_a_task_and_an_unseen_one_is_not_covered(validated):
    work, _ = validated
    row = _tasks(work)["bug-sub"]
    assert row["FAIL_TO_PASS"] == [SUBTRACTS]
    assert row["PASS_TO_PASS"] == [ADDS, MULTIPLIES]
    assert (row["language"], row["test_runner"]) == ("javascript", "jest")
    assert row["provenance"]["validated_by"] == "inject-js-v1"
    assert row["bug_patch"] and row["patch"] and row["test_patch"] == ""
    reason, detail = _rejections(work)["bug-unused"]
    assert reason == "not_covered", detail


def test_profiles_and_the_failed_install_and_reach(validated):
    work, stderr = validated
    reason, detail = _rejections(work)["mined-broken"]
    assert reason == "install_failed"
    first = detail.splitlines()[0]
    assert "npm install failed" in first and "trajforge-no-such-package-0b6f" in first, detail
    profiles = pl.read_parquet(work / "out" / "profiles" / "*.parquet").to_dicts()
    by_repo = {p["repo"]: p for p in profiles}
    assert {p["language"] for p in profiles} == {"javascript"}
    assert by_repo["calc"]["status"] == "built" and by_repo["broken"]["status"] == "failed"
    assert by_repo["calc"]["runner"] == "jest" and by_repo["calc"]["runtime"].isdigit()
    assert len([p for p in profiles if p["repo"] == "calc"]) == 1  # one image for both commits
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["reach"] == "2 repositories: installed 1, collected 1, clean 1, task 1"
    assert summary["kept"] == 2
    assert "validate: 4 inputs, 2 kept, 2 rejected" in stderr


def test_evaluate_resolves_the_gold_patches_and_not_empty_ones(validated):
    """The stage after validate: each task's gold patch resolves under the grader, an empty one
    does not (npm + jest end to end: mined and injected, validated, evaluated)."""
    work, _ = validated
    tasks = _tasks(work)
    for name, patch_of in (("gold", lambda row: row["patch"]), ("empty", lambda row: "")):
        rows = [{"instance_id": row["instance_id"], "model_name_or_path": name,
                 "model_patch": patch_of(row)} for row in tasks.values()]  # fmt: skip
        (work / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        done = run_cli("evaluate", "--tasks", "out", "--predictions", f"{name}.jsonl",
                       "--output", f"eval-{name}", cwd=work)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((work / f"eval-{name}" / f"{name}.evaluate.json").read_text())
        ids = sorted(row["instance_id"] for row in tasks.values())
        if name == "gold":
            assert sorted(summary["resolved_ids"]) == ids, summary
        else:
            assert summary["resolved_ids"] == [] and sorted(summary["empty_patch_ids"]) == ids
