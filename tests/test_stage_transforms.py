"""Each stage's composite PTransform on its own, on Beam's TestPipeline with ``assert_that``.

Real inputs only: the calc repository the tests build, a real Docker engine for the stages that
run code, and a scripted model behind a real HTTP server for rollout. The runner is the in-process
FnApiRunner (the default runner would try to download Prism). describe, export and
import-trajectories are covered in test_stage_transforms_release.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to, is_empty
from curated_factory import PATCH, make_task, make_trajectory
from repo_factory import OPS_FIXED, TESTS_BASE, RepoBuilder, pyproject
from scripted_agents import GOOD_STATEMENT, fixer
from scripted_llm import ScriptedLLM
from trajforge.generators.bugs.injector import inject_snapshot
from trajforge.generators.mining.commits import mine_commit
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.stages.curate import Curate
from trajforge.pipelines.stages.environment import BuildEnvironments, Site
from trajforge.pipelines.stages.explore import ExploreRepos
from trajforge.pipelines.stages.inject import InjectBugs
from trajforge.pipelines.stages.mine import MineRepos
from trajforge.pipelines.stages.rollout import RolloutTasks
from trajforge.pipelines.stages.validate import ValidateCandidates
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.explore_task import ExploreTask, ReplayAction
from trajforge.schemas.params import CurateParams, Params
from trajforge.schemas.transition import Transition

F2P = ("tests/test_ops.py::test_add",)
P2P = ("tests/test_ops.py::test_mul",)


def beam_pipeline() -> BeamTestPipeline:
    """A TestPipeline on the in-process runner: it runs, and checks every assert_that, on exit."""
    return BeamTestPipeline(runner=FnApiRunner())


def reasons(expected: dict[str, str]) -> Callable[[list[Any]], None]:
    """Rejections matcher: exactly these inputs, once each, for these reasons, with a detail."""

    def check(rejections: list[Any]) -> None:
        got = {r.input: r.reason for r in rejections}
        assert got == expected, got
        assert len(rejections) == len(expected), rejections
        for r in rejections:
            assert r.detail, r

    return check


def make_params(cache_dir: Path, **sections: dict[str, Any]) -> Params:
    params = Params(cache_dir=str(cache_dir))
    params.validate.test_timeout_s = 20
    params.validate.gold_runs = 0  # the gold patch graded again: tests/test_gold_runs.py
    params.validate.workers = 1
    # the calc fixture's commits each build their own profile (bad_dep's install fails); reuse
    # of an image across profiles: tests/test_environment_reuse.py
    params.environment.reuse = False
    for section, values in sections.items():
        for key, value in values.items():
            setattr(getattr(params, section), key, value)
    return params.check()


# --- mine and inject: git only -----------------------------------------------------------------


def test_mine_repos_yields_candidates_and_rejections(calc_repo, tmp_path):
    path, shas = calc_repo
    missing = str(tmp_path / "missing")
    params = make_params(tmp_path / "cache")
    kept = ["fix_add", "import_error", "latin1", "flaky", "hang", "bad_install"]
    short = {name: f"local/calc@{shas[name][:12]}" for name in shas}

    def candidates_are_the_fix_commits(candidates: list[Candidate]) -> None:
        assert sorted(c.meta.commit for c in candidates) == sorted(shas[n] for n in kept)
        for c in candidates:
            assert c.repo == "local/calc" and c.origin == "commit" and c.source == str(path)
            assert c.patch and c.test_patch and "tests/" not in c.patch
        fix = next(c for c in candidates if c.meta.commit == shas["fix_add"])
        assert fix.base_commit == shas["initial"] and fix.meta.message == "Fix add: it subtracted"

    with beam_pipeline() as p:
        out = p | beam.Create([str(path), missing]) | MineRepos(params)
        assert_that(out["candidates"], candidates_are_the_fix_commits, label="candidates")
        assert_that(
            out["rejections"],
            reasons(
                {
                    short["initial"]: "root_commit",
                    short["tests_only"]: "no_source_change",
                    short["bad_dep"]: "no_test_change",
                    missing: "repo_missing",
                }
            ),
            label="rejections",
        )


def test_inject_bugs_samples_the_generators_mutants(calc_repo, tmp_path):
    path, shas = calc_repo
    params = make_params(
        tmp_path / "cache",
        # git only: no clean run of the suite on first contact (inject_coverage.py)
        inject={"max_candidates": 5, "seed": 4, "min_complexity": 1, "measure_coverage": False},
    )
    repo = open_source(str(path), SourceOptions(cache_dir=str(tmp_path / "direct")))
    expected = inject_snapshot(repo, params.inject, params.mine.skip_globs).candidates
    assert len(expected) == 5
    no_tests = RepoBuilder(tmp_path / "notests")
    no_tests.commit("init", {"lib.py": "def f(a, b):\n    return a + b\n"})

    def bugs_of_the_newest_commit(candidates: list[Candidate]) -> None:
        assert sorted(candidates, key=lambda c: c.candidate_id) == sorted(
            expected, key=lambda c: c.candidate_id
        )  # the seed alone decides the mutants, in a pipeline or not
        for c in candidates:
            assert c.origin.startswith("bug/") and c.base_commit == shas["bad_install"]
            assert c.bug_patch and c.patch and c.bug_patch != c.patch

    with beam_pipeline() as p:
        out = p | beam.Create([str(path), str(no_tests.path)]) | InjectBugs(params)
        assert_that(out["candidates"], bugs_of_the_newest_commit, label="candidates")
        assert_that(
            out["rejections"],
            reasons({str(no_tests.path): "no_tests_at_commit"}),
            label="rejections",
        )


# --- curate: records in memory -----------------------------------------------------------------

OTHER_PATCH = PATCH.replace("calc/ops.py", "calc/mul.py").replace(
    " def add(a, b):\n-    return a - b\n+    return a + b  # fixed sum",
    " def mul(a, b):\n-    return a + b\n+    return a * b  # product, not sum",
)
LEAK_PATCH = """diff --git a/calc/sort.py b/calc/sort.py
--- a/calc/sort.py
+++ b/calc/sort.py
@@ -1,2 +1,2 @@
 def ranking(items):
