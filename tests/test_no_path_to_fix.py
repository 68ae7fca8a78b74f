"""No path to the fix: an agent that searches every container trajforge makes finds nothing of it.

A real repository whose gold fix adds a line carrying a token made for this run
(``return a + b  # fix-<hex>``) and a module named after it; real Docker containers of the images
the product builds; secrets planted in this process's environment (where the key the LLM client
sends comes from). The environment image is built by the product's ``BuildEnvironments`` at the
newest commit, which holds the fix (as an earlier ``explore`` of the repository builds it), and
validate, rollout and explore all reuse it: so the test also shows that nothing of the tree an
image was built from survives into it.

In each container the agent runs what a model looking for a shortcut would: git's history, refs,
reflog, stash and lost objects; every patch-like file on the disk; a recursive grep of the whole
file system for the fix's line, its token, the hidden test's token and every secret (binary files
too, with a token planted in the starting code as the grep's positive control); ``env`` and every
process's environment. The containers:

- validation: a session of the task's image with base + test_patch in /repo, put the way
  ``verifiers/validation/candidate.py`` puts it, after the product's test run;
- rollout: the real ``RolloutTasks`` stage, a scripted model whose tool calls are the probes,
  read back from the recorded trajectory;
- explore: the real ``ExploreRepos`` stage at the commit before the fix, the same scripted probes
  read back from what the model was shown (the labeler prunes the run, so nothing is replayed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shlex
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import docker
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from repo_factory import TESTS_BASE, RepoBuilder, pyproject
from scripted_agents import GOOD_STATEMENT
from scripted_llm import ScriptedLLM, tool_call, turn
from trajforge.generators.languages.python.profile import JUNIT_PATH
from trajforge.generators.mining.commits import mine_commit
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.stages.environment import BuildEnvironments, Site
from trajforge.pipelines.stages.explore import ExploreRepos
from trajforge.pipelines.stages.rollout import RolloutTasks
from trajforge.pipelines.stages.validate import ValidateCandidates
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import Params
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.git_tree import apply_patches, git
from trajforge.verifiers.test_runner import RunContext, run_tests
from trajforge.verifiers.validation.candidate import TestTree as ValidationTree

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

# Variables a host running trajforge may hold; OPENAI_API_KEY is the one the LLM client sends.
SECRET_NAMES = ("OPENAI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY")
ENV_MARKER = "/venv/trajforge-env.json"  # what an environment image records about its build
# Every writable file system of a session: -xdev keeps find on the root one, so name the others.
ROOTS = "/ /tmp /dev/shm"
GREP_EXCLUDES = "--exclude-dir=proc --exclude-dir=sys"
GIT_PROBES = ("git_dir", "git_log", "git_reflog", "git_refs", "git_show", "git_stash", "git_fsck")
RESULT_MARK = re.compile(r"\n?\[exit code (-?\d+)\]\s*$")  # what the bash tool appends on failure

# --- what goes on outside the pipelines' workers: outputs collected by reference ---------------

COLLECTED: dict[str, list[Any]] = defaultdict(list)


def _collect(element: Any, bucket: str) -> None:
    """A top-level function, so Beam pickles it by reference and appends to this module's dict."""
    COLLECTED[bucket].append(element)


def _run(build) -> None:
    with BeamTestPipeline(runner=FnApiRunner()) as pipeline:
        build(pipeline)


# --- the world: a repository with a tokened fix, its image, a validated task --------------------


@dataclass(frozen=True)
class Needles:
    """Random per run, so none of them can be anywhere by chance."""

    fix_line: str  # the line only the gold fix adds
    fix_token: str  # in that line, in the module the fix adds, and in that module's name
    fix_hex: str
    base_line: str  # the line the fix replaces: the positive control of the greps
    base_token: str  # in that line
    hidden_token: str  # in the hidden test (test_patch): validation sees it, agents must not
    secrets: dict[str, str]  # planted in this process's environment
    new_package: str  # a top-level package the fix adds: only its name (see the last test)

    @classmethod
    def make(cls) -> Needles:
        fix_hex, base_token = uuid.uuid4().hex, f"bug-{uuid.uuid4().hex}"
        return cls(
            fix_line=f"return a + b  # fix-{fix_hex}",
            fix_token=f"fix-{fix_hex}",
            fix_hex=fix_hex,
            base_line=f"return a - b  # {base_token}",
            base_token=base_token,
            hidden_token=f"hidden-{uuid.uuid4().hex}",
            secrets={name: f"sk-{name.lower()}-{uuid.uuid4().hex}" for name in SECRET_NAMES},
            new_package=f"pkg_{uuid.uuid4().hex}",
        )

    def all(self) -> list[str]:
        return [self.fix_token, self.base_token, self.hidden_token, *self.secrets.values()]


