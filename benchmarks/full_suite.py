"""The baseline validator: SWE-smith's protocol, the clean suite once, then each mutant on its own
with the full suite in a fresh container.

Kept beside the benchmarks that compare with it (``inject.py``) and the test that checks the
coverage-guided validator keeps the same set; the product never runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.languages.python.mutants import clean_workspace, mutant_context
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.test_runner import run_tests
from trajforge.verifiers.validation.candidate import TestTree, ValidationResult, build_task
from trajforge.verifiers.validation.mutants import TIMEOUT_EXIT_CODES, Mutation, reject_mutation
from trajforge.verifiers.validation.rule import judge


def validate_mutations_full_suite(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    junit_path: str,
    clean_run: TestRun | None = None,
) -> tuple[list[ValidationResult], TestRun]:
    """SWE-smith's protocol: the clean suite once per snapshot (``clean_run``, run here when not
    given), then for every mutant one full run on the buggy code, each in a fresh container.

    SWE-smith keeps a bug when a test fails with it and passed on the clean code; this does the
    same through the rule (``judge``), one run per state, no reruns. Returns the results and the
    clean run, so workers can share it.
    """
    if clean_run is None:
        ctx = mutant_context(profile, mutations[0], junit_path, params.test_timeout_s)
        with clean_workspace(sandbox, profile, clean) as workspace:
            clean_run = run_tests(workspace.session, ctx, "gold", attempt=0)
    # the same hang policy as trajforge: a few times the clean suite
    limit = min(params.test_timeout_s, 20 + 3 * clean_run.duration_s)
    results = []
    for mutation in mutations:
        ctx = mutant_context(profile, mutation, junit_path, limit)
        with clean_workspace(sandbox, profile, clean) as workspace:
            workspace.write(mutation.mutated)
            buggy = run_tests(workspace.session, ctx, "base", attempt=0)
        runs = (buggy,)
        if buggy.exit_code in TIMEOUT_EXIT_CODES:
            results.append(
                reject_mutation(mutation, "mutant_timeout", "the tests hang on the bug", runs)
            )
            continue
        verdict = judge([buggy], [clean_run])
        if verdict.kept:
            task = build_task(mutation.candidate, profile, verdict, [buggy], [clean_run], "full")
            results.append(ValidationResult(task, None, runs))
        else:
            results.append(reject_mutation(mutation, verdict.reason, verdict.detail, runs))
    return results, clean_run