-    return sorted(items)
+    return sorted(items, reverse=True)
"""


def explore_task(task_id: str, instruction: str, score: float | None) -> ExploreTask:
    return ExploreTask(
        task_id, "acme/alpha", "/repos/acme/alpha", "a" * 40, "trajforge-env:p1", "p1",
        instruction, (ReplayAction("bash", json.dumps({"command": "python -c 'print(1)'"})),),
        {}, {"0": "b" * 64}, f"run-{task_id}", "explore/template", score,
    )  # fmt: skip


def step(trajectory_id: str, n: int) -> Transition:
    return Transition(
        f"{trajectory_id}-{n}", trajectory_id, "acme__alpha-1", n, "{}",
        '{"tool": "bash", "arguments": "{}"}', "ok", 0, (), "rollout",
    )  # fmt: skip


def test_curate_scores_dedups_and_drops_what_follows_a_dropped_record():
    kept_task = make_task("acme/alpha", 1)
    duplicate = make_task("acme/beta", 1)  # same patch and statement as kept_task
    other = make_task(
        "acme/gamma", 3, patch=OTHER_PATCH,
        problem_statement="Multiplying two numbers with mul returns their sum; a product is due.",
    )  # fmt: skip
    leaking = make_task(
        "acme/delta", 4, patch=LEAK_PATCH,
        problem_statement="ranking() should `return sorted(items, reverse=True)` instead.",
    )  # fmt: skip
    assert leaking.scores["statement_leaks_patch"] == 1.0
    run_kept = make_trajectory(kept_task.instance_id, 0, True)
    run_orphan = make_trajectory("nobody__nothing-9", 0, True)  # its task was never curated
    run_dup = make_trajectory(duplicate.instance_id, 0, True)
    run_leak = make_trajectory(leaking.instance_id, 0, False)
    steps_kept = [step(run_kept.trajectory_id, n) for n in range(2)]
    step_dropped = step(run_dup.trajectory_id, 0)
    explore_best = explore_task("e-best", "Print the number one.", 4.0)
    explore_copy = explore_task("e-copy", "print  the number ONE.", 3.0)  # same, normalized
    explore_low = explore_task("e-low", "Print a one using Python.", 1.0)
    params = CurateParams(
        max_scores={"statement_leaks_patch": 0.0}, min_scores={"explore_score": 2.0}
    )

    def scored_tasks(tasks: list[Any]) -> None:
        ids = sorted(t.instance_id for t in tasks)
        assert ids == sorted([kept_task.instance_id, other.instance_id])
        for t in tasks:
            assert t.difficulty is not None and 0.0 <= t.difficulty <= 1.0
            assert t.scores["statement_leaks_patch"] == 0.0 and t.scores["patch_lines"] == 2.0

    with beam_pipeline() as p:
        tables = {
            "tasks": p | "Tasks" >> beam.Create([kept_task, duplicate, other, leaking]),
            "explore_tasks": p
            | "Explore" >> beam.Create([explore_low, explore_copy, explore_best]),
            "trajectories": p | "Runs" >> beam.Create([run_kept, run_orphan, run_dup, run_leak]),
            "transitions": p | "Steps" >> beam.Create([*steps_kept, step_dropped]),
        }
        out = tables | Curate(params)
        assert_that(out["tasks"], scored_tasks, label="tasks")
        assert_that(out["explore_tasks"], equal_to([explore_best]), label="explore_tasks")
        assert_that(out["trajectories"], equal_to([run_kept, run_orphan]), label="trajectories")
        assert_that(out["transitions"], equal_to(steps_kept), label="transitions")
        assert_that(
            out["rejections"],
            reasons(
                {
                    duplicate.instance_id: "exact_duplicate",
                    leaking.instance_id: "score_above:statement_leaks_patch",
                    run_dup.trajectory_id: "task_dropped",
                    run_leak.trajectory_id: "task_dropped",
                    step_dropped.transition_id: "trajectory_dropped",
                    "e-copy": "exact_duplicate",
                    "e-low": "score_below:explore_score",
                }
            ),
            label="rejections",
        )


# --- environment, validate, rollout, explore: real containers ---------------------------------


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the Docker tests: rollout reuses the validation that validate proved."""
    return tmp_path_factory.mktemp("stage-cache")