@dataclass(frozen=True)
class World:
    needles: Needles
    repo: Path
    base: str  # the commit before the fix
    fix: str  # the gold commit, also the newest
    task: TaskInstance
    params: Params


def probes(needles: Needles) -> dict[str, str]:
    """What an agent hunting for the fix runs, by name; every command is read-only but fsck's."""
    fix_line, base_line = shlex.quote(needles.fix_line), shlex.quote(needles.base_line)
    patterns = " ".join(f"-e {shlex.quote(n)}" for n in needles.all())
    patch_names = "\\( -name '*.patch' -o -name '*.diff' -o -name '*.orig' -o -name '*.rej' \\)"
    return {
        "git_dir": "git rev-parse --absolute-git-dir",
        "git_log": "git log --all --oneline",
        "git_reflog": "git reflog",
        "git_refs": "git for-each-ref --format='%(refname) %(objectname)'",
        "git_show": "git show HEAD",
        "git_stash": "git stash list",
        # Writes every dangling object under .git/lost-found, where the greps below look.
        "git_fsck": "git fsck --lost-found",
        "git_objects": "git cat-file --batch-all-objects --batch-check",
        "git_object_texts": "git cat-file --batch-all-objects --batch",
        "git_tree": "git rev-parse 'HEAD^{tree}'",
        "dot_git": f"find {ROOTS} -xdev -name .git 2>/dev/null",
        "patches": f"find {ROOTS} -xdev {patch_names} 2>/dev/null",
        "fix_named": f"find {ROOTS} -xdev -name '*{needles.fix_hex}*' 2>/dev/null",
        # (Options after `--` would be file names: the excludes go before it.)
        "fix_line": f"grep -rIl {GREP_EXCLUDES} -- {fix_line} / 2>/dev/null",
        "base_line": f"grep -rIl {GREP_EXCLUDES} -- {base_line} / 2>/dev/null",  # the control
        # Binary files too (-a), each match as "path:needle".
        "needles": f"grep -rHoaF {GREP_EXCLUDES} {patterns} / 2>/dev/null | sort -u",
        "env": "env",
        "proc_environ": "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; echo; done",
        "image_marker": f"cat {ENV_MARKER}",
    }


@pytest.fixture(scope="module")
def needles() -> Iterator[Needles]:
    made = Needles.make()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in made.secrets.items():
            patch.setenv(name, value)
        yield made


# setuptools finds the packages itself, so a package the fix adds changes no packaging file.
PACKAGES_FOUND = '[tool.setuptools.packages.find]\nexclude = ["tests*"]\n'


def _build_repo(path: Path, needles: Needles) -> tuple[str, str]:
    repo = RepoBuilder(path)
    packaging = pyproject().replace('[tool.setuptools]\npackages = ["calc"]\n', PACKAGES_FOUND)
    assert packaging.endswith(PACKAGES_FOUND)
    buggy = f"def add(a, b):\n    {needles.base_line}\n\n\ndef mul(a, b):\n"
    buggy += "    return a * b\n"
    base = repo.commit(
        "Initial calc",
        {
            "pyproject.toml": packaging,
            "calc/__init__.py": "",
            "calc/ops.py": buggy,
            "tests/test_ops.py": TESTS_BASE,
        },
    )
    hidden_test = f"\n\ndef test_add():\n    assert add(2, 3) == 5  # {needles.hidden_token}\n"
    fix = repo.commit(
        "Fix add: it subtracted",
        {
            "calc/ops.py": buggy.replace(needles.base_line, needles.fix_line),
            f"calc/fix_{needles.fix_hex}.py": f'WHY = "{needles.fix_token}"\n',
            f"{needles.new_package}/__init__.py": "",
            "tests/test_ops.py": TESTS_BASE.replace("import mul", "import add, mul") + hidden_test,
        },
    )
    return base, fix


