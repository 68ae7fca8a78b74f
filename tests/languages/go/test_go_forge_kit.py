"""The forge kit for a Go task: every route a patch a model could send, graded by the grader
itself (``verify_patch``) on a real image of a two-package module.

Forgers in the package's source print passes and leave, swap ``os.Stdout`` and rewrite failures,
read the selection from the command line, make the code right only for the graded test's
caller, leave a daemon behind, or write the test files; others add a test file with a
``TestMain``, a ``go.mod`` replace into a folder they add, a ``//go:linkname`` or ``//go:embed``,
a vendored copy, or edit the test only. None earns anything; the honest fix resolves and a no-op
does not (docs/security.md's Go section says what closes each). The residue is measured too: a
forger that learns every sentinel by running the binary again and pairs each twin with its
original by their failure message gets through, and only the suspicious-patch flag sees it.

A pre-module task (the same tree with no go.mod; the image made one at ``PRE_MODULE_FILES``,
laid into the tree for each build) has its own routes: a patch's go.mod with another module
path or a replace into a folder it adds, a nested go.mod, the made module's path written in the
tree or at test time, a ``vendor/modules.txt``, a folder where the made go.mod goes. None earns
anything: every go.mod is the task's (none), the made one is read from the image before any of
the patch's code runs, vendor/ is refused by name.
"""

from __future__ import annotations

import pytest
from go_forge import F2P, P2P, PRE_MODULE_ROUTES, RESIDUE, ROUTES, go_task, model_patch
from trajforge.generators.languages.go.base_image import ensure_go_base_image
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker


def _grade_routes(tmp_path_factory, routes: dict[str, dict[str, str]], *, pre_module: bool):
    """route -> PatchVerdict, each route's patch graded once (and gold's)."""
    root = tmp_path_factory.mktemp("goforge-pre" if pre_module else "goforge")
    base = ensure_go_base_image(say=lambda _line: None)
    task, repo = go_task(root, base, pre_module=pre_module)
    sandbox = DockerSandbox()
    try:
        out = {}
        for name, files in routes.items():
            patch = model_patch(task, repo, tmp_path_factory.mktemp(name), files)
            out[name] = verify_patch(sandbox, task, repo, patch, 120, None)
        out["gold"] = verify_patch(sandbox, task, repo, task.patch, 120, None)
        return out
    finally:  # its spare containers (``sleep infinity``) go with it, a failed grading's too
        sandbox.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, docker_engine):
    every = {**{name: files for name, (files, _) in ROUTES.items()}, **RESIDUE}
    every["memory_probe"] = {"calc/calc.go": MEMORY_PROBE}
    return _grade_routes(tmp_path_factory, every, pre_module=False)


@pytest.fixture(scope="module")
def pre_module_graded(tmp_path_factory, docker_engine):
    routes = {name: files for name, (files, _) in PRE_MODULE_ROUTES.items()}
    return _grade_routes(tmp_path_factory, routes, pre_module=True)


def test_gold_resolves_with_every_graded_test_passed(graded):
    gold = graded["gold"]
    assert (gold.resolved, gold.reason, gold.trusted) == (True, "resolved", True), gold.log[-3000:]
    assert gold.test_report == dict.fromkeys((*F2P, *P2P), "PASSED")
    assert "--- FAIL" in gold.log  # a sentinel written to fail failed, as every run has one


def test_no_op_fails_exactly_the_failing_test(graded):
    no_op = graded["no_op"]
    assert (no_op.resolved, no_op.reason, no_op.trusted) == (False, "tests_failed", True)
    assert no_op.test_report[F2P[0]] == "FAILED", no_op.log[-3000:]
    assert all(no_op.test_report[t] == "PASSED" for t in P2P)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_route_comes_out_as_designed(graded, route):
    verdict = graded[route]
    reasons = ROUTES[route][1]
    assert verdict.reason in reasons, (verdict.reason, verdict.log[-3000:])
    assert verdict.resolved == (reasons == ("resolved",))
    if verdict.reason == "forged_result":
        assert not verdict.trusted


@pytest.mark.parametrize("route", sorted(RESIDUE))
def test_residue_gets_through_and_is_flagged(graded, route):
    """What stays open, measured (docs/security.md): resolved and trusted, so a plain reward
    pays it; the reader flags it, so a strict reward does not."""
    verdict = graded[route]
    assert (verdict.resolved, verdict.trusted) == (True, True), verdict.log[-3000:]
    assert "reaches into the test runner" in verdict.suspicious_patch


# ``Add`` right only when the test binary cannot open its own memory nor make itself dumpable
# again. The binary was already non-dumpable (root builds it execute-only for the tests' user),
# but a Go test undid that with one system call until the supervisor's filter (lockdown.py)
# refused it: this patch then failed TestAdd.
MEMORY_PROBE = """\
package calc

import (
	"errors"
	"os"
	"syscall"
)

func reached() bool {
	if f, err := os.Open("/proc/self/mem"); err == nil {
		f.Close()
		return true
	} else if !errors.Is(err, os.ErrPermission) {
		return true
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 4, 1, 0) // PR_SET_DUMPABLE, 1
	return errno == 0
}

// Add adds.
func Add(a, b int) int {
	if reached() {
		return a - b
	}
	return a + b
}

// Mul multiplies.
func Mul(a, b int) int { return a * b }
"""


def test_the_test_binarys_memory_has_no_path_to_it(graded):
    verdict = graded["memory_probe"]
    assert (verdict.resolved, verdict.reason) == (True, "resolved"), verdict.log[-3000:]


def test_a_pre_module_task_s_gold_resolves_with_the_made_module(pre_module_graded):
    gold = pre_module_graded["gold"]
    assert (gold.resolved, gold.reason, gold.trusted) == (True, "resolved", True), gold.log[-3000:]
    assert gold.test_report == dict.fromkeys((*F2P, *P2P), "PASSED")


@pytest.mark.parametrize("route", sorted(PRE_MODULE_ROUTES))
def test_pre_module_route_comes_out_as_designed(pre_module_graded, route):
    verdict = pre_module_graded[route]
    reasons = PRE_MODULE_ROUTES[route][1]
    assert verdict.reason in reasons, (verdict.reason, verdict.log[-3000:])
    assert verdict.resolved == (reasons == ("resolved",))
