"""TaskInstance: a proven task. Field names follow SWE-bench so its harness can read ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

VALIDATION_TYPE = pa.struct(
    [
        ("base_exit_code", pa.int32()),
        ("gold_exit_code", pa.int32()),
        ("base_log_digest", pa.string()),
        ("gold_log_digest", pa.string()),
        ("reruns", pa.int32()),
        ("test_runs", pa.int32()),
    ]
)


# The language of a task, profile or run that names none (everything written before the language
# layer); both registries' DEFAULT is the language of this name.
DEFAULT_LANGUAGE = "python"


@dataclass(frozen=True)
class Validation:
    base_exit_code: int
    gold_exit_code: int
    base_log_digest: str
    gold_log_digest: str
    reruns: int
    test_runs: int  # how many test-command executions proved this task


@dataclass(frozen=True)
class TaskInstance:
    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    hints_text: str
    created_at: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    environment_setup_commit: str
    image_name: str
    test_cmd: str
    origin: str
    profile_id: str
    candidate_id: str
    source: str
    flaky_tests: tuple[str, ...]
    difficulty: float | None
    scores: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)
    validation: Validation | None = None
    bug_patch: str = ""  # bug/* tasks start at base_commit + bug_patch (SWE-smith's bug branch)
    image_digest: str = ""  # the environment by content: registry digest, else the image id
    env_recipe: str = ""  # the environment's Dockerfile: anyone can rebuild image_name from it
    # test modules that cannot be collected in this environment ("path: error"); test_cmd
    # leaves them out with --ignore, and no label rests on them
    excluded_tests: tuple[str, ...] = ()
    # The task's language and the runner whose report its test_cmd writes; the grader reads
    # the statuses through that runner's parser (generators/languages/, verifiers/reports/).
    language: str = DEFAULT_LANGUAGE  # a language's name (languages/registry.py)
    test_runner: str = "pytest"  # pytest | jest | vitest | mocha | node | ava | tap
    # The gold patch graded by the grader RL uses, resolved/total ("1/1"; validate.gold_runs);
    # "" where it was not (a row from before the column, validate's local backend)
    gold_runs: str = ""

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("instance_id", pa.string()),
            ("repo", pa.string()),
            ("base_commit", pa.string()),
            ("patch", pa.large_string()),
            ("test_patch", pa.large_string()),
            ("problem_statement", pa.large_string()),
            ("hints_text", pa.large_string()),
            ("created_at", pa.string()),
            ("FAIL_TO_PASS", pa.list_(pa.string())),
            ("PASS_TO_PASS", pa.list_(pa.string())),
            ("environment_setup_commit", pa.string()),
            ("image_name", pa.string()),
            ("test_cmd", pa.string()),
            ("origin", pa.string()),
            ("profile_id", pa.string()),
            ("candidate_id", pa.string()),
            ("source", pa.string()),
            ("flaky_tests", pa.list_(pa.string())),
            ("difficulty", pa.float64()),
            ("scores", pa.map_(pa.string(), pa.float64())),
            ("provenance", pa.map_(pa.string(), pa.string())),
            ("validation", VALIDATION_TYPE),
            ("bug_patch", pa.large_string()),
            ("image_digest", pa.string()),
            ("env_recipe", pa.large_string()),
            ("excluded_tests", pa.list_(pa.string())),
            ("language", pa.string()),
            ("test_runner", pa.string()),
            ("gold_runs", pa.string()),
        ]
    )
