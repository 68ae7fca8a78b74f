"""A Go site's environment end to end in Docker: profiled at its commit, built once (Debian's Go,
std only: the build stage downloads nothing), run offline with exact ids, a selection run by
package, a package that does not compile leaving the suite not run; a go 1.18 module with files
for a newer Go gets that Go; a pre-module tree builds with a go.mod its build makes, and its
tasks are graded with that go.mod."""

from __future__ import annotations

import pytest
from go_calc import CALC, CLEAN, GO_MOD, calc_repo
from repo_factory import RepoBuilder
from trajforge.generators.languages.go.profile import build_go_profile, go_profile, go_reading
from trajforge.generators.languages.registry import language_named
from trajforge.schemas.params import Params
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive, git
from trajforge.verifiers.test_runner import run_tests

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def built(tmp_path_factory, docker_engine):
    repo, commit = calc_repo(tmp_path_factory.mktemp("go"))
    params = Params()
    box = DockerSandbox()
    profile = go_profile(str(repo.path), commit, "calc", "file:///calc", params)
    prepared = build_go_profile(box, profile, str(repo.path), commit, params, say=print)
    assert prepared.reason == "", prepared.detail
    yield box, repo, commit, prepared.profile
    box.close()  # its spare container holds the image (close is safe to call twice)
    box.remove_image(prepared.profile.image)


def run(box, repo, tree, profile, selection=()):
    ctx = go_reading(profile).context("calc", profile.profile_id, profile.test_cmd, 240)
    with box.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(archive(str(repo.path), tree, prefix="repo/"))
        return run_tests(session, ctx, "base", 0, tuple(selection))


def test_the_profile_names_go_and_debian_s_go(built):
    _, _, commit, profile = built
    assert (profile.language, profile.runner, profile.runtime) == ("go", "go", "1.19")
    assert (profile.status, profile.setup_commit) == ("built", commit)
    assert "go test -json -count=1" in profile.test_cmd
    assert "# go modules: example.com/calc=." in profile.recipe


def test_the_clean_run_passes_offline_with_exact_ids(built):
    box, repo, commit, profile = built
    clean = run(box, repo, commit, profile)
    assert clean.statuses() == CLEAN
    assert clean.suite_ran and clean.exit_code == 0, clean.log[-2000:]


def test_a_selection_runs_its_packages_and_reports_only_its_ids(built):
    box, repo, commit, profile = built
    chosen = run(box, repo, commit, profile, ["internal/text::TestShout"])
    assert chosen.statuses() == {"internal/text::TestShout": "PASSED"}
    assert "./internal/text" in chosen.log or chosen.suite_ran


def test_a_bug_fails_its_tests_and_a_broken_package_leaves_the_suite_not_run(built):
    box, repo, _, profile = built
    bug = repo.commit("bug", {"calc.go": CALC.replace("return a - b", "return a - b - 1")})
    buggy = run(box, repo, bug, profile)
    assert buggy.statuses() == {**CLEAN, ".::TestSub": "FAILED"}
    assert buggy.exit_code == 1 and buggy.suite_ran
    broken = repo.commit("broken", {"internal/text/text.go": "package text\n\nfunc Shout(\n"})
    failed = run(box, repo, broken, profile)
    # go 1.19 says a package did not build on a plain line of the report ("FAIL\t<path> [build
    # failed]"), the compiler's error on stderr (the log), and exits 2: the suite did not run,
    # the packages that built still report their tests
    assert not failed.suite_ran and failed.exit_code == 2
    assert "# example.com/calc/internal/text" in failed.log
    assert failed.statuses().get(".::TestAdd/neg") == "PASSED"


MORE_TESTS = """\
package calc

import "testing"

func TestAbsZero(t *testing.T) {
\tif Abs(0) != 0 {
\t\tt.Fatal(Abs(0))
\t}
}
"""
USES_TEXT = """\
package calc

import "golang.org/x/text/language"

// English is the tag of English.
var English = language.English
"""

RANGE_OVER_INT = """\
package count

// Sum adds 0..n-1 with Go 1.22's range over an int (Debian's 1.19 cannot compile it).
func Sum(n int) (total int) {
\tfor i := range n {
\t\ttotal += i
\t}
\treturn total
}
"""
RANGE_TESTS = """\
package count

import "testing"

func TestSum(t *testing.T) {
\tif Sum(4) != 6 {
\t\tt.Fatal(Sum(4))
\t}
}
"""