@pytest.fixture(scope="module")
def fix_add(calc_repo, tmp_path_factory) -> Candidate:
    path, shas = calc_repo
    cache = tmp_path_factory.mktemp("mine-cache")
    repo = open_source(str(path), SourceOptions(cache_dir=str(cache)))
    candidate = mine_commit(repo, shas["fix_add"], Params().mine)
    assert isinstance(candidate, Candidate), candidate
    return candidate


def _calc_site(item: tuple[str, str, str, int]) -> Site:
    name, source, commit, position = item
    return Site(name, source, commit, "local/calc", order=(position,))


@pytest.mark.docker
def test_build_environments_builds_each_profile_once(docker_engine, calc_repo, tmp_path):
    path, shas = calc_repo
    params = make_params(tmp_path / "cache")
    missing = str(tmp_path / "missing")
    items = [  # (name, source, commit, position in history: a profile is built at its first)
        ("at_fix_add", str(path), shas["fix_add"], 1),
        ("at_initial", str(path), shas["initial"], 0),  # same declarations: the same profile
        ("at_bad_dep", str(path), shas["bad_dep"], 7),  # declares a package that does not exist
        ("ghost", missing, "0" * 40, 9),
    ]

    def one_image_for_both(ready: list[Any]) -> None:
        assert sorted(item[0] for _, item in ready) == ["at_fix_add", "at_initial"]
        profiles = {profile.profile_id for profile, _ in ready}
        assert len(profiles) == 1
        for profile, _ in ready:
            assert profile.status == "built" and profile.image.startswith("trajforge-env:")
            assert profile.setup_commit == shas["initial"]  # built at the first item
            assert profile.python == "3.11"

    def built_and_failed(profiles: list[Any]) -> None:
        assert sorted(p.status for p in profiles) == ["built", "failed"]
        failed = next(p for p in profiles if p.status == "failed")
        assert "trajforge-no-such-package-xyz" in failed.log

    def install_failure_has_the_log_tail(rejections: list[Any]) -> None:
        reasons({"at_bad_dep": "install_failed", "ghost": "repo_missing"})(rejections)
        failed = next(r for r in rejections if r.input == "at_bad_dep")
        assert failed.stage == "validate" and "trajforge-no-such-package-xyz" in failed.detail

    with beam_pipeline() as p:
        out = p | beam.Create(items) | BuildEnvironments(params, "validate", _calc_site)
        assert_that(out["ready"], one_image_for_both, label="ready")
        assert_that(out["profiles"], built_and_failed, label="profiles")
        assert_that(out["rejections"], install_failure_has_the_log_tail, label="rejections")


