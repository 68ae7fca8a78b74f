"""Does an exploration task replay? Its actions, again in a fresh container, reach its end state.

An exploration task's check is executable: the sha256 of the files its actions wrote and of the
output of its ``bash``/``view`` steps. The explorer records that state with ``capture_end_state``
and ``replay`` recomputes it with ``end_state``, the one hashing function both use, so recording
and checking cannot drift apart. Outputs are normalized only for what never carries meaning
(trailing whitespace, memory addresses); timestamps and random numbers are left alone, so a task
whose output is not reproducible fails with ``output_differs`` and is dropped.

Verdict reasons: ``replayed``, ``output_differs``, ``files_differ``, ``action_failed`` (a call is
refused or a command times out: the recorded actions hold only calls that ran), ``sandbox_error``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from trajforge.schemas.explore_task import DELETED, ExploreTask, ReplayAction
from trajforge.verifiers.sandbox.base import REPO_DIR, Sandbox, Session, SessionSpec
from trajforge.verifiers.sandbox.workspace import StepOutcome, Workspace

CHECKED_TOOLS = ("bash", "view")  # steps whose output is part of the check
WRITING_TOOLS = ("create", "str_replace")  # steps whose "path" argument is part of the check
TIMEOUT_MARK = "[command timed out after "  # what Workspace appends to a killed command's output
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


class Observed(Protocol):
    """A step's result: ``StepOutcome`` from Workspace.run and ``Step`` from the agent loop."""

    @property
    def observation(self) -> str: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def changed_files(self) -> tuple[str, ...]: ...
    @property
    def error(self) -> str | None: ...


@dataclass(frozen=True)
class ReplayVerdict:
    ok: bool
    reason: str  # replayed | output_differs | files_differ | action_failed | sandbox_error
    mismatches: list[str] = field(default_factory=list)


def normalize_output(text: str) -> str:
    lines = [_ADDRESS.sub("0x?", line.rstrip()) for line in text.splitlines()]
    return "\n".join(lines).rstrip("\n")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def step_failure(outcome: Observed) -> str | None:
    """Why a step cannot be part of a replayable run (refused or timed out), else None."""
    if outcome.error is not None:
        return f"refused: {outcome.error}"
    if outcome.exit_code == -9 or TIMEOUT_MARK in outcome.observation:
        return "timed out"
    return None


def end_state(
    session: Session, paths: Iterable[str], outcomes: Sequence[Observed], steps: Iterable[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(path -> sha256 | "<deleted>", step -> sha256 of its normalized output): the check."""
    files = {}
    for path in paths:
        data = session.read_file(_absolute(path))
        files[path] = DELETED if data is None else sha256(data)
    outputs = {}
    for step in steps:
        if step.isdigit() and int(step) < len(outcomes):
            outputs[step] = sha256(normalize_output(outcomes[int(step)].observation).encode())
    return files, outputs


def checked_paths(actions: Sequence[ReplayAction], outcomes: Sequence[Observed]) -> list[str]:
    """Files the actions wrote by path, and every file of /repo that changed (repo-relative)."""
    paths = set(outcomes[-1].changed_files) if outcomes else set()
    for action in actions:
        if action.tool in WRITING_TOOLS:
            try:
                path = json.loads(action.arguments).get("path")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(path, str) and path:
                absolute = posixpath.normpath(_absolute(path))
                paths.add(absolute.removeprefix(f"{REPO_DIR}/"))
    return sorted(paths)


def checked_steps(actions: Sequence[ReplayAction], outcomes: Sequence[Observed]) -> list[str]:
    pairs = zip(actions, outcomes, strict=False)
    return [
        str(index)
        for index, (action, outcome) in enumerate(pairs)
        if action.tool in CHECKED_TOOLS and step_failure(outcome) is None
    ]


def capture_end_state(
    session: Session, actions: Sequence[ReplayAction], outcomes: Sequence[Observed]
) -> tuple[dict[str, str], dict[str, str]]:
    """The explorer's record of where its actions ended: (expected_files, expected_outputs)."""
    return end_state(
        session, checked_paths(actions, outcomes), outcomes, checked_steps(actions, outcomes)
    )


def run_actions(
    workspace: Workspace, actions: Sequence[ReplayAction], stop_on_failure: bool = False
) -> list[StepOutcome]:
    """Each action through ``Workspace.run``, in order (stopping after a failed one if asked)."""
    outcomes = []
    for action in actions:
        outcomes.append(workspace.run(action.tool, action.arguments))
        if stop_on_failure and step_failure(outcomes[-1]) is not None:
            break
    return outcomes


def replay(
    sandbox: Sandbox,
    image: str,
    start_tar: bytes,
    task: ExploreTask,
    command_timeout_s: float,
    max_observation_chars: int,
) -> ReplayVerdict:
    """Run ``task.actions`` in a fresh session of ``image`` started from ``start_tar`` (the
    checkout under ``repo/``) and compare the end state with the task's."""
    try:
        with sandbox.session(SessionSpec(image)) as session:
            session.put_archive(start_tar, "/")
            workspace = Workspace(session, command_timeout_s, max_observation_chars)
            workspace.open()
            outcomes = run_actions(workspace, task.actions, stop_on_failure=True)
            if outcomes and (why := step_failure(outcomes[-1])) is not None:
                step = len(outcomes) - 1
                detail = f"step {step} ({task.actions[step].tool}): {why}"
                return ReplayVerdict(False, "action_failed", [detail])
            files, outputs = end_state(
                session, task.expected_files, outcomes, task.expected_outputs
            )
    except Exception as exc:  # the engine, the image, the container: nothing the task decides
        return ReplayVerdict(False, "sandbox_error", [f"{type(exc).__name__}: {exc}"[:300]])
    output_diffs = [
        f"step {step}: output differs{_tail(outcomes, step)}"
        for step, digest in sorted(task.expected_outputs.items(), key=_step_order)
        if outputs.get(step) != digest
    ]
    file_diffs = [
        f"{path}: expected {digest[:12]}, now {files[path][:12]}"
        for path, digest in sorted(task.expected_files.items())
        if files[path] != digest
    ]
    if output_diffs:
        return ReplayVerdict(False, "output_differs", output_diffs + file_diffs)
    if file_diffs:
        return ReplayVerdict(False, "files_differ", file_diffs)
    return ReplayVerdict(True, "replayed")


def _absolute(path: str) -> str:
    return path if path.startswith("/") else f"{REPO_DIR}/{path}"


def _step_order(item: tuple[str, str]) -> tuple[int, str]:
    return len(item[0]), item[0]


def _tail(outcomes: Sequence[Observed], step: str) -> str:
    if not (step.isdigit() and int(step) < len(outcomes)):
        return " (no such step)"
    text = normalize_output(outcomes[int(step)].observation)
    return f" (now: {text[-120:]!r})"