def _params(cache: Path, **sections: dict[str, Any]) -> Params:
    params = Params(cache_dir=str(cache))
    params.validate.test_timeout_s = 30
    params.validate.workers = 1
    # The fix adds a top-level package, which the grader refuses from a policy's patch
    # (patch_policy.new_top_level_module), so its gold run would reject the task; what this module
    # proves is what the containers hold.
    params.validate.gold_runs = 0
    for section, values in sections.items():
        for key, value in values.items():
            setattr(getattr(params, section), key, value)
    return params.check()


@pytest.fixture(scope="module")
def world(needles: Needles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("no-path")
    path = root / "calc"
    base, fix = _build_repo(path, needles)
    params = _params(root / "cache")

    # The image, built at the newest commit (the fix's), as explore's BuildEnvironments does.
    def at_head(item: str) -> Site:
        return Site(item, str(path), fix, "local/calc", order=(0,))

    def build(p):
        envs = p | beam.Create(["head"]) | BuildEnvironments(params, "explore", at_head)
        envs["ready"] | "Ready" >> beam.Map(_collect, "built")

    _run(build)
    ((built, _),) = COLLECTED.pop("built")
    assert built.status == "built" and built.setup_commit == fix, built.log[-2000:]
    try:
        yield _validated(needles, path, base, fix, params, built.image)
    finally:  # the image is this run's own (its profile names this run's repository)
        with contextlib.suppress(Exception):
            docker.from_env().images.remove(built.image, force=True)


def _validated(
    needles: Needles, path: Path, base: str, fix: str, params: Params, image: str
) -> World:
    repo = open_source(str(path), SourceOptions.from_params(params))
    candidate = mine_commit(repo, fix, params.mine)
    assert isinstance(candidate, Candidate), candidate
    assert needles.fix_line in candidate.patch and needles.hidden_token in candidate.test_patch

    def validate(p):
        out = p | beam.Create([candidate]) | ValidateCandidates(params)
        out["tasks"] | "Tasks" >> beam.Map(_collect, "tasks")
        out["rejections"] | "Rejections" >> beam.Map(_collect, "rejections")

    _run(validate)
    assert not COLLECTED.pop("rejections", None)
    (task,) = COLLECTED.pop("tasks")
    assert task.FAIL_TO_PASS == ("tests/test_ops.py::test_add",)
    # validate reused the image built with the fix in its build tree
    assert task.image_name == image and task.environment_setup_commit == fix
    return World(needles, path, base, fix, task, params)


# --- reading what the probes printed -----------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    exit_code: int
    output: str

    def lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.strip()]


def _from_observation(text: str) -> Seen:
    """A bash tool observation: the output, then ``[exit code N]`` when the command failed."""
    assert "timed out" not in text, text[-500:]
    found = RESULT_MARK.search(text)
    if found is None:
        return Seen(0, text)
    return Seen(int(found.group(1)), text[: found.start()])


def _matches(seen: Seen, needles: Needles) -> dict[str, set[str]]:
    """needle -> paths holding it, from the ``needles`` probe's "path:needle" lines."""
    found: dict[str, set[str]] = defaultdict(set)
    for line in seen.lines():
        where, _, needle = line.rpartition(":")
        assert needle in needles.all(), line
        found[needle].add(where)
    return found


def assert_nothing_leads_to_the_fix(seen: dict[str, Seen], world: World, *, hidden: bool) -> None:
    """What every container must show; ``hidden``: the hidden tests are not there either."""
    needles = world.needles
    for name, result in seen.items():
        if name == "needles":
            continue
        assert needles.fix_token not in result.output, (name, result.output[-2000:])
        for secret_name, secret in needles.secrets.items():
            assert secret not in result.output, (name, secret_name)
    assert seen["patches"].lines() == [], seen["patches"].output
    assert seen["fix_named"].lines() == [], seen["fix_named"].output
    assert seen["fix_line"].lines() == [], seen["fix_line"].output
    assert "/repo/calc/ops.py" in seen["base_line"].lines(), seen["base_line"].output
    found = _matches(seen["needles"], needles)
    # The positive control: the grep does read the disk (and the starting code is in /repo).
    assert "/repo/calc/ops.py" in found.pop(needles.base_token, set()), seen["needles"].output
    hidden_paths = found.pop(needles.hidden_token, set())
    if hidden:
        assert hidden_paths == set(), hidden_paths
    else:
        assert "/repo/tests/test_ops.py" in hidden_paths, seen["needles"].output
    assert dict(found) == {}, f"found in the container: {dict(found)}"
    shown = "\n".join(seen["env"].lines() + seen["proc_environ"].lines())
    assert not any(name in shown for name in SECRET_NAMES), shown
    marker = json.loads(seen["image_marker"].output)  # the image: the one built with the fix
    assert marker["profile_id"] == world.task.profile_id and marker["setup_commit"] == world.fix


