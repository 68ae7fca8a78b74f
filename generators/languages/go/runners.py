"""Go's test command: ``go test -json`` in each module's folder, one report for them all.

The command is ``sh -c '<script>' go-test [package dir...]``: with no arguments every module
runs ``./...``; with arguments (repository-relative package folders, what ``selected_packages``
makes of a selection of test ids) each module runs the given packages that lie in it (the
deepest module holding a folder owns it, as the go command decides). Each module appends its
``go test -json`` events to ``REPORT_PATH``; the exit status is the last failing module's (1:
tests failed; 2: a package did not build, or the go command refused its arguments -- the
report, not the status, tells them apart: ``verifiers/validation/rule.py``).
``-count=1`` (no cached results: a run is a run), ``-p 2`` (the machines' cores), ``-vet=off``
(the grader builds its test binaries with ``go test -c -vet=off``: a task's lists are what the
grader sees, and a vet finding is no test's result; with vet, Go 1.19's ``stringintconv`` kept a
whole grpc-go package from building at base and its rows from validating),
and the per-test limit as ``verifiers/languages/go/time_limits.py`` sets it for validate and
the grader alike: ``go test`` under its watcher (a test that runs past the limit has its binary
killed and reads FAILED, the package's finished tests keep theirs), ``-timeout 0`` (the run's
own limit bounds a binary: a package that is merely long is graded, not FAILED).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.go.detection import (
    PRE_MODULE,
    Module,
    modules,
)
from trajforge.verifiers.languages.go.runs import PRE_MODULE_FILES
from trajforge.verifiers.languages.go.test_events import package_dir
from trajforge.verifiers.languages.go.time_limits import binary_flag, watcher_setup

REPORT_PATH = "/tmp/trajforge-go-test.json"
PARALLEL = 2  # ``go test -p``: packages built and run at once


def test_command(
    detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
) -> str:
    """The full-suite command with the selection's package folders appended (the caller limits
    the statuses to the ids it selected: a package runs whole)."""
    folders = sorted({package_dir(test_id) for test_id in selection})
    return " ".join([suite_command(detection, per_test_timeout_s), *map(shlex.quote, folders)])


def suite_command(detection: Detection, per_test_timeout_s: int = 0) -> str:
    """The full-suite command (package folders appended as arguments run only those)."""
    pre_module = detection.package_manager == PRE_MODULE
    return module_command(modules(detection), per_test_timeout_s, pre_module=pre_module)


def module_command(
    found: Sequence[Module], per_test_timeout_s: int = 0, *, pre_module: bool = False
) -> str:
    """The command over ``found``'s modules (see the module doc). ``pre_module``: a tree with
    no go.mod gets the one the build made for the run, removed after it, so no diff or
    status of the tree ever holds it (a tree that has its own go.mod by then keeps it)."""
    per_test = int(per_test_timeout_s)
    go_test = f"go test -json -count=1 -p {PARALLEL} -vet=off{binary_flag(per_test)}"
    ordered = sorted(enumerate(found), key=lambda item: -_depth(item[1].folder))
    cases = []
    for index, module in ordered:  # the deepest module first: it owns its folders
        if module.folder == ".":
            cases += [f'.) a{index}="$a{index} .";;', f'*) a{index}="$a{index} ./$p";;']
        else:
            cases += [
                f'{module.folder}) a{index}="$a{index} .";;',
                f'{module.folder}/*) a{index}="$a{index} ./${{p#{module.folder}/}}";;',
            ]
    every = "; ".join(f"run {m.folder} ./..." for m in found)
    some = "; ".join(f'[ -z "$a{i}" ] || run {m.folder} $a{i}' for i, m in enumerate(found))
    made = (
        f"m=; [ -e go.mod ] || {{ cp {PRE_MODULE_FILES}/go.mod {PRE_MODULE_FILES}/go.sum . "
        "&& m=1; }; "
        if pre_module
        else ""
    )
    unmade = '[ -z "$m" ] || rm -f go.mod go.sum; ' if pre_module else ""
    script = (
        f"set -f; r={REPORT_PATH}; : > $r; s=0; {watcher_setup(per_test)}{made}"
        f'run() {{ d=$1; shift; (cd "$d" && $W {go_test} "$@") >> $r || s=$?; }}; '
        f'for p in "$@"; do case "$p" in {" ".join(cases)} esac; done; '
        f"if [ $# -eq 0 ]; then {every}; else {some}; fi; {unmade}exit $s"
    )
    return f"sh -c {shlex.quote(script)} go-test"


def _depth(folder: str) -> int:
    return 0 if folder == "." else folder.count("/") + 1
