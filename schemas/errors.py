"""Errors a user can cause. Each carries a short reason code and one line that says what to do.

Stages catch these, count a rejection with ``reason`` and carry on with the other inputs; the CLI
prints ``str(error)`` alone, never a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment: one line naming the input and what to do."""

    reason = "user_error"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class SourceError(UserError):
    reason = "bad_source"


class ParamsError(UserError):
    reason = "bad_params"


class StorageError(UserError):
    """An object store refused or failed a read or write (endpoint, credentials, bucket)."""

    reason = "storage_error"


class SandboxUnavailable(UserError):
    reason = "sandbox_unavailable"