@pytest.mark.docker
def test_validate_candidates_proves_the_fix(docker_engine, calc_repo, fix_add, shared_cache):
    _, shas = calc_repo
    params = make_params(shared_cache)

    def the_proven_task(tasks: list[Any]) -> None:
        (task,) = tasks
        assert task.candidate_id == fix_add.candidate_id
        assert task.FAIL_TO_PASS == F2P and task.PASS_TO_PASS == P2P
        assert task.base_commit == shas["initial"] and task.origin == "commit"
        assert task.image_name.startswith("trajforge-env:")
        assert task.validation is not None
        assert (task.validation.base_exit_code, task.validation.gold_exit_code) == (1, 0)

    def one_built_profile(profiles: list[Any]) -> None:
        assert [(x.status, x.setup_commit) for x in profiles] == [("built", shas["initial"])]

    def base_and_gold_runs(runs: list[Any]) -> None:
        assert {r.candidate_id for r in runs} == {fix_add.candidate_id}
        states = Counter(r.state for r in runs)
        assert states["base"] >= 1 and states["gold"] >= 1
        base = next(r for r in runs if r.state == "base" and r.attempt == 0)
        assert ("tests/test_ops.py::test_add", "FAILED") in {
            (t.test_id, t.status) for t in base.tests
        }
        assert all(len(r.log_digest) == 64 and not r.timed_out for r in runs)

    with beam_pipeline() as p:
        out = p | beam.Create([fix_add]) | ValidateCandidates(params)
        assert_that(out["tasks"], the_proven_task, label="tasks")
        assert_that(out["rejections"], is_empty(), label="rejections")
        assert_that(out["runs"], base_and_gold_runs, label="runs")
        assert_that(out["profiles"], one_built_profile, label="profiles")


def _described_and_bare(task: Any) -> list[Any]:
    return [
        dataclasses.replace(task, problem_statement=GOOD_STATEMENT),
        dataclasses.replace(task, instance_id=f"{task.instance_id}-bare"),
    ]


@pytest.mark.docker
def test_rollout_tasks_runs_and_verifies_the_agent(docker_engine, fix_add, shared_cache):
    with ScriptedLLM(fixer("return a + b")) as llm:
        params = make_params(
            shared_cache,
            llm={"base_url": llm.base_url, "model": "fixer"},
            rollout={"max_steps": 4, "command_timeout_s": 10, "workers": 1},
        )

        task_id = f"local__calc-{fix_add.candidate_id[:12]}"  # SWE-bench style instance id

        def resolved_run(trajectories: list[Any]) -> None:
            (run,) = trajectories
            assert run.instance_id == task_id and run.model == "fixer"
            assert run.resolved is True and run.reward == 1.0 and run.exit_status == "submitted"
            assert "-    return a - b\n+    return a + b" in run.model_patch
            assert run.test_report == {F2P[0]: "PASSED", P2P[0]: "PASSED"}
            assert [m.role for m in run.messages] == ["system", "user", *["assistant", "tool"] * 4]
            assert GOOD_STATEMENT in run.messages[1].content

        def solve_rates(tasks: list[Any]) -> None:
            rates = {t.problem_statement: t.scores.get("solve_rate") for t in tasks}
            assert rates == {GOOD_STATEMENT: 1.0, "": None}, rates

        def four_steps(transitions: list[Any]) -> None:
            ordered = sorted(transitions, key=lambda t: t.step)
            assert [t.step for t in ordered] == [0, 1, 2, 3]
            assert [json.loads(t.action)["tool"] for t in ordered] == [
                "view", "str_replace", "bash", "submit"
            ]  # fmt: skip
            assert ordered[1].changed_files == ("calc/ops.py",)
            assert {t.origin for t in transitions} == {"rollout"}

        def bare_task_is_refused(rejections: list[Any]) -> None:
            (rejection,) = rejections
            assert rejection.reason == "no_problem_statement" and rejection.stage == "rollout"
            assert rejection.input == f"{task_id}-bare#0", rejection  # attempt 0 of the task

        with beam_pipeline() as p:
            # The task validate proves (a cache hit after the validate test), described by
            # hand, plus a copy without a statement that rollout must refuse.
            proven = p | beam.Create([fix_add]) | "Validate" >> ValidateCandidates(params)
            tasks = proven["tasks"] | "Describe" >> beam.FlatMap(_described_and_bare)
            out = tasks | RolloutTasks(params)
            assert_that(out["trajectories"], resolved_run, label="trajectories")
            assert_that(out["tasks"], solve_rates, label="tasks")
            assert_that(out["transitions"], four_steps, label="transitions")
            assert_that(out["rejections"], bare_task_is_refused, label="rejections")
    assert [r["model"] for r in llm.requests] == ["fixer"] * 4
    assert all(r["tools"] for r in llm.requests)


