"""What the tests reported, read from the supervisor's result: statuses and signs of tampering.

The reporter sends one record per test phase the moment pytest makes it, on a pipe the
supervisor drains; nothing sent can be taken back. So the evidence is the first word on each
phase, and a record that tries to add to or overwrite it (a second record for a phase, anything
after ``finish``, a line that is not a record) is a sign that code under test wrote to the
channel: the run is forged. Some reports are not a phase's word and may repeat: a subtest's
(it can only fail its test) and a rerun's (pytest-rerunfailures: the last attempt decides).

Runners without a reporter API (ava, node-tap) send their own TAP instead, in numbered chunks
(``tap``): kept in order, a chunk out of order is tampering; ``tap_runs.py`` reads their text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PHASES = ("setup", "call", "teardown")
OUTCOMES = ("passed", "failed", "skipped")


@dataclass(frozen=True)
class Evidence:
    statuses: dict[str, str]  # test id -> PASSED | FAILED | ERROR | SKIPPED | XFAIL | XPASS
    collection_errors: tuple[str, ...]
    finished: bool  # the reporter's last record arrived (pytest ended its session)
    tampering: tuple[str, ...]  # why the channel cannot be trusted; empty when it can
    tap: tuple[tuple[str, str], ...] = ()  # (file, text) chunks of a runner's TAP, in order


def read_records(text: str) -> Evidence:
    phases: dict[str, dict[str, tuple[str, bool]]] = {}
    subfailed: set[str] = set()
    errors: dict[str, None] = {}
    tampering: list[str] = []
    finished = False
    tap: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        record = _record(line)
        if record is None:
            tampering.append(f"record {number} is not one the reporter writes")
            continue
        if finished:
            tampering.append(f"record {number} came after the session finished")
            continue
        kind = record["t"]
        # "tamper": the seal refused something the tests did (python/in_container/seal.py)
        if kind == "tamper":
            tampering.append(f"the seal: {record['why']}")
        elif kind == "finish":
            finished = True
        elif kind == "collect_error":
            errors[record["id"]] = None
        elif kind == "tap":
            if record["n"] != len(tap):
                tampering.append(f"TAP chunk {record['n']} came where chunk {len(tap)} was due")
                continue
            tap.append((record["file"], record["text"]))
        elif record["sub"] or record["outcome"] not in OUTCOMES:
            if record["sub"] and record["outcome"] == "failed":
                subfailed.add(record["id"])
        else:
            seen = phases.setdefault(record["id"], {})
            if record["when"] in seen:
                tampering.append(f"a second {record['when']} record for {record['id']}")
                continue
            seen[record["when"]] = (record["outcome"], record["xfail"])
    statuses = {test_id: _status(seen) for test_id, seen in phases.items()}
    for test_id in subfailed:  # a failed subtest fails its test, whatever the test's own word
        statuses[test_id] = "FAILED"
    return Evidence(statuses, tuple(errors), finished, tuple(tampering[:20]), tuple(tap))


def _record(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    kind = record.get("t")
    if kind == "finish":
        return record if set(record) == {"t"} else None
    if kind == "tamper":
        return record if set(record) == {"t", "why"} and isinstance(record["why"], str) else None
    if kind == "collect_error":
        return record if set(record) == {"t", "id"} and isinstance(record["id"], str) else None
    if kind == "tap":
        said = (record.get("n"), record.get("file"), record.get("text"))
        shaped = set(record) == {"t", "n", "file", "text"} and type(said[0]) is int
        return record if shaped and isinstance(said[1], str) and isinstance(said[2], str) else None
    shape = {"t", "id", "when", "outcome", "xfail", "sub"}
    if (
        kind == "report"
        and set(record) == shape
        and isinstance(record["id"], str)
        and record["when"] in PHASES
        and isinstance(record["outcome"], str)
        and isinstance(record["xfail"], bool)
        and isinstance(record["sub"], bool)
    ):
        return record
    return None


def _status(seen: dict[str, tuple[str, bool]]) -> str:
    """One test's status from its phases, as pytest's own summary words it."""
    call = seen.get("call")
    if call is not None and call[0] == "failed":
        return "FAILED"
    if any(seen.get(phase, ("", False))[0] == "failed" for phase in ("setup", "teardown")):
        return "ERROR"
    if call is None:
        skipped = seen.get("setup", ("", False))
        if skipped[0] == "skipped":
            return "XFAIL" if skipped[1] else "SKIPPED"
        return "MISSING"
    if call[0] == "skipped":
        return "XFAIL" if call[1] else "SKIPPED"
    return "XPASS" if call[1] else "PASSED"
