"""Reuse an environment before building one: a release history needs about one image per
toolchain era, not one per release.

A site whose evidence picks a profile not built yet first tries the recipe of a profile already
built for the same repository (the nearest in history, on the same toolchain line: the
language's ``toolchain_line``, "python 3.11", "node 18", with the same services), built at the
site's own commit (``on_site``): every layer but the commit's comes from the donor's build
cache (base, system packages, tools, and the dependencies when the site declares the same), and
the commit's layer installs the site's own tree, so its installed metadata (a version
``importlib.metadata`` reads, entry points) and its generated files are the site's, not the
donor's (a donor's image run with another tree kept the donor's version: toolz 1.1's
``test_has_version`` failed in 0.12.1's image). The language's probe then decides in that image
(``Language.probe_reuse``: Python's collection probe, no collection error allowed; Go's offline
package load); a language without a probe is never reused. A refusal is one line and the site's
own profile is built as before.

Exactness is not traded: a seeded share of reused profiles (``environment.reuse_audit``) also
builds its own profile, and the clean suite runs at the site's commit in both images; their
statuses, test by test, must be the same. Where the items have verdicts (validate's candidates)
the stage's audit also compares the first mined candidate's verdict in both images (kept or
not, FAIL_TO_PASS, PASS_TO_PASS). A disagreement switches the repository back to per-profile
builds for the rest of the run, and is counted (``reuse_audit_disagreed``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from dataclasses import dataclass

from trajforge.generators.environments.image import build_recipe, image_sizes, recipe_digest
from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.environments.recipe import RECIPE_LABEL, image_name
from trajforge.generators.environments.recipe_site import keep_build_log
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive
from trajforge.verifiers.test_runner import Reading, run_tests, with_test_limit

REUSED = "reused"  # the status of a site's own profile whose image was not built
# bump when what a reused image is changes: every reused image's id changes too
REUSE_FORMAT = "reuse-v2"  # v2: the donor's recipe built at the site's commit (v1: its image)


@dataclass(frozen=True)
class Donor:
    """A profile built for a repository: where it sits in history and its toolchain line."""

    order: tuple
    line: str
    prepared: Prepared


class ReuseBook:
    """Per repository, the profiles built so far and whether reuse is still on; one book per
    worker, shared by its pool's threads (a repository's profiles are prepared in one)."""

    def __init__(self, share: float, seed: int) -> None:
        self.share, self.seed = share, seed
        self.lock = threading.Lock()
        self.built: dict[str, list[Donor]] = {}
        self.off: set[str] = set()

    def donor(self, repo: str, line: str, order: tuple) -> Prepared | None:
        """The built profile nearest ``order`` in the repository's history on ``line``: the
        latest before it, else the earliest after it; None when there is none or reuse is off."""
        with self.lock:
            if repo in self.off:
                return None
            same = [d for d in self.built.get(repo, []) if d.line == line]
        before = [d for d in same if d.order <= order]
        if before:
            return max(before, key=lambda d: d.order).prepared
        after = [d for d in same if d.order > order]
        return min(after, key=lambda d: d.order).prepared if after else None

    def add(self, repo: str, line: str, order: tuple, prepared: Prepared) -> None:
        with self.lock:
            self.built.setdefault(repo, []).append(Donor(order, line, prepared))

    def audits(self, profile_id: str) -> bool:
        """Whether this reuse is audited: the seeded share (0: none, 1: every one)."""
        return _draw(self.seed, profile_id) < self.share

    def record(self, repo: str, agreed: bool) -> None:
        with self.lock:
            if not agreed:
                self.off.add(repo)


def reuse_line(toolchain: str, profile: EnvProfile) -> str:
    """The line a donor must share with a site: the language's toolchain line, the services
    its image starts and their settings (a suite that expects Redis never runs in an image
    without it, nor one that expects database ``app_test`` in an image without that database);
    "" (the language never reuses) stays ""."""
    if not toolchain or not profile.services:
        return toolchain
    settings = f" ({' '.join(profile.service_env)})" if profile.service_env else ""
    return f"{toolchain} with {' '.join(profile.services)}{settings}"


def _draw(seed: int, profile_id: str) -> float:
    """A number in [0, 1) fixed by the seed and the profile: the same reuses are audited in
    every run (as validate's covering-mode audit draws its bugs)."""
    digest = hashlib.sha256(f"reuse:{seed}:{profile_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def on_site(donor: EnvProfile, commit: str, registry: str | None) -> EnvProfile:
    """The donor's recipe at the site's ``commit``: an environment of its own (id, image, setup
    commit), which a task row names and anyone rebuilds from the row as from any other."""
    profile_id = content_id(REUSE_FORMAT, donor.profile_id, commit, length=16)
    return dataclasses.replace(
        donor,
        profile_id=profile_id,
        image=image_name(registry, profile_id),
        image_digest="",
        image_bytes=0,
        setup_commit=commit,
        reused_from=donor.profile_id,
    )


def build_on_site(
    store: ImageStore, site: EnvProfile, repo_path: str, params: Params
) -> tuple[EnvProfile | None, str]:
    """(``site``, "") with its image here: kept when its recipe label says it was built from this
    recipe at this commit, else built (its cached layers are the donor's); (None, why in one
    line) when the donor's recipe does not build at the site's commit (the log is kept under
    ``<cache_dir>/build-logs/``). A fault of the machine or an image over the cap is raised."""
    digest = recipe_digest(repo_path, site.recipe, site.profile_id, site.setup_commit)
    info = store.image_info(site.image)
    if info is not None and info.labels.get(RECIPE_LABEL) == digest:
        return dataclasses.replace(site, status="built", build_s=0.0), ""
    started = time.monotonic()
    result = build_recipe(
        store, site.image, site.recipe, site.profile_id, site.setup_commit, repo_path,
        params.environment, sizes=image_sizes(params),
    )  # fmt: skip
    if not result.ok:
        keep_build_log(params, site.profile_id, result.log)
        last = next((line for line in reversed(result.log.splitlines()) if line.strip()), "")
        return None, (
            f"the donor's recipe does not build at this commit: {last.strip()[:200]} "
            f"(raw log: <cache_dir>/build-logs/{site.profile_id}.log)"
        )
    built_s = round(time.monotonic() - started, 3)
    return dataclasses.replace(site, status="built", build_s=built_s, log=result.log[-4000:]), ""


def own_record(own: EnvProfile, ready: EnvProfile) -> EnvProfile:
    """The environment record of a site's own profile whose items run in another's image: its
    id and evidence, the image they run in, and where it came from. ``own.build_s``: what an
    audit spent building the profile's own image (0 when not audited), so a run's build
    seconds count the audit's builds too."""
    return dataclasses.replace(
        own,
        status=REUSED,
        image=ready.image,
        image_digest=ready.image_digest,
        recipe=ready.recipe,
        setup_commit=ready.setup_commit,
        test_cmd=ready.test_cmd,
        reused_from=ready.reused_from,
        log=f"reused the image of profile {ready.reused_from} ({ready.image})",
        build_s=own.build_s,
    )


def clean_statuses(
    sandbox: Sandbox,
    profile: EnvProfile,
    reading: str | Reading,
    repo_path: str,
    commit: str,
    timeout_s: float,
    per_test_timeout_s: int,
) -> dict[str, str] | None:
    """The clean suite's status of each test at ``commit`` in the profile's image; None when
    the suite did not run (no verdict rests on it)."""
    test_cmd = with_test_limit(profile.test_cmd, profile.install, per_test_timeout_s)
    ctx = Reading.of(reading).context("reuse-audit", profile.profile_id, test_cmd, timeout_s)
    tree = archive(repo_path, commit, prefix="repo/")
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(tree, dest="/")
        run = run_tests(session, ctx, "clean", 0)
    if not run.suite_ran:
        return None
    return {test.test_id: test.status for test in run.tests}


def disagreement(reused_run: dict[str, str] | None, own_run: dict[str, str] | None) -> str:
    """Why the two clean runs disagree, in one line; "" when they agree test by test."""
    if reused_run is None or own_run is None:
        where = "the reused image" if reused_run is None else "its own image"
        return f"the clean suite did not run in {where}"
    differ = sorted(
        test
        for test in reused_run.keys() | own_run.keys()
        if reused_run.get(test) != own_run.get(test)
    )
    if not differ:
        return ""
    first = differ[0]
    return (
        f"{len(differ)} tests differ, first {first}: {reused_run.get(first, 'absent')} in the "
        f"reused image, {own_run.get(first, 'absent')} in its own"
    )
