"""The SWE-smith-style baseline for a repository's history: ONE image per repository, then its
protocol per candidate.

SWE-smith (github:SWE-bench/SWE-smith) makes one environment per repository at one commit: a
container from a base image with the network, ``python -m pip install -e .`` and ``pip install
pytest`` (``configs/install_repo.sh``, ``constants.py:DEFAULT_SPECS``; a repository's specs may add
its test extras), committed once (``build_repo/create_images.py``). Validation
(``harness/valid.py``) then runs, per instance and each in a fresh container of that image, the
whole suite with ``TEST_PYTEST`` and reads the verbose log (``harness/log_parsers.py``), and
``harness/grading.py:get_valid_report`` labels FAIL_TO_PASS / PASS_TO_PASS from the two logs;
``harness/gather.py`` keeps an instance with a FAIL_TO_PASS (a PR mirror may have no
PASS_TO_PASS). A commit whose suite does not run in that one environment is lost: that is what one
image for many commits costs, and it is counted.

Here: the image is made at the newest candidate's commit (with its test changes) on the base image
trajforge would use there; each candidate's tree replaces the files git tracked at that commit (as
a ``git checkout`` would: the install's untracked files, egg-info and the like, stay).
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
import time
from dataclasses import dataclass

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.image import build_session_spec
from trajforge.generators.environments.recipe import CA_FILE
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.base import ExecResult, Sandbox, Session, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, git

TEST_CMD = "pytest --disable-warnings --color=no --tb=no --verbose"  # constants.py TEST_PYTEST
TIMEOUT_S = 120  # constants.py TIMEOUT: one suite run's limit (a hang loses the candidate)
STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")  # swebench's TestStatus, in order
PASSED, FAILED = "PASSED", "FAILED"
TRACKED = "/opt/baseline-tracked"  # NUL-separated paths git tracked at the image's commit
VENV_PATH = "export PATH=/venv/bin:$PATH; "
# Root-level requirement files a SWE-smith spec would name for the tests ("pip install -r ...").
TEST_REQUIREMENTS = re.compile(
    r"^(requirements[-_.]?(test|tests|testing|dev)|(test|dev)[-_]requirements)\.txt$"
)


def parse_log_pytest(log: str) -> dict[str, str]:
    """SWE-smith's ``parse_log_pytest``: ``<test id> <STATUS>`` lines of pytest's verbose log."""
    statuses: dict[str, str] = {}
    for line in log.split("\n"):
        for status in STATUSES:
            match = re.match(rf"^(\S+)(\s+){status}", line)
            if match:
                statuses[match.group(1)] = status
    return statuses


def valid_report(base_log: str, gold_log: str) -> dict[str, list[str]]:
    """``get_valid_report`` without min-testing: the base run (tests changed, fix not applied) is
    SWE-smith's 'pre-gold' log, the fixed run its 'post-gold' one."""
    before, after = parse_log_pytest(base_log), parse_log_pytest(gold_log)
    report: dict[str, list[str]] = {
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "FAIL_TO_FAIL": [],
        "PASS_TO_FAIL": [],
    }
    for test, status in after.items():
        if test not in before:
            if status == PASSED:
                report["FAIL_TO_PASS"].append(test)
            elif status == FAILED:
                report["PASS_TO_FAIL"].append(test)
            continue
        key = {
            (PASSED, PASSED): "PASS_TO_PASS",
            (FAILED, PASSED): "FAIL_TO_PASS",
            (FAILED, FAILED): "FAIL_TO_FAIL",
            (PASSED, FAILED): "PASS_TO_FAIL",
        }.get((before[test], status))
        if key:
            report[key].append(test)
    for test, status in before.items():
        if status == FAILED and test not in after:
            report["FAIL_TO_PASS"].append(test)
    return report


@dataclass(frozen=True)
class RepoImage:
    """The one image, or why it could not be made; ``build_s`` is the whole build's wall time."""

    tag: str
    python: str
    commit: str
    ok: bool
    build_s: float
    detail: str


@dataclass(frozen=True)
class Outcome:
    """One candidate's verdict under the baseline, with its two logs' labels."""

    candidate_id: str
    kept: bool
    reason: str  # "" when kept
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_s: float  # the two suite runs' seconds


