"""Loading a JSON report: size-capped, one ``ReportError`` line for anything that is not JSON."""

from __future__ import annotations

import json
from typing import Any

from trajforge.verifiers.reports.ids import ReportError, check_size


def load_object(text: str | bytes, what: str) -> dict[str, Any]:
    check_size(text, what)
    try:
        report = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ReportError(f"the {what} report is not JSON ({str(exc)[:120]})") from None
    if not isinstance(report, dict):
        raise ReportError(f"the {what} report is not a JSON object")
    return report
