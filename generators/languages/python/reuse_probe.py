"""Python's probe of a reuse: a site's tree collected in another profile's image.

The same collection the environment stage runs at every profile's setup commit
(``prepare.py``'s ``_collect``), with the site's own layout (where its suite runs from:
``suite_layout.py``) and the donor's own flags (its ``-W`` and unittest options, not its layout
and not its ``--ignore``s), judged stricter than a build is: a build may leave out a module that
cannot import, a reuse may not (the site's own profile might import it), so any collection
error, a conftest that fails, an unknown option, tests that import a copy of the project from
outside /repo, a timeout or no test at all refuse the reuse.
"""

from __future__ import annotations

import dataclasses
import shlex

from trajforge.generators.languages.python.profile import TEST_CMD
from trajforge.generators.languages.python.suite_layout import without_layout
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params
from trajforge.verifiers.collection import Collection, collect
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive

IGNORE = "--ignore="


def probe_reuse(
    sandbox: Sandbox,
    donor: EnvProfile,
    site: EnvProfile,
    repo_path: str,
    commit: str,
    params: Params,
) -> tuple[EnvProfile | None, int, str]:
    """(donor's profile testing ``commit`` with the site's layout and the donor's flags, tests
    collected, "") when the tree collects cleanly in the donor's image; else (None, 0, why)."""
    flags = " ".join(
        part for part in (layout_of(site.test_cmd), donor_flags(donor.test_cmd)) if part
    )
    tree = archive(repo_path, commit, prefix="repo/")
    with sandbox.session(SessionSpec(image=donor.image)) as session:
        collection = collect(session, flags, params.validate.test_timeout_s, tree)
    why = refusal(collection)
    if why:
        return None, 0, why
    test_cmd = " ".join(part for part in (TEST_CMD, flags) if part)
    return dataclasses.replace(donor, test_cmd=test_cmd, excluded=()), collection.collected, ""


def donor_flags(test_cmd: str) -> str:
    """The donor's own options after pytest's command, less its layout and the modules it left
    out (both are its site's, not another's)."""
    rest = test_cmd.removeprefix(TEST_CMD)
    kept = [part for part in without_layout(shlex.split(rest)) if not part.startswith(IGNORE)]
    return " ".join(shlex.quote(part) for part in kept)


def layout_of(detected_cmd: str) -> str:
    """A detected profile's layout options: what ``detect_profile`` put after pytest's command
    (nothing has been repaired or left out yet)."""
    return detected_cmd.removeprefix(TEST_CMD).strip()


def refusal(collection: Collection) -> str:
    """Why the collection does not allow a reuse, in one line; "" when it does."""
    if collection.timed_out:
        return "collecting the suite timed out"
    if collection.foreign:
        return f"the tests import {collection.foreign[0]}, not /repo"
    if collection.unknown_options:
        return f"pytest does not know {' '.join(collection.unknown_options)}"
    failing = collection.conftest_error or (collection.errors[0] if collection.errors else None)
    if failing is not None:
        return f"{failing.path} cannot be collected: {failing.error}"
    if collection.collected == 0:
        return "pytest collects no tests"
    return ""
