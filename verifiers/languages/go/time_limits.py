"""Go's time limits: one policy for validate's run and the grader's, so a test's verdict does
not depend on which of the two ran it.

Go has no per-test limit: ``go test -timeout D`` bounds a package's whole test binary. Used as
the per-test limit (60 s) it FAILED every test of a package that is merely long (grpc-go's
``test`` package: hundreds of tests, none slow), which then never entered a task's lists; the
grader meanwhile gave each binary the run's remaining time, so the two runs disagreed.

The policy: **a test is limited, a binary is bounded by its run.**

- *Per test* (``in_container/go_watch.py``'s ``Clock``, the same code in both runs): a test
  that runs for ``per-test`` seconds with no progress of its own (not paused by
  ``t.Parallel``, no subtest running, none started or ended) has its test binary killed; it
  reads FAILED (it started and never ended), the package's finished tests keep their
  statuses, its later tests do not run. Validate's command runs ``go test -json`` under the
  watcher program; the grader's program feeds the binary's ``-test.v`` lines to a clock.
- *Per binary*: the run's budget. Validate gives ``-timeout 0`` (its command runs under the
  run's own limit, ``validate.test_timeout_s``); the grader gives ``-test.timeout`` the run's
  remaining time. A hang outside any test (``init``, ``TestMain``) costs the run's budget.

Chosen over scaling ``-timeout`` with the package's number of tests: the grader runs a
selection of a package's tests, validate all of them, so a scaled limit differs between the
two for the same test, a slow test passes when its package is large, and the count needs
``go test -list`` (a build and a run of ``TestMain``) or the clean run's events first.

The limit a task's lists were made under is in its ``test_cmd`` (``go_watch.py <seconds>``);
the grader reads it from there (``per_test_s``).
"""

from __future__ import annotations

import re
import shlex

from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.grader.supervised import program

HERE = "trajforge.verifiers.languages.go.in_container"
WATCH = "go_watch.py"
WATCH_PATH = "/tmp/trajforge-go-watch.py"  # where validate's command writes the watcher
_IN_COMMAND = re.compile(r"go-watch\.py (\d+)\b")


def watcher_setup(per_test_s: int) -> str:
    """Shell that writes the watcher and sets ``$W`` to its command: a ``go test -json`` line
    run as ``$W go test ...`` is watched. ``$W`` is empty (go test alone) when the limit is 0
    or the image has no python3."""
    if per_test_s <= 0:
        return "W=; "
    source = shlex.quote(_compact(program(HERE, WATCH).decode()))
    return (
        f"W=; if command -v python3 > /dev/null; then printf %s {source} > {WATCH_PATH} && "
        f"W='python3 -I {WATCH_PATH} {int(per_test_s)}'; fi; "
    )


def binary_flag(per_test_s: int) -> str:
    """validate's ``-timeout``: none of the binary's own when the watcher limits each test
    (the run's limit bounds it), Go's default otherwise."""
    return " -timeout 0" if per_test_s > 0 else ""


def per_test_s(test_cmd: str, run_timeout_s: float) -> int:
    """The per-test limit a task's lists were made under (its ``test_cmd``), else validate's
    default; never more than the run's own time."""
    found = _IN_COMMAND.search(test_cmd or "")
    limit = int(found.group(1)) if found else ValidateParams.per_test_timeout_s
    return max(1, min(limit, int(run_timeout_s)))


def _compact(source: str) -> str:
    """The watcher as a command carries it: no module docstring, comment or blank line."""
    body = source.split('"""', 2)[2] if source.startswith('"""') else source
    lines = (
        line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )
    return "\n".join(lines) + "\n"
