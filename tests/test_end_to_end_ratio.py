"""benchmarks/end_to_end.py's last line: a ratio only when both sides measured a cost per task."""

from __future__ import annotations

from end_to_end import Side, comparison


def _side(name: str, kept: int, candidates: int = 4, **extra) -> Side:
    return Side(
        name, candidates, 600.0, 100.0, 300.0,
        {f"c{i}": ("tests/test_a.py::test_x",) for i in range(kept)},
        extra.pop("reasons", {}), 2, **extra,
    )  # fmt: skip


def test_a_ratio_when_both_sides_kept_tasks() -> None:
    ratio, line = comparison(_side("trajforge", 4), _side("baseline", 2))
    assert ratio == 2.0 and line == "tasks_per_core_hour_ratio: 2.00"


def test_a_baseline_that_kept_nothing_makes_the_comparison_void_not_infinite() -> None:
    """Tried on tenacity's releases, the one-image baseline installed no tornado and kept 0 of
    4; the benchmark printed ``inf``."""
    theirs = _side("baseline", 0, reasons={"install_failed": 4})
    ratio, line = comparison(_side("trajforge", 3), theirs)
    assert ratio is None
    assert line.startswith("tasks_per_core_hour_ratio: void: ")
    assert "kept 0 of 4 candidates (rejected: install_failed 4)" in line and "inf" not in line


def test_a_baseline_stopped_by_a_full_disk_is_the_machine_not_the_repository() -> None:
    theirs = _side(
        "baseline", 1, reasons={"install_failed": 3},
        why_not={"c9": "install_failed: OSError: [Errno 28] No space left on device"},
    )  # fmt: skip
    ratio, line = comparison(_side("trajforge", 3), theirs)
    assert ratio is None
    assert "stopped by the machine (install_failed: OSError: [Errno 28] No space left" in line


def test_a_side_whose_every_candidate_met_a_sandbox_error_is_void_not_zero() -> None:
    """A more-itertools run whose grader files moved under it: trajforge 5 ``sandbox_error``, 0
    kept; the benchmark printed ``0.00`` as if the repository cost that."""
    ours = _side("trajforge", 0, candidates=5, reasons={"sandbox_error": 5})
    ratio, line = comparison(ours, _side("baseline", 5, candidates=5))
    assert ratio is None
    assert "trajforge was stopped by the machine (sandbox_error 5)" in line
    plain = _side("trajforge", 0, candidates=5, reasons={"tests_failed": 5})
    assert comparison(plain, _side("baseline", 5, candidates=5))[1].endswith(": 0.00")