def test_a_newer_go_line_fetches_its_toolchain_and_runs_offline(tmp_path, docker_engine):
    repo = RepoBuilder(tmp_path / "count")
    go_mod = "module example.com/count\n\ngo 1.22\n"
    files = {"go.mod": go_mod, "count.go": RANGE_OVER_INT, "count_test.go": RANGE_TESTS}
    commit = repo.commit("count", files)
    params = Params()
    box = DockerSandbox()
    try:
        profile = go_profile(str(repo.path), commit, "count", "file:///count", params)
        assert profile.runtime == "1.22.12" and "go 1.22.12 (fetched toolchain)" in profile.log
        prepared = build_go_profile(box, profile, str(repo.path), commit, params, say=print)
        assert prepared.reason == "", prepared.detail
        clean = run(box, repo, commit, prepared.profile)
        assert clean.statuses() == {".::TestSum": "PASSED"}, clean.log[-2000:]
    finally:
        box.close()
        box.remove_image(profile.image)


SUM = """\
package count

// Sum adds xs.
func Sum(xs []int) (total int) {
\tfor _, x := range xs {
\t\ttotal += x
\t}
\treturn total
}
"""
SUM_TESTS = """\
package count

import "testing"

func TestSum(t *testing.T) {
\tif Sum([]int{1, 2}) != 3 {
\t\tt.Fatal("sum")
\t}
}
"""
# What a go 1.18 library ships for newer Gos (samber/lo's shape): a file behind a go1.22
# constraint, on a std package Debian's 1.19 lacks, and its test behind the same constraint.
LARGEST = """\
//go:build go1.22

package count

import "slices"

// Largest is the largest of xs.
func Largest(xs []int) int { return slices.Max(xs) }
"""
LARGEST_TESTS = """\
//go:build go1.22

package count

import "testing"

func TestLargest(t *testing.T) {
\tif Largest([]int{3, 9, 4}) != 9 {
\t\tt.Fatal("max")
\t}
}
"""


def test_an_old_go_line_with_files_for_a_newer_go_gets_that_go_and_runs_them(
    tmp_path, docker_engine
):
    repo = RepoBuilder(tmp_path / "lo")
    files = {"go.mod": "module example.com/count\n\ngo 1.18\n", "count.go": SUM,
             "count_test.go": SUM_TESTS, "largest.go": LARGEST,
             "largest_test.go": LARGEST_TESTS}  # fmt: skip
    commit = repo.commit("count", files)
    params = Params()
    box = DockerSandbox()
    try:
        profile = go_profile(str(repo.path), commit, "lo", "file:///lo", params)
        assert profile.runtime == "1.22.12", profile.log  # the go1.22 constraint's, not 1.19
        again = go_profile(str(repo.path), commit, "lo", "file:///lo", params)
        assert (again.runtime, again.profile_id) == (profile.runtime, profile.profile_id)
        prepared = build_go_profile(box, profile, str(repo.path), commit, params, say=print)
        assert prepared.reason == "", prepared.detail
        clean = run(box, repo, commit, prepared.profile)
        # with Debian's Go TestLargest would not exist: its files are built only from go1.22
        assert clean.statuses() == {".::TestSum": "PASSED", ".::TestLargest": "PASSED"}, clean.log[
            -2000:
        ]
    finally:
        box.close()
        box.remove_image(profile.image)


GREET = """\
package greet // import "example.com/greet"

import "example.com/greet/internal/shout"

// Hello greets name loudly.
func Hello(name string) string { return shout.Loud("hello " + name) }
"""
SHOUT = """\
package shout

import "strings"

// Loud upper-cases s.
func Loud(s string) string { return strings.ToUpper(s) }
"""
GREET_TESTS = """\
package greet_test

import (
\t"testing"

\t"example.com/greet"
)

func TestHello(t *testing.T) {
\tif greet.Hello("go") != "HELLO GO" {
\t\tt.Fatal(greet.Hello("go"))
\t}
}
"""