README = """\
# calc

Small arithmetic helpers.

```python
from calc.ops import mul
print(mul(3, 4))
```

```python
from calc.ops import missing_function
```
"""


@pytest.fixture(scope="module")
def docs_repo(tmp_path_factory) -> tuple[Path, str]:
    """A calc repository whose README has a working example and one that fails to import."""
    root = tmp_path_factory.mktemp("explore")
    repo = RepoBuilder(root / "calc")
    head = repo.commit(
        "calc with docs",
        {
            "pyproject.toml": pyproject(),
            "README.md": README,
            "calc/__init__.py": "",
            "calc/ops.py": OPS_FIXED,
            "tests/test_ops.py": TESTS_BASE,
        },
    )
    return root / "calc", head


@pytest.mark.docker
def test_explore_repos_replays_the_doc_examples(docker_engine, docs_repo, shared_cache, tmp_path):
    path, head = docs_repo
    missing = str(tmp_path / "missing")
    params = make_params(shared_cache, explore={"command_timeout_s": 20})

    def the_working_example(tasks: list[Any]) -> None:
        (task,) = tasks
        assert task.origin == "explore/template" and task.score == 4.0
        assert task.base_commit == head and task.repo == "local/calc"
        assert "README.md" in task.instruction and "`calc.ops.mul`" in task.instruction
        assert "print(mul(3, 4))" not in task.instruction  # the code is the trajectory
        assert task.provenance["labeler"] == "template"
        assert task.expected_outputs and task.image_name.startswith("trajforge-env:")

    def replayed_run(trajectories: list[Any]) -> None:
        (run,) = trajectories
        assert run.origin == "explore/template" and run.resolved is True and run.reward == 4.0
        assert [m.content for m in run.messages if m.role == "tool"][-1].strip() == "12"

    def two_steps(transitions: list[Any]) -> None:
        assert sorted(t.step for t in transitions) == [0, 1]
        assert {t.origin for t in transitions} == {"explore/template"}

    failing_example = f"local/calc@{head[:12]}:README.md:11"  # the second code block
    with beam_pipeline() as p:
        out = p | beam.Create([str(path), missing]) | ExploreRepos(params)
        assert_that(out["explore_tasks"], the_working_example, label="explore_tasks")
        assert_that(out["trajectories"], replayed_run, label="trajectories")
        assert_that(out["transitions"], two_steps, label="transitions")
        assert_that(
            out["rejections"],
            reasons({failing_example: "example_fails", missing: "repo_missing"}),
            label="rejections",
        )


@pytest.mark.docker
def test_explore_failing_example_rejection_names_the_error(docker_engine, docs_repo, shared_cache):
    path, _ = docs_repo
    params = make_params(shared_cache, explore={"command_timeout_s": 20})

    def names_the_import_error(rejections: list[Any]) -> None:
        (rejection,) = rejections
        assert rejection.reason == "example_fails"
        assert "missing_function" in rejection.detail, rejection.detail

    with beam_pipeline() as p:
        out = p | beam.Create([str(path)]) | ExploreRepos(params)
        assert_that(out["rejections"], names_the_import_error, label="rejections")