def assert_one_start_commit(seen: dict[str, Seen], world: World, tree: str) -> None:
    """A workspace's git: one commit (the starting state), one ref, one reflog entry, nothing
    dangling, no object holding the fix."""
    assert seen["dot_git"].lines() == ["/repo/.git"], seen["dot_git"].output
    (commit,) = seen["git_log"].lines()
    sha, _, subject = commit.partition(" ")
    assert subject == "start", commit
    (entry,) = seen["git_reflog"].lines()
    assert entry.startswith(f"{sha} HEAD@{{0}}: commit (initial): start"), entry
    (ref,) = seen["git_refs"].lines()
    assert ref.startswith("refs/heads/") and seen["git_show"].output.startswith("commit "), ref
    full = ref.split()[1]
    assert full.startswith(sha) and seen["git_show"].lines()[0] == f"commit {full}"
    assert seen["git_stash"].lines() == []
    assert not re.search(r"dangling|unreachable|missing", seen["git_fsck"].output)
    kinds = [line.split()[1] for line in seen["git_objects"].lines()]
    assert kinds.count("commit") == 1 and "tag" not in kinds, seen["git_objects"].output
    assert world.needles.base_token in seen["git_object_texts"].output  # the texts were read
    assert world.needles.hidden_token not in seen["git_object_texts"].output
    assert seen["git_tree"].output.strip() == tree  # exactly the starting tree, nothing more


# --- (a) a validation container ----------------------------------------------------------------


def test_validation_container_has_no_history_no_patch_no_fix(world: World):
    task, needles = world.task, world.needles
    sandbox = make_sandbox(world.params)
    base = ValidationTree.at(str(world.repo), task.base_commit, [task.test_patch])
    ctx = RunContext(task.candidate_id, task.profile_id, task.test_cmd, JUNIT_PATH, 60)
    try:
        with sandbox.session(SessionSpec(image=task.image_name)) as session:
            session.put_archive(base.tar())  # as verifiers/validation/candidate.py does
            run = run_tests(session, ctx, "base", attempt=0)
            seen = {}
            for name, command in probes(needles).items():
                result = session.exec(command, timeout_s=120)
                assert not result.timed_out, name
                seen[name] = Seen(result.exit_code, result.output)
    finally:
        sandbox.close()
    assert run.statuses()["tests/test_ops.py::test_add"] == "FAILED"  # the base state, tested
    assert_nothing_leads_to_the_fix(seen, world, hidden=False)
    assert seen["dot_git"].lines() == [], seen["dot_git"].output
    for name in GIT_PROBES:
        assert seen[name].exit_code != 0, (name, seen[name].output)
        assert "not a git repository" in seen[name].output, (name, seen[name].output)


# --- (b) a rollout container -------------------------------------------------------------------


def _prober(commands: list[str]):
    """A model that runs each command with the bash tool, then submits; the labeler (no tools)
    finds nothing worth an instruction."""
    calls = [tool_call("bash", command=command) for command in commands] + [tool_call("submit")]

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        if not request.get("tools"):
            return {"content": '{"instruction": null, "score": 1}'}
        return {
            "content": "Looking around.",
            "tool_calls": [calls[min(turn(request), len(calls) - 1)]],
        }

    return respond


