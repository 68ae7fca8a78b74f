"""Go through `trajforge validate`: mined fixes (one whose test does not build at base, one
whose test panics there) and injected bugs of a test-built std-only Go module become Go tasks
with exact FAIL_TO_PASS and PASS_TO_PASS; a bug no test sees is not_covered; a module whose
dependency the proxy does not have is one install_failed line; `trajforge evaluate` resolves the
tasks' gold patches under the Go grader and no empty one.

One run of the real CLI over one candidates table (the way mine and inject write it): the
module's image is built once (Debian's go: the build stage downloads nothing).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from go_calc import CALC, FILES, TEXT
from repo_factory import RepoBuilder
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.storage import write_records

pytestmark = pytest.mark.docker

MUL = "\n// Mul returns a times b.\nfunc Mul(a, b int) int { return a %s b }\n"
MUL_BUGGY, MUL_FIXED = CALC + MUL % "+", CALC + MUL % "*"
MUL_TESTS = """\
package calc

import "testing"

func TestMul(t *testing.T) {
\tif Mul(2, 3) != 6 {
\t\tt.Fatal(Mul(2, 3))
\t}
}
"""
DIV = "\n// Div returns a over b.\nfunc Div(a, b int) int { return a / b }\n"
DIV_TESTS = MUL_TESTS.replace("Mul(2, 3) != 6", "Div(6, 3) != 2").replace("Mul", "Div")
SIGN = "\n// Sign returns -1, 0 or 1.\nfunc Sign(n int) int {%s\treturn n / Abs(n)\n}\n"
SIGN_BUGGY, SIGN_FIXED = SIGN % "\n", SIGN % "\n\tif n == 0 {\n\t\treturn 0\n\t}\n"
# sign_test.go runs after the package's other test files: at base TestSignZero divides by zero,
# the panic ends the binary, and TestSignNegative never runs
SIGN_TESTS = """\
package calc

import "testing"

func TestSignZero(t *testing.T) {
\tif Sign(0) != 0 {
\t\tt.Fatal(Sign(0))
\t}
}

func TestSignNegative(t *testing.T) {
\tif Sign(-4) != -1 {
\t\tt.Fatal(Sign(-4))
\t}
}
"""
WHISPER = TEXT + (
    "\n// Whisper lower-cases s (no test calls it).\n"
    'func Whisper(s string) string { return strings.ToLower(s) + "..." }\n'
)
PASSING = [".::TestAbs", ".::TestAdd", ".::TestAdd/neg", ".::TestAdd/pos", ".::TestSub",
           "internal/text::TestShout"]  # fmt: skip
# A module that needs a module the proxy does not have: its download fails.
BROKEN_MOD = """\
module example.com/broken

go 1.19

