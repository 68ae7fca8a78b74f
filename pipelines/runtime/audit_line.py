"""The summary's ``audit`` line: how often a kept bug's covering tests gave its full run's answer.

validate counts ``audit_agreed`` and ``audit_disagreed`` (``verifiers/validation/mutants.py``,
``AuditBook``); ``fold`` turns the two counters into one line, the measured agreement.
"""

from __future__ import annotations

NAMES = ("audit_agreed", "audit_disagreed")


def fold(extra: dict[str, object]) -> None:
    """Replace the two counters by ``audit: N agreed, M disagreed`` (nothing when neither ran)."""
    found = [extra.pop(name, None) for name in NAMES]
    if all(value is None for value in found):
        return
    agreed, disagreed = (int(value or 0) for value in found)  # type: ignore[call-overload]
    extra["audit"] = f"{agreed} agreed, {disagreed} disagreed"