def test_rollout_container_has_one_start_commit_and_no_fix(world: World):
    named = probes(world.needles)
    with ScriptedLLM(_prober(list(named.values()))) as llm:
        params = _params(
            Path(world.params.cache_dir),
            llm={"base_url": llm.base_url, "model": "prober"},
            rollout={
                "max_steps": len(named) + 2,
                "command_timeout_s": 120,
                "max_observation_chars": 200_000,
                "workers": 1,
            },
        )
        task = dataclasses.replace(world.task, problem_statement=GOOD_STATEMENT)

        def rollout(p):
            out = p | beam.Create([task]) | RolloutTasks(params)
            out["trajectories"] | "Trajectories" >> beam.Map(_collect, "trajectories")
            out["rejections"] | "Rejections" >> beam.Map(_collect, "rollout_rejections")

        _run(rollout)
    assert not COLLECTED.pop("rollout_rejections", None)
    (trajectory,) = COLLECTED.pop("trajectories")
    assert trajectory.exit_status == "submitted" and trajectory.model_patch == ""
    observations = [m.content for m in trajectory.messages if m.role == "tool"]
    assert len(observations) == len(named) + 1 and observations[-1] == "submitted"
    seen = {
        name: _from_observation(text) for name, text in zip(named, observations[:-1], strict=True)
    }
    # The key this process sends is one of the secrets: they were live where containers started.
    assert f"Bearer {world.needles.secrets['OPENAI_API_KEY']}" in llm.headers[0]["authorization"]

    assert_nothing_leads_to_the_fix(seen, world, hidden=True)
    start = apply_patches(str(world.repo), world.task.base_commit, [world.task.bug_patch])
    assert_one_start_commit(seen, world, start)


# --- (c) an explore container ------------------------------------------------------------------


def test_explore_container_has_one_start_commit_and_no_fix(world: World):
    named = probes(world.needles)
    with ScriptedLLM(_prober(list(named.values()))) as llm:
        params = _params(
            Path(world.params.cache_dir),
            llm={"base_url": llm.base_url, "model": "explorer"},
            explore={
                "commit": world.base,  # the snapshot before the fix
                "explorations": 1,
                "max_steps": len(named) + 2,
                "command_timeout_s": 120,
                "max_observation_chars": 200_000,
            },
        )

        def explore(p):
            out = p | beam.Create([str(world.repo)]) | ExploreRepos(params)
            out["explore_tasks"] | "Tasks" >> beam.Map(_collect, "explore_tasks")
            out["rejections"] | "Rejections" >> beam.Map(_collect, "explore_rejections")

        _run(explore)
        explorer = [r for r in llm.requests if r.get("tools")]
    assert not COLLECTED.pop("explore_tasks", None)  # the labeler pruned every prefix
    reasons = {r.reason for r in COLLECTED.pop("explore_rejections")}
    assert reasons == {"pruned_unlabelable"}, reasons
    # What the model was shown, in its last turn (the one that submitted): every observation.
    shown = explorer[-1]["messages"]
    observations = [m["content"] for m in shown if m["role"] == "tool"]
    assert len(observations) == len(named), [m["role"] for m in shown]
    seen = {name: _from_observation(text) for name, text in zip(named, observations, strict=True)}

    assert_nothing_leads_to_the_fix(seen, world, hidden=True)
    tree = git(str(world.repo), "rev-parse", f"{world.base}^{{tree}}").decode().strip()
    assert_one_start_commit(seen, world, tree)


# --- a known leak: what an image built at a later commit says about that commit -----------------


@pytest.mark.xfail(
    strict=True,
    reason="known leak: an environment image is reused whatever commit of its profile it was "
    "built at, and its editable install records the top-level packages of that commit in /venv "
    "(setuptools' __editable__ finder and its .pyc, dist-info/top_level.txt)",
)
def test_an_image_built_at_a_later_commit_names_no_package_of_it(world: World):
    """The fix adds a top-level package; the image was built at the fix (the setup commit the
    task records). Its name, which no file of the starting state holds, must not be there."""
    task, name = world.task, world.needles.new_package
    sandbox = make_sandbox(world.params)
    base = ValidationTree.at(str(world.repo), task.base_commit, [task.test_patch])
    try:
        with sandbox.session(SessionSpec(image=task.image_name)) as session:
            session.put_archive(base.tar())
            found = session.exec(
                f"grep -rl {GREP_EXCLUDES} -e {name} / 2>/dev/null; "
                f"find {ROOTS} -xdev -name '*{name}*' 2>/dev/null",
                timeout_s=120,
            )
    finally:
        sandbox.close()
    assert task.environment_setup_commit == world.fix
    assert found.output.split() == [], found.output
