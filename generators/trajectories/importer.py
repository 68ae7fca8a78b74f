"""Agent trajectories from other tools, as trajforge Trajectories, and SWE-bench verdicts on them.

``READERS`` maps a ``--format`` name to the function that reads that tool's files, the way
SWE-bench picks a log parser per repository: adding a format is one function and one entry.
Every reader takes ``(path, bytes)`` and yields a Trajectory per run it finds, or a Rejection
for each file or row it cannot read, so an import always goes on past bad input. The readers
(``generators/trajectories/formats/``) only parse; walking directories and writing tables is the
``import-trajectories`` command's (``pipelines/stages/import_trajectories.py``).

An imported run is unverified (``resolved`` None) unless its format says otherwise (nebius
``target``) or a SWE-bench evaluation report is applied with ``apply_report``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trajforge.generators.trajectories.formats.common import Result
from trajforge.generators.trajectories.formats.mini_swe_agent import read_mini_swe_agent
from trajforge.generators.trajectories.formats.nebius import read_nebius
from trajforge.generators.trajectories.formats.swe_agent import read_swe_agent
from trajforge.schemas.errors import UserError
from trajforge.schemas.trajectory import Trajectory

Reader = Callable[[str, bytes], Iterator[Result]]

READERS: dict[str, Reader] = {
    "swe-agent": read_swe_agent,
    "mini-swe-agent": read_mini_swe_agent,
    "nebius": read_nebius,
}
# What a directory is searched for, per format (an explicit file is read whatever its name).
SUFFIXES: dict[str, tuple[str, ...]] = {
    "swe-agent": (".traj",),
    "mini-swe-agent": (".traj.json",),
    "nebius": (".parquet", ".jsonl"),
}
PASSED, FAILED = "PASSED", "FAILED"
# Run-level report (SWE-bench ``make_run_report``): ids graded False. ``error_ids`` and
# ``incomplete_ids`` were never graded, so they stay unverified.
UNRESOLVED_KEYS = ("unresolved_ids", "empty_patch_ids")


@dataclass(frozen=True)
class Verdict:
    resolved: bool
    test_report: dict[str, str] | None = None  # None: the report does not list tests


def report_verdicts(report: Any, source: str = "report") -> dict[str, Verdict]:
    """Verdicts by instance id from a SWE-bench report, whichever of its shapes it has.

    Per instance (``get_eval_report``): ``{id: {"resolved": bool, "tests_status": {"FAIL_TO_PASS":
    {"success": [...], "failure": [...]}, ...}}}``; tests in ``success`` passed after the patch.
    Per run (``make_run_report``): ``resolved_ids``, ``unresolved_ids``, ``empty_patch_ids``.
    The older SWE-bench/experiments ``results.json``: ``resolved`` and the other id lists.
    """
    if not isinstance(report, dict):
        raise UserError(f"{source}: a {type(report).__name__}, not a SWE-bench report object")
    if "resolved_ids" in report:
        return _id_lists(report, source, ["resolved_ids"], UNRESOLVED_KEYS)
    if isinstance(report.get("resolved"), list):
        others = [k for k, v in report.items() if k != "resolved" and isinstance(v, list)]
        return _id_lists(report, source, ["resolved"], others)
    verdicts = {}
    for instance_id, entry in report.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("resolved"), bool):
            raise UserError(
                f"{source}: entry {instance_id!r} has no boolean `resolved`; pass SWE-bench's "
                "report.json (per instance) or the run report (resolved_ids)"
            )
        verdicts[instance_id] = Verdict(entry["resolved"], _tests(entry.get("tests_status")))
    return verdicts


def _id_lists(
    report: dict[str, Any], source: str, resolved: list[str], unresolved: Iterable[str]
) -> dict[str, Verdict]:
    verdicts: dict[str, Verdict] = {}
    for key in unresolved:
        verdicts.update((i, Verdict(False)) for i in _ids(report, key, source))
    for key in resolved:  # last: an id listed twice counts as resolved, as SWE-bench counts it
        verdicts.update((i, Verdict(True)) for i in _ids(report, key, source))
    return verdicts


def _ids(report: dict[str, Any], key: str, source: str) -> list[str]:
    ids = report.get(key) or []
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise UserError(f"{source}: `{key}` is not a list of instance ids")
    return ids


def _tests(status: Any) -> dict[str, str] | None:
    """Test id -> PASSED/FAILED from ``tests_status``; every category grades the same way."""
    if not isinstance(status, dict):
        return None
    report: dict[str, str] = {}
    for lists in status.values():
        if isinstance(lists, dict):
            report.update((str(t), PASSED) for t in lists.get("success") or ())
            report.update((str(t), FAILED) for t in lists.get("failure") or ())
    return report


def apply_verdicts(
    trajectories: Iterable[Trajectory], verdicts: Mapping[str, Verdict]
) -> list[Trajectory]:
    """Set resolved, reward and (where the report lists tests) test_report by instance id.

    A report grades one prediction per instance; every imported run of that instance gets it,
    so pass the report of the run that produced these trajectories.
    """
    graded = []
    for trajectory in trajectories:
        verdict = verdicts.get(trajectory.instance_id)
        if verdict is not None:
            trajectory = dataclasses.replace(
                trajectory,
                resolved=verdict.resolved,
                reward=1.0 if verdict.resolved else 0.0,
                test_report=trajectory.test_report
                if verdict.test_report is None
                else dict(verdict.test_report),
            )
        graded.append(trajectory)
    return graded


def apply_report(trajectories: Iterable[Trajectory], report_json: Any) -> list[Trajectory]:
    """The trajectories with a SWE-bench report's verdicts on matching instance ids."""
    return apply_verdicts(trajectories, report_verdicts(report_json))
