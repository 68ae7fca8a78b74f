"""The digest of the verifying floor's own code, part of every cached verdict's key.

A verdict (a candidate's validation, an injected bug's, a gold patch's grading, a model patch's)
is cached by what decides it: the image, the trees, the command, the limits, and the code that
ran the tests and read what they said. That code is this package (the programs shipped into
containers and the host side that reads their reports), so its bytes are in every key: a fix to
it is never answered from verdicts the broken code gave. Versions bumped by hand missed two
such fixes on one day (the JS guard that failed every suite loading depd, the fork server that
rejected every injected bug on Python 3.8): their caches replayed the wrong verdicts.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


@functools.cache
def verifier_digest() -> str:
    """This package's ``code_digest`` (read once per process)."""
    return code_digest(PACKAGE)


def code_digest(root: Path) -> str:
    """sha256 of every file under ``root`` but compiled ones, each with its path (16 hex)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