require example.com/trajforge-no-such-module-0b6f v1.0.0
"""
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
    root = tmp_path_factory.mktemp("goval")
    calc = RepoBuilder(root / "calc")
    initial = calc.commit("calc in go", {**FILES, "calc.go": MUL_BUGGY,
                                         "internal/text/text.go": WHISPER})  # fmt: skip
    fixed = calc.commit("fix Mul", {"calc.go": MUL_FIXED, "mul_test.go": MUL_TESTS})
    mined = _candidate(
        "mined-mul", calc.path, initial, commit=fixed, created_at="2026-01-01",
        patch=_diff(calc.path, initial, fixed, "calc.go"),
        test_patch=_diff(calc.path, initial, fixed, "mul_test.go"),
    )  # fmt: skip
    # A fix whose new test calls the function it adds: the package does not build at base.
    div = calc.commit("add Div", {"calc.go": MUL_FIXED + DIV, "div_test.go": DIV_TESTS})
    n2p = _candidate(
        "mined-div", calc.path, fixed, commit=div, created_at="2026-01-01",
        patch=_diff(calc.path, fixed, div, "calc.go"),
        test_patch=_diff(calc.path, fixed, div, "div_test.go"),
    )  # fmt: skip
    # A fix whose test panics at base: the panic ends the package's binary (grpc-go-2996).
    unsigned = calc.commit("add Sign", {"calc.go": MUL_FIXED + DIV + SIGN_BUGGY})
    signed = calc.commit(
        "fix Sign at 0", {"calc.go": MUL_FIXED + DIV + SIGN_FIXED, "sign_test.go": SIGN_TESTS}
    )
    crash = _candidate(
        "mined-sign", calc.path, unsigned, commit=signed, created_at="2026-01-01",
        patch=_diff(calc.path, unsigned, signed, "calc.go"),
        test_patch=_diff(calc.path, unsigned, signed, "sign_test.go"),
    )  # fmt: skip
    bugs = [
        _bug("bug-sub", calc, fixed, {"calc.go": MUL_FIXED.replace("a - b", "a - b - 1")}),
        _bug("bug-unused", calc, fixed, {"internal/text/text.go": WHISPER.replace("...", "?")}),
    ]
    broken = RepoBuilder(root / "broken")
    package = {"calc.go": MUL_BUGGY, "fixed": MUL_FIXED, "test": MUL_TESTS}
    renamed = {k: v.replace("package calc", "package broken") for k, v in package.items()}
    b0 = broken.commit("broken", {"go.mod": BROKEN_MOD, "calc.go": renamed["calc.go"]})
    b1 = broken.commit("fix", {"calc.go": renamed["fixed"], "mul_test.go": renamed["test"]})
    failing = _candidate("mined-broken", broken.path, b0, commit=b1,
                         patch=_diff(broken.path, b0, b1, "calc.go"),
                         test_patch=_diff(broken.path, b0, b1, "mul_test.go"))  # fmt: skip
    work = root / "work"
    (work / "cands").mkdir(parents=True)
    (work / "params.yaml").write_text(PARAMS.format(cache=work / "cache"))
    write_records(
        str(work / "cands" / "part-0.parquet"),
        [mined, n2p, crash, *bugs, failing],
        Candidate.ARROW_SCHEMA,
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


def test_an_injected_go_bug_is_a_task_with_exact_lists(validated):
    work, _ = validated
    row = _tasks(work)["bug-sub"]
    assert row["FAIL_TO_PASS"] == [".::TestSub"]
    assert row["PASS_TO_PASS"] == sorted({*PASSING, ".::TestMul"} - {".::TestSub"})
    assert (row["language"], row["test_runner"]) == ("go", "go")
    assert "go test -json -count=1" in row["test_cmd"]
    assert row["bug_patch"] and row["patch"] and row["test_patch"] == ""
    reason, detail = _rejections(work)["bug-unused"]
    assert reason == "not_covered", detail


def test_a_mined_go_fix_is_a_go_task_with_exact_lists(validated):
    work, _ = validated
    row = _tasks(work)["mined-mul"]
    assert row["FAIL_TO_PASS"] == [".::TestMul"]
    assert row["PASS_TO_PASS"] == PASSING
    assert row["validation"]["gold_exit_code"] == 0


def test_a_fix_whose_test_does_not_build_at_base_makes_its_package_fail_to_pass(validated):
    """div_test.go calls Div, which the fix adds: at base the root package does not build, so
    its tests are absent there, failing, not passing (Multi-SWE-bench's n2p); with the fix
    every test of the package passes. The other package's test is PASS_TO_PASS."""
    work, _ = validated
    row = _tasks(work)["mined-div"]
    root = sorted({t for t in PASSING if t.startswith(".::")} | {".::TestMul", ".::TestDiv"})
    assert row["FAIL_TO_PASS"] == root
    assert row["PASS_TO_PASS"] == ["internal/text::TestShout"]
    # go test exits 2 when a package does not build (as for a usage error): which tests ran
    # decided, not the exit code
    assert row["validation"]["base_exit_code"] == 2 and row["validation"]["gold_exit_code"] == 0


def test_a_test_that_panics_at_base_makes_its_package_s_later_tests_fail_to_pass(validated):
    """At base TestSignZero panics and ends the package's binary, so TestSignNegative never
    runs there; with the fix both pass. Both are FAIL_TO_PASS, as Multi-SWE-bench counts them
    (grpc-go-2996); the tests that ran before the panic are PASS_TO_PASS."""
    work, _ = validated
    row = _tasks(work)["mined-sign"]
    assert row["FAIL_TO_PASS"] == [".::TestSignNegative", ".::TestSignZero"]
    root = {t for t in PASSING if t.startswith(".::")} | {".::TestMul", ".::TestDiv"}
    assert set(row["PASS_TO_PASS"]) >= root


def test_profiles_reach_and_the_failed_download(validated):
    work, stderr = validated
    reason, detail = _rejections(work)["mined-broken"]
    assert reason == "install_failed", detail
    assert "trajforge-no-such-module-0b6f" in detail.splitlines()[0], detail
    profiles = pl.read_parquet(work / "out" / "profiles" / "*.parquet").to_dicts()
    by_repo = {p["repo"]: p for p in profiles}
    assert {p["language"] for p in profiles} == {"go"}
    assert by_repo["calc"]["status"] == "built" and by_repo["broken"]["status"] == "failed"
    assert (by_repo["calc"]["runner"], by_repo["calc"]["runtime"]) == ("go", "1.19")
    assert len([p for p in profiles if p["repo"] == "calc"]) == 1  # one image for all commits
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["reach"] == "2 repositories: installed 1, collected 1, clean 1, task 1"
    assert summary["kept"] == 4
    assert "validate: 6 inputs, 4 kept, 2 rejected" in stderr


def test_evaluate_resolves_the_gold_patches_and_not_empty_ones(validated):
    """The stage after validate: each Go task's gold patch resolves under the Go grader, an
    empty one does not (mined and injected, validated, evaluated)."""
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
