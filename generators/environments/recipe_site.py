"""A site whose environment is one recipe built into one image (Go's, JavaScript's): its
detected profile and its build, written once.

Each language says only what differs: its profile format and what decides its image (the
evidence: go.mod and go.sum blobs, package.json's install tables and lock file), its base image,
the line it says before a build, and how a failed build reads. The rest is the same for all: a
profile keyed by the source's identity, the recipe and the test command; an image reused when its
recipe label is the recipe's hash, else built; a failed build ``install_failed`` with one line
(the raw log under ``<cache_dir>/build-logs/``), cached by the profile's id so a rerun does not
build it again. ``RecipeSite`` holds one language's answers and builds its images; it is what
``languages/recipe_language.py`` asks.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.environments.image import build_recipe, image_sizes, recipe_digest
from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.environments.recipe import RECIPE_LABEL, image_name
from trajforge.generators.environments.services import Named, described, with_services
from trajforge.generators.languages.base import Detection
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox
from trajforge.verifiers.test_runner import Reading


@dataclass(frozen=True)
class RecipeSite:
    """How one language's commit becomes a profile, its image and the reading of its runs."""

    # (repo_path, commit, repo, identity, params): the detected profile, not yet built
    profile: Callable[[str, str, str, str, Params], EnvProfile]
    reading: Callable[[EnvProfile], Reading]  # how validate reads its runs
    build_version: str  # the key of its cache of failed builds
    # (profile, docker_host, say): the base image made in Docker's store before a build
    ensure_base: Callable[[EnvProfile, str | None, Callable[[str], None]], object]
    banner: Callable[[EnvProfile], str]  # the line said before a build
    failure: Callable[[EnvProfile, str], str]  # (profile, log): a failed build's line

    def build(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        repo_path: str,
        commit: str,
        params: Params,
        say: Callable[[str], None] = print,
    ) -> Prepared:
        """The profile's image at ``commit``: reused when its recipe label is this recipe's
        hash, else built; a failed build is ``install_failed`` with the language's one line
        (the raw log under ``<cache_dir>/build-logs/``), cached by the profile's id."""
        if not isinstance(sandbox, ImageStore):
            raise UserError(
                f"{profile.language} environments build images: use the docker or podman sandbox",
                reason="no_image_store",
            )
        cache = ContentCache(params.results_cache, "environments")
        key = content_id(self.build_version, profile.profile_id, commit)
        if (known := cache.get(key)) is not None:
            known_profile = from_row(EnvProfile, known["profile"])
            return Prepared(known_profile, known["reason"], known["detail"], 0)
        built = dataclasses.replace(profile, setup_commit=commit, status="built")
        digest = recipe_digest(repo_path, profile.recipe, profile.profile_id, commit)
        info = sandbox.image_info(profile.image) if sandbox.has_image(profile.image) else None
        if info is not None and info.labels.get(RECIPE_LABEL) == digest:
            return Prepared(built, "", "", 0)
        if getattr(sandbox, "name", "") == "docker":
            self.ensure_base(profile, getattr(sandbox, "docker_host", None), say)
        say(self.banner(profile))
        result = build_recipe(sandbox, profile.image, profile.recipe, profile.profile_id, commit,
                              repo_path, params.environment, sizes=image_sizes(params))  # fmt: skip
        if result.ok:
            return Prepared(dataclasses.replace(built, log=result.log[-4000:]), "", "", 0)
        keep_build_log(params, profile.profile_id, result.log)
        cause = f"{profile.repo}: {self.failure(profile, result.log)}"
        failed = Prepared(dataclasses.replace(built, status="failed", log=cause),
                          "install_failed", cause, 0)  # fmt: skip
        cache.put(
            key, {"profile": to_row(failed.profile), "reason": failed.reason, "detail": cause}
        )
        return failed


def detected_profile(
    detection: Detection,
    *,
    profile_format: str,
    repo: str,
    identity: str,
    recipe: str,
    test_cmd: str,
    evidence: str,
    params: Params,
    services: Named,
) -> EnvProfile:
    """The detected (not yet built) profile, keyed by what decides its image; ``services``
    (``services_at``'s at the commit) are started by its image (``with_services``)."""
    recipe = with_services(recipe, services.started, services.environment, services.hosts)
    profile_id = content_id(profile_format, identity, repo, recipe, test_cmd, evidence, length=16)
    return EnvProfile(
        profile_id=profile_id,
        repo=repo,
        python="",
        install=(),
        test_cmd=test_cmd,
        image=image_name(params.environment.registry, profile_id),
        status="detected",
        log="; ".join(filter(None, (detection.why, described(services)))),
        setup_commit="",
        recipe=recipe,
        install_set=detection.package_manager,
        language=detection.language,
        runner=detection.runner,
        runtime=detection.runtime,
        services=services.started,
        service_env=services.environment,
        service_hosts=services.hosts,
    )


def keep_build_log(params: Params, profile_id: str, log: str) -> None:
    """A failed build's whole log, kept where its one line says to look."""
    logs = os.path.join(params.cache_dir, "build-logs")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, f"{profile_id}.log"), "w", encoding="utf-8") as handle:
        handle.write(log)
