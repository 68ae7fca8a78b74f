"""Go's proving floor without a container: the policy read from real git trees, the sentinels
and twins built and run by a real go, the stream checks on the streams a test binary writes,
the reader of added source, and the registry line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from go_forge import (
    ARGS_FORGER,
    BUGGY,
    CALC_TESTS,
    CALLER_FORGER,
    FILES,
    GOLD,
    LINKNAME,
    STDOUT_FORGER,
)
from repo_factory import RepoBuilder
from trajforge.verifiers.grader import rules
from trajforge.verifiers.grader.sentinels import FAIL, PASS, SAME
from trajforge.verifiers.grader.suspicious import suspicious_reason
from trajforge.verifiers.languages.base import TaskTree
from trajforge.verifiers.languages.go import policy, sentinels
from trajforge.verifiers.languages.go.grading import GoGrading
from trajforge.verifiers.languages.go.runs import stream_problems, supervised_run
from trajforge.verifiers.languages.go.suspicious import GO_READER
from trajforge.verifiers.languages.registry import grading_for

GO = shutil.which("go")


def test_the_registry_knows_go_and_its_gap():
    grading = grading_for("go")
    assert isinstance(grading, GoGrading) and grading.separator == "::"
    assert grading.grading_gap("go", "go test ./...") == ""
    assert "not graded" in grading.grading_gap("ginkgo", "ginkgo ./...")
    assert grading.test_file("internal/calc::TestAdd/neg") == "internal/calc"


@pytest.mark.parametrize(
    ("path", "refused"),
    [("vendor/modules.txt", True), ("a/vendor/x/y.go", True), ("go.work", True),
     ("sub/go.work.sum", True), ("calc/calc.go", False), ("go.mod", False),
     ("vendored/x.go", False)],
)  # fmt: skip
def test_refused_by_name(path, refused):
    assert (policy.forbidden_file(path) is not None) == refused


def test_grading_paths_reset_tests_testdata_and_module_files():
    for path in ("calc/calc_test.go", "calc/testdata/in.txt", "go.mod", "sub/go.sum"):
        assert policy.is_grading_path(path)
    for path in ("calc/calc.go", "testdata.go", "calc/test.go"):
        assert not policy.is_grading_path(path)


def _tree(builder: RepoBuilder, commit: str) -> TaskTree:
    return TaskTree(str(builder.path), builder.git("rev-parse", f"{commit}^{{tree}}"), {})


def test_a_new_test_file_is_refused_not_set_aside(tmp_path):
    repo = RepoBuilder(tmp_path / "r")
    base = repo.commit("calc", FILES)
    changed = repo.commit("forge", {"calc/main_test.go": "package calc\n"})
    clean, after = _tree(repo, base), _tree(repo, changed)
    grading = GoGrading()
    is_grading = grading.grading_paths(clean)
    assert is_grading("calc/calc_test.go") and not is_grading("calc/main_test.go")
    why = policy.refused_changes(clean, after, ["calc/main_test.go"], {"calc/main_test.go"})
    assert why == ["calc/main_test.go: a new Go test file (compiled into the test binary)"]


def test_linkname_embed_and_a_replace_into_an_added_folder_are_refused(tmp_path):
    repo = RepoBuilder(tmp_path / "r")
    base = repo.commit("calc", {**FILES, "calc/old.go": "package calc\n//go:linkname a b\n"})
    changed = repo.commit("forge", {
        "calc/forge.go": LINKNAME, "calc/old.go": "package calc\n//go:linkname a b\n// x\n",
        "calc/embed.go": "package calc\n\nimport _ \"embed\"\n\n//go:embed *\nvar s string\n",
        "go.mod": FILES["go.mod"] + "replace example.com/x => ./x\n", "x/x.go": "package x\n",
    })  # fmt: skip
    kept = ["calc/embed.go", "calc/forge.go", "calc/old.go", "x/x.go"]
    why = policy.refused_changes(_tree(repo, base), _tree(repo, changed), kept, set())
    assert why == [
        "calc/embed.go: adds a //go:embed directive",
        "calc/forge.go: adds a //go:linkname directive",
        "go.mod: replaces a module with ./x, a folder the patch adds",
    ]  # the project's own linkname (old.go) is not the patch's


def test_replaced_folders_reads_lines_and_blocks():
    text = (
        "module m\n\nreplace a => ./a\nreplace (\n\tb v1.0.0 => ../b\n"
        '\tc => c.com/c v1.2.0\n)\nreplace d => "./d"\n'
    )
    assert sorted(policy.replaced_folders(text)) == ["../b", "./a", "./d"]


@pytest.fixture(scope="module")
def go_cache(tmp_path_factory) -> Path:
    """One build cache for the module's go runs (the standard library compiled once)."""
    return tmp_path_factory.mktemp("gocache")


