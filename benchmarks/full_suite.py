"""The baseline validator: SWE-smith's protocol, each mutant on its own with the full suite.

Kept beside the benchmarks that compare with it (``inject.py``) and the test that checks the
coverage-guided validator keeps the same set; the product never runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.test_runner import run_tests
from trajforge.verifiers.validation.candidate import TestTree, ValidationResult, build_task
from trajforge.verifiers.validation.mutants import (
    TIMEOUT_EXIT_CODES,
    Mutation,
    clean_workspace,
    mutant_context,
    reject_mutation,
)
from trajforge.verifiers.validation.rule import judge


def validate_mutations_full_suite(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    junit_path: str,
) -> list[ValidationResult]:
    """The baseline: for every mutant, the full suite on clean and on buggy code, fresh containers.

    This is how SWE-smith validates a mutant. It finds the same kept set (tests that never execute
    a changed line cannot change outcome) at roughly twice a full suite per mutant.
    """
    results = []
    for mutation in mutations:
        ctx = mutant_context(profile, mutation, junit_path, params.test_timeout_s)
        with clean_workspace(sandbox, profile, clean) as workspace:
            clean_run = run_tests(workspace.session, ctx, "gold", attempt=0)
        # the same hang policy as the guided path: a few times the clean suite
        limit = min(params.test_timeout_s, 20 + 3 * clean_run.duration_s)
        ctx = mutant_context(profile, mutation, junit_path, limit)
        with clean_workspace(sandbox, profile, clean) as workspace:
            workspace.write(mutation.mutated)
            buggy = run_tests(workspace.session, ctx, "base", attempt=0)
        runs = (buggy, clean_run)
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
    return results
