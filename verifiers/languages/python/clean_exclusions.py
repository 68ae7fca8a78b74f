"""Test modules that fail to import at a snapshot's clean run, left out so the rest decides.

The environment stage leaves out what cannot be collected at the commit it prepared
(``prepare.py``), but a profile is reused at later commits with the same declarations, and a
test module added there may import what the image lacks. pytest then stops the whole clean run
("Interrupted: 1 error during collection") and every bug of the snapshot would be rejected for one
module. Instead the modules named are left out (``--ignore``), each with pytest's own error line,
and the clean run is made again; the tasks carry them in ``excluded_tests``.
"""

from __future__ import annotations

import dataclasses
import posixpath

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.collection import ignore_flags, parse_collection

AT_CLEAN = "(at the clean run)"


def failed_modules(run: TestRun) -> list[tuple[str, str]]:
    """(path, error) for each test module ``run`` could not import or collect; [] when it
    failed another way, or when a conftest failed (nothing of its folder collects then)."""
    if run.suite_ran or run.timed_out or not run.collection_errors:
        return []
    paths = list(run.collection_errors)
    if any(not p.endswith(".py") or posixpath.basename(p) == "conftest.py" for p in paths):
        return []
    said = {error.path: error.error for error in parse_collection(run.log).errors}
    return [(path, said.get(path) or "could not be imported") for path in paths]


def without_modules(profile: EnvProfile, modules: list[tuple[str, str]]) -> EnvProfile:
    """``profile`` whose runs leave ``modules`` out, each named with its error in ``excluded``."""
    flags = ignore_flags([path for path, _ in modules])
    notes = tuple(f"{path}: {error} {AT_CLEAN}" for path, error in modules)
    return dataclasses.replace(
        profile, test_cmd=f"{profile.test_cmd} {flags}", excluded=(*profile.excluded, *notes)
    )