def _grade_pre_module(box, repo: RepoBuilder, fixed: str, image: str) -> None:
    """The grader takes the go.mod from the image (the tree has none): gold resolves, a patch
    that fixes nothing does not, and a patch's own go.mod is reset, not built with."""
    broken = repo.commit(
        "shout whispers", {"internal/shout/shout.go": SHOUT.replace("Upper", "Lower")}
    )
    gold = git(str(repo.path), "diff", broken, fixed).decode()
    task = TaskInstance(
        instance_id="greet-go-1", repo="local/greet", base_commit=broken, patch=gold,
        test_patch="", problem_statement="Hello whispers", hints_text="",
        created_at="2024-01-01", FAIL_TO_PASS=(".::TestHello",), PASS_TO_PASS=(),
        environment_setup_commit=fixed, image_name=image, test_cmd="go test -json ./...",
        origin="mined", profile_id="greet", candidate_id="greet-go-1", source=str(repo.path),
        flaky_tests=(), difficulty=None, env_recipe="", language="go", test_runner="go",
    )  # fmt: skip
    resolved = verify_patch(box, task, str(repo.path), gold, 120, None)
    assert (resolved.resolved, resolved.trusted) == (True, True), resolved.log[-3000:]
    assert resolved.test_report[".::TestHello"] == "PASSED"
    remarked = repo.commit("a remark", {"greet.go": GREET + "\n// Hello is loud.\n"})
    no_op = git(str(repo.path), "diff", broken, remarked).decode()
    nothing = verify_patch(box, task, str(repo.path), no_op, 120, None)
    assert (nothing.resolved, nothing.reason) == (False, "tests_failed"), nothing.log[-3000:]
    own_module = gold + (
        "diff --git a/go.mod b/go.mod\nnew file mode 100644\n--- /dev/null\n+++ b/go.mod\n"
        "@@ -0,0 +1 @@\n+module example.com/other\n"
    )
    moved = verify_patch(box, task, str(repo.path), own_module, 120, None)
    assert moved.resolved and moved.test_report[".::TestHello"] == "PASSED", moved.log[-3000:]


def test_a_pre_module_tree_builds_with_a_made_go_mod_that_never_enters_the_tree(
    tmp_path, docker_engine
):
    repo = RepoBuilder(tmp_path / "greet")
    files = {"greet.go": GREET, "greet_test.go": GREET_TESTS, "internal/shout/shout.go": SHOUT}
    commit = repo.commit("greet, GOPATH era", files)
    params = Params()
    box = DockerSandbox()
    try:
        profile = go_profile(str(repo.path), commit, "greet", "file:///greet", params)
        assert (profile.runtime, profile.install_set) == ("1.19", "go-premodule"), profile.log
        assert "# go modules: example.com/greet=." in profile.recipe
        prepared = build_go_profile(box, profile, str(repo.path), commit, params, say=print)
        assert prepared.reason == "", prepared.detail
        ctx = go_reading(prepared.profile).context(
            "greet", profile.profile_id, prepared.profile.test_cmd, 240
        )
        with box.session(SessionSpec(image=prepared.profile.image)) as session:
            session.put_archive(archive(str(repo.path), commit, prefix="repo/"))
            clean = run_tests(session, ctx, "base", 0, ())
            left = session.exec("ls -a /repo", timeout_s=30).output.split()
        assert clean.statuses() == {".::TestHello": "PASSED"}, clean.log[-2000:]
        assert clean.suite_ran and clean.exit_code == 0
        assert "go.mod" not in left and "go.sum" not in left, (
            left
        )  # the environment's, not the tree's
        _grade_pre_module(box, repo, commit, prepared.profile.image)
    finally:
        box.close()
        box.remove_image(profile.image)


def test_another_commit_reuses_the_image_only_when_every_module_loads_offline(built, tmp_path):
    """``environment.reuse``'s probe for Go (``go/reuse_probe.py``), in the built image: a
    commit with the same modules and build list is served by it; one needing a module the cache
    lacks, or whose module moved to another path, is refused in one line."""
    box, _, _, donor = built
    repo, _ = calc_repo(tmp_path)  # the same commit as the image's (fixed dates)
    params = Params()
    go = language_named("go")

    def probe(commit):
        site = go_profile(str(repo.path), commit, "calc", "file:///calc", params)
        return go.probe_reuse(box, donor, site, str(repo.path), commit, params)

    more_tests = repo.commit("a test more", {"more_test.go": MORE_TESTS})
    probed, packages, why = probe(more_tests)
    assert why == "" and probed is not None
    assert (probed.image, probed.test_cmd) == (donor.image, donor.test_cmd)
    assert packages == 2  # the root package and internal/text: both have tests

    needs_text = repo.commit(
        "use x/text",
        {"go.mod": GO_MOD + "\nrequire golang.org/x/text v0.14.0\n", "lang.go": USES_TEXT},
    )
    probed, packages, why = probe(needs_text)
    assert probed is None and packages == 0
    assert why.startswith("the go command cannot load it offline: ") and "GOPROXY=off" in why
    assert "\n" not in why

    renamed = GO_MOD.replace("example.com/calc", "example.org/calc")
    moved = repo.commit("the module moves", {"go.mod": renamed, "lang.go": None})
    probed, _, why = probe(moved)
    assert probed is None and why == "its modules (paths and folders) are not the donor's"
