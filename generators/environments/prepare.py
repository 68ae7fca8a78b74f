"""What preparing an environment answers, for every language: ``Prepared``, and the callbacks a
``Language.prepare`` is given (``count``, ``fetch``, ``say``).

Each language prepares its own way (Python's ladder of install sets, rungs and repairs is
``generators/languages/python/prepare.py``); the environment stage reads only this answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trajforge.schemas.env_profile import EnvProfile

Count = Callable[..., None]
Fetch = Callable[[str], None]
Say = Callable[[str], None]


@dataclass(frozen=True)
class Prepared:
    """A profile ready to test with (``reason`` empty), or why it is not."""

    profile: EnvProfile  # status "built" when ready, "failed" otherwise
    # "" | install_failed | no_tests | collection_failed | collection_timed_out
    # | wrong_code_under_test
    reason: str
    detail: str  # one line for the user
    collected: int  # tests collected at the setup commit, exclusions applied
