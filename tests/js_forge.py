"""Shared by the JS forge kits (mocha, vitest): a task made from real runs of a test-built npm
project's image, and the patch a model's workspace reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repo_factory import RepoBuilder
from trajforge.generators.languages.js_environment import prepare_js_environment, run_js_tests
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.git_tree import apply_patches, git


def js_task(sandbox, root: Path, files: dict[str, str], fix: dict[str, str], runner: str):
    """(task, repo, image, statuses at base, at gold): the project committed, its image built by
    ``prepare_js_environment``, FAIL_TO_PASS/PASS_TO_PASS from its runs at base and at the fix."""
    repo = RepoBuilder(root / "calc")
    base = repo.commit(f"calc with {runner}", files)
    env = prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)
    gold_commit = repo.commit("fix add", fix)
    gold = git(str(repo.path), "diff", base, gold_commit).decode()
    at_base = run_js_tests(sandbox, env, str(repo.path), tree=base).statuses()
    at_gold = run_js_tests(sandbox, env, str(repo.path), tree=gold_commit).statuses()
    f2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" != at_base.get(t)))
    p2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" == at_base.get(t)))
    task = TaskInstance(
        instance_id=f"calc-{runner}-1", repo="local/calc", base_commit=base, patch=gold,
        test_patch="", problem_statement="add subtracts", hints_text="",
        created_at="2024-01-01", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
        environment_setup_commit=env.setup_commit, image_name=env.image,
        test_cmd=f"node_modules/.bin/{runner}", origin="mined", profile_id=env.profile_id,
        candidate_id=f"calc-{runner}-1", source=str(repo.path), flaky_tests=(),
        difficulty=None, env_recipe=env.recipe, language="javascript", test_runner=runner,
    )  # fmt: skip
    return task, str(repo.path), env.image, at_base, at_gold


def model_patch(task: TaskInstance, repo: str, tmp: Path, files: dict[str, str]) -> str:
    """What an agent's workspace reports after writing ``files`` over the starting tree."""
    start = apply_patches(repo, task.base_commit, [task.bug_patch])
    tree = tmp / "workspace"
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=git(repo, "archive", start), check=True)
    ws = RepoBuilder(tree)
    ws.commit("start", {})
    ws.write(files)
    ws.git("add", "-A")
    diff = ["git", "-C", str(tree), "diff", "--cached", "--binary"]
    return subprocess.run(diff, capture_output=True, text=True, check=True).stdout