def _file_tar(path: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_requirements(repo_path: str, tree: str) -> list[str]:
    """The root-level test/dev requirement files of ``tree``."""
    names = git(repo_path, "ls-tree", "--name-only", tree).decode().splitlines()
    return sorted(name for name in names if TEST_REQUIREMENTS.match(name))


def gold_tree(repo_path: str, candidate: Candidate) -> str:
    return apply_patches(repo_path, candidate.base_commit, [candidate.test_patch, candidate.patch])


def build_repo_image(
    sandbox: Sandbox,
    params: EnvironmentParams,
    repo_path: str,
    newest: Candidate,
    python: str,
    tag: str,
) -> RepoImage:
    """SWE-smith's recipe with pip, in one networked container, committed once as ``tag``."""
    started = time.monotonic()
    tree = gold_tree(repo_path, newest)
    steps = ["python3 -m venv /venv", "python -m pip install -e .", "pip install pytest"]
    steps += [f"pip install -r {shlex.quote(f)}" for f in test_requirements(repo_path, tree)]
    with sandbox.session(build_session_spec(base_image_tag(python), params)) as session:
        session.put_archive(archive(repo_path, tree, prefix="repo/"))
        if params.ca_bundle:
            with open(params.ca_bundle, "rb") as handle:
                session.put_archive(_file_tar(CA_FILE, handle.read()))
        deadline = started + params.build_timeout_s
        for step in steps:
            remaining = max(deadline - time.monotonic(), 1)
            result = session.exec(VENV_PATH + step, timeout_s=remaining, workdir="/repo")
            if result.timed_out or result.exit_code != 0:
                why = "timed out" if result.timed_out else f"exit {result.exit_code}"
                tail = result.output.strip().splitlines()[-1:] or [""]
                seconds = time.monotonic() - started
                return RepoImage(
                    tag, python, newest.meta.commit, False, seconds, f"{step}: {why}: {tail[0]}"
                )
        tracked = git(repo_path, "ls-tree", "-r", "-z", "--name-only", tree)
        session.put_archive(_file_tar(TRACKED, tracked))
        session.commit(tag)
    return RepoImage(tag, python, newest.meta.commit, True, time.monotonic() - started, "")


def run_suite(
    sandbox: Sandbox, image: str, repo_path: str, tree: str, timeout_s: float
) -> ExecResult:
    """A fresh container of ``image``, ``tree`` over the image's commit, one full suite run."""
    with sandbox.session(SessionSpec(image=image)) as session:
        _check_out(session, repo_path, tree)
        return session.exec(VENV_PATH + TEST_CMD, timeout_s=timeout_s, workdir="/repo")


def _check_out(session: Session, repo_path: str, tree: str) -> None:
    session.exec(f"xargs -0 -r rm -f -- < {TRACKED}", timeout_s=120, workdir="/repo")
    session.put_archive(archive(repo_path, tree, prefix="repo/"))


def validate_candidate(
    sandbox: Sandbox, image: str, repo_path: str, candidate: Candidate, timeout_s: float
) -> Outcome:
    """Base + test changes, then with the fix: one full run each, labels from the two logs."""
    cid = candidate.candidate_id
    try:
        base = apply_patches(repo_path, candidate.base_commit, [candidate.test_patch])
        gold = gold_tree(repo_path, candidate)
    except UserError as exc:
        return Outcome(cid, False, exc.reason or "patch_does_not_apply", (), (), 0.0)
    runs = [run_suite(sandbox, image, repo_path, tree, timeout_s) for tree in (base, gold)]
    seconds = sum(run.duration_s for run in runs)
    if any(run.timed_out for run in runs):
        return Outcome(cid, False, "timeout", (), (), seconds)
    if not parse_log_pytest(runs[1].output):
        return Outcome(cid, False, "suite_did_not_run", (), (), seconds)
    report = valid_report(runs[0].output, runs[1].output)
    f2p, p2p = tuple(sorted(report["FAIL_TO_PASS"])), tuple(sorted(report["PASS_TO_PASS"]))
    if not f2p:
        return Outcome(cid, False, "no_fail_to_pass", (), p2p, seconds)
    return Outcome(cid, True, "", f2p, p2p, seconds)