def _run_go(module: Path, package: str, pattern: str, cache: Path) -> dict[str, str]:
    done = subprocess.run(
        [GO, "test", "-json", "-count=1", f"-run={pattern}", f"./{package}"], cwd=module,
        capture_output=True, text=True, check=False,
        env={"PATH": "/usr/local/go/bin:/usr/bin:/bin", "HOME": str(module), "GOFLAGS": "-mod=mod",
             "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOCACHE": str(cache)},
    )  # fmt: skip
    out = {}
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event.get("Test") and event["Action"] in ("pass", "fail", "skip"):
            out[f"{package}::{event['Test']}"] = {"pass": PASS, "fail": FAIL}.get(
                event["Action"], "SKIPPED"
            )
    return out


@pytest.mark.usefixtures("host_go")
@pytest.mark.parametrize("source", [BUGGY, GOLD])
def test_sentinels_and_twins_compile_and_go_as_drawn(tmp_path, go_cache, source):
    """Built and run by go itself: each plain sentinel as it was drawn, each twin as its
    original (TestAdd fails at the bug and passes at the fix; its twin with it)."""
    module = tmp_path / "m"
    for path, text in {**FILES, "calc/calc.go": source}.items():
        (module / path).parent.mkdir(parents=True, exist_ok=True)
        (module / path).write_text(text)
    for _ in range(3):  # fresh draws: names, bodies, outcomes
        tests = {"calc": {"calc/calc_test.go": CALC_TESTS.encode()}}
        planted, drawn = sentinels.draw(tests, ("calc::TestAdd",))
        for path, data in planted["calc"].items():
            (module / path).write_bytes(data)
        names = sorted({s.test_id.split("::")[1].split("/")[0] for s in drawn} | {"TestAdd"})
        got = _run_go(module, "calc", "^(" + "|".join(names) + ")$", go_cache)
        twins = [s for s in drawn if s.expected.startswith(SAME)]
        assert len(twins) == 1 and {PASS, FAIL} <= {s.expected for s in drawn}
        verdict = rules.verdict(got, (), True, 1, False, ("calc::TestAdd",),
                                [(s.test_id, s.expected) for s in drawn])  # fmt: skip
        assert verdict[2], (got, drawn)  # trusted: no sentinel bent
        assert got[twins[0].test_id] == got["calc::TestAdd"]
        (module / "calc/calc_test.go").write_text(CALC_TESTS)
        for path in planted["calc"]:
            if path != "calc/calc_test.go":
                (module / path).unlink()


def test_every_graded_package_gets_a_sentinel_to_pass_and_one_to_fail():
    tests = {"calc": {"calc/calc_test.go": CALC_TESTS.encode()},
             "words": {"words/words_test.go": b"package words_test\n"}}  # fmt: skip
    for _ in range(20):
        planted, drawn = sentinels.draw(tests, ())
        assert sorted(planted) == ["calc", "words"]
        for folder in planted:
            said = {s.expected for s in drawn if s.test_id.startswith(folder + "::")}
            assert said == {PASS, FAIL}
            assert all(n.startswith(f"{folder}/zz_trajforge_") for n in planted[folder])


def test_examples_and_fuzz_targets_are_declared_names():
    source = "package calc\n\nfunc ExampleAdd() {}\n\nfunc FuzzAdd(f *testing.F) {}\n" + CALC_TESTS
    assert sentinels.reported_names(source) == {"ExampleAdd", "FuzzAdd", "TestAdd", "TestMul"}


def test_a_test_reading_its_own_name_is_not_twinned():
    named = CALC_TESTS.replace('t.Fatalf("Add', 't.Fatalf(t.Name()+"Add')
    _, drawn = sentinels.draw({"calc": {"calc/calc_test.go": named.encode()}}, ("calc::TestAdd",))
    assert not [s for s in drawn if s.expected.startswith(SAME)]


def _events(package: str, results: dict[str, str], last: str = "") -> str:
    lines = []
    for test, action in results.items():
        lines.append({"Action": "run", "Package": package, "Test": test})
        lines.append({"Action": action, "Package": package, "Test": test})
    if last:
        lines.append({"Action": last, "Package": package})
    return "\n".join(json.dumps(x) for x in lines) + "\n"


def _package(code: int, output: str, results: dict[str, str], **extra) -> dict:
    events = _events("example.com/calc/calc", results, "pass" if code == 0 else "fail")
    return {"dir": "calc", "built": True, "exit_code": code, "output": output,
            "ended": output.rstrip("\n").rsplit("\n", 1)[-1] in ("PASS", "FAIL"),
            "events": extra.get("events", events)}  # fmt: skip


MODULES = {"example.com/calc": "."}
KNOWN = {"TestAdd", "TestMul"}


