"""A JavaScript/TypeScript project's environment and test runs, end to end in the sandbox.

``prepare_js_environment`` detects the project, renders its recipe, makes the node base image
on demand and builds the image through the same ``ImageStore.build_image`` path as a Python
profile (``image.py:build_recipe``: its labels, its build context, the CA bundle as a build
input only); a failed install is one line naming its cause. ``run_js_tests`` runs the runner
in a session with no network through ``verifiers/test_runner.py:run_tests`` (the same
killed-from-outside and report-cap rules), reading the runner's JSON report instead of JUnit.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from trajforge.generators.environments.image import build_recipe, recipe_digest
from trajforge.generators.environments.recipe import RECIPE_LABEL, image_name
from trajforge.generators.languages.base import Detection, ReportError
from trajforge.generators.languages.javascript import detection as project
from trajforge.generators.languages.javascript.base_image import ensure_node_base_image
from trajforge.generators.languages.javascript.detection import read_runner_report
from trajforge.generators.languages.javascript.install_cause import install_cause
from trajforge.generators.languages.javascript.runners import REPORT_PATH
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.records import content_id
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive, git
from trajforge.verifiers.test_runner import RunContext, run_tests

JS_PROFILE_FORMAT = "js-profile-v1"


@dataclasses.dataclass(frozen=True)
class JsEnvironment:
    image: str
    detection: Detection
    profile_id: str
    recipe: str
    setup_commit: str
    log: str = ""  # the build's log when built here; "" when an image was reused


def prepare_js_environment(
    sandbox: Sandbox,
    repo_dir: str,
    params: EnvironmentParams,
    commit: str = "HEAD",
    say: Callable[[str], None] = print,
    detection: Detection | None = None,
) -> JsEnvironment:
    """The project's image, built (or reused when its recipe label is this recipe's hash), and
    what detection found; a UserError with one line when it is no JS project or the install
    fails (``install_failed``: the package manager's own first error line)."""
    if not isinstance(sandbox, ImageStore):
        raise UserError(
            "javascript environments build images: use the docker or podman sandbox",
            reason="no_image_store",
        )
    detection = detection or project.detect(repo_dir)  # given: a benchmark's baseline
    if detection is None:
        raise UserError(f"{repo_dir}: no package.json; not a JavaScript project", reason="no_js")
    setup_commit = git(repo_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    recipe = project.recipe(detection)
    identity = f"file://{os.path.realpath(repo_dir)}"
    profile_id = content_id(JS_PROFILE_FORMAT, identity, recipe, length=16)
    image = image_name(params.registry, profile_id)
    env = JsEnvironment(image, detection, profile_id, recipe, setup_commit)
    digest = recipe_digest(repo_dir, recipe, profile_id, setup_commit)
    info = sandbox.image_info(image) if sandbox.has_image(image) else None
    if info is not None and info.labels.get(RECIPE_LABEL) == digest:
        return env
    if getattr(sandbox, "name", "") == "docker":
        ensure_node_base_image(detection.runtime, getattr(sandbox, "docker_host", None), say)
    say(f"{os.path.basename(repo_dir)}: node {detection.runtime}, {detection.package_manager}")
    result = build_recipe(sandbox, image, recipe, profile_id, setup_commit, repo_dir, params)
    if not result.ok:
        raise UserError(
            f"{os.path.basename(repo_dir)}: {detection.package_manager} install failed: "
            f"{install_cause(result.log)}",
            reason="install_failed",
        )
    return dataclasses.replace(env, log=result.log)


def run_js_tests(
    sandbox: Sandbox,
    env: JsEnvironment,
    repo_dir: str,
    tree: str = "HEAD",
    selection: Sequence[str] = (),
    timeout_s: float = 600,
    per_test_timeout_s: int = 30,
    candidate_id: str = "",
    state: str = "base",
    attempt: int = 0,
) -> TestRun:
    """One run of the suite (or of ``selection``'s files, the statuses then limited to it: a
    selected test the run did not report is absent, as in a pytest run) on the repository at
    ``tree``, in a fresh container with no network."""
    detection = env.detection
    command = project.test_command(detection, selection, per_test_timeout_s)
    ctx = RunContext(
        candidate_id=candidate_id or env.profile_id,
        profile_id=env.profile_id,
        test_cmd=command,
        junit_path=REPORT_PATH,
        timeout_s=timeout_s,
        parse=_reader(detection.runner),
    )
    with sandbox.session(SessionSpec(image=env.image)) as session:
        session.put_archive(archive(repo_dir, tree, prefix="repo/"))
        run = run_tests(session, ctx, state, attempt)
    if not selection:
        return run
    wanted = set(selection)
    tests = tuple(t for t in run.tests if t.test_id in wanted)
    run_id = content_id(ctx.candidate_id, state, attempt, tuple(selection), run.log_digest)
    return dataclasses.replace(run, run_id=run_id, selection=tuple(selection), tests=tests)


def _reader(runner: str) -> Callable[[bytes | None, str], ParsedLog]:
    """The runner's report as statuses; a missing or unreadable report is no statuses and the
    cause as the run's collection error, so the suite counts as not run."""

    def parse(report: bytes | None, log: str) -> ParsedLog:
        if not report:
            return ParsedLog({}, (f"{runner} wrote no report",))
        try:
            parsed = read_runner_report(report, runner)
        except ReportError as exc:
            return ParsedLog({}, (f"{runner} report: {exc}",))
        if parsed.problem:  # a report that contradicts itself decides nothing
            return ParsedLog({}, (f"{runner} report: {parsed.problem}",))
        return parsed

    return parse