@pytest.mark.parametrize(
    ("package", "problem"),
    [
        (_package(0, "--- FAIL: TestAdd\nPASS\n", {"TestAdd": "fail"}), "exited 0 over a failed"),
        (_package(0, "--- PASS: TestAdd\n", {"TestAdd": "pass"}), "before testing printed"),
        (_package(1, "--- PASS: TestAdd\nPASS\n", {"TestAdd": "pass"}), "right after testing"),
        (_package(0, "PASS\nok  \texample.com/calc/calc\t0.1s\n", {"TestAdd": "pass"}),
         "package line itself"),
        (_package(0, "PASS\n", {"TestAdd": "pass"},
                  events=_events("example.com/calc/calc", {"TestAdd": "pass"})
                  + _events("example.com/calc/calc", {"TestAdd": "pass"})), "2 results for"),
        (_package(0, "PASS\n", {"TestAdd": "pass", "TestInvented": "pass"}), "no test file"),
    ],
)  # fmt: skip
def test_stream_problems(package, problem):
    from trajforge.verifiers.languages.go import test_events

    statuses = test_events.parse_test_events(package["events"], MODULES).statuses
    found = list(stream_problems(package, statuses, KNOWN))
    assert any(problem in p for p in found), found


def test_an_honest_failing_package_has_no_problem_and_reads_as_failed():
    package = _package(1, "--- FAIL: TestAdd\nFAIL\n", {"TestAdd": "fail", "TestMul": "pass"})
    said = {"exit_code": 1, "timed_out": False, "leftovers": False, "packages": [package]}
    run = supervised_run(said, MODULES, {"calc": KNOWN}, ())
    assert run.evidence.tampering == ()
    assert run.evidence.statuses == {"calc::TestAdd": "FAILED", "calc::TestMul": "PASSED"}
    verdict = rules.verdict(run.evidence.statuses, (), True, 1, False, ("calc::TestAdd",), [])
    assert verdict == (False, "tests_failed", True)


def test_a_package_that_did_not_build_is_a_collection_error():
    said = {"exit_code": 1, "timed_out": False, "leftovers": False,
            "packages": [{"dir": "calc", "built": False}]}  # fmt: skip
    assert supervised_run(said, MODULES, {}, ()).evidence.collection_errors == ("calc",)


@pytest.mark.parametrize("forger", [ARGS_FORGER, STDOUT_FORGER, CALLER_FORGER, LINKNAME])
def test_the_reader_flags_the_forgers(forger):
    lines = set(range(1, forger.count("\n") + 2))
    assert suspicious_reason(GO_READER, {"calc/forge.go": forger.encode()},
                             {"calc/forge.go": lines})  # fmt: skip


def test_the_reader_passes_the_honest_fix():
    lines = set(range(1, GOLD.count("\n") + 2))
    reason = suspicious_reason(GO_READER, {"calc/calc.go": GOLD.encode()}, {"calc/calc.go": lines})
    assert reason == ""


def test_packages_of_names_each_package_by_its_module_and_anchors_its_names(tmp_path):
    """The root package, a package of the root module and one of a nested module: each its
    module's folder, import path and anchored top-level names (a subtest's parent, the
    sentinels' names beside the graded ones)."""
    from trajforge.verifiers.grader.sentinels import Sentinel
    from trajforge.verifiers.languages.go.runs import packages_of

    repo = RepoBuilder(tmp_path / "r")
    commit = repo.commit("mods", {
        "go.mod": "module example.com/top\n", "top_test.go": "package top\n",
        "calc/calc_test.go": "package calc\n", "tools/go.mod": "module example.com/tools\n",
        "tools/lint/lint_test.go": "package lint\n",
    })  # fmt: skip
    graded = (".::TestRoot", "calc::TestAdd/neg", "calc::TestAdd/pos", "tools/lint::TestLint")
    planted = (Sentinel("calc::TestAddValue", PASS, ""),)
    packages, modules = packages_of(_tree(repo, commit), graded, True, planted, {})
    assert modules == {"example.com/top": ".", "example.com/tools": "tools"}
    said = {p.dir: (p.module, p.import_path, p.run) for p in packages}
    assert said == {
        ".": (".", "example.com/top", "^(TestRoot)$"),
        "calc": (".", "example.com/top/calc", "^(TestAdd|TestAddValue)$"),
        "tools/lint": ("tools", "example.com/tools/lint", "^(TestLint)$"),
    }
    everything, _ = packages_of(_tree(repo, commit), graded, False, planted, {})
    assert {p.run for p in everything} == {""}  # too many to name: every test of the package


@pytest.mark.parametrize("graded", ["../../etc::TestX", "/etc::TestX", "calc/../..::TestX"])
def test_a_row_whose_id_folder_leaves_the_repository_is_refused_before_anything_runs(graded):
    # root plants sentinels into and builds in each graded id's folder: a hostile row's
    # `../../etc::TestX` is refused before the tree is read or a container started
    from trajforge.verifiers.grader.supervised import UnsupportedTestCommand

    with pytest.raises(UnsupportedTestCommand, match="leaves the repository"):
        GoGrading().graded_run(None, None, None, (graded,), 10)  # type: ignore[arg-type]
