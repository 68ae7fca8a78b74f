"""Each snapshot's environment: its profile detected, and one image per profile, built once.

Shared by validate (candidates) and explore (repository snapshots). Items are keyed by the profile
detected at their commit (a GroupByKey), so each profile's image is built once, at the oldest
commit among its items, and shared by all of them. A profile is keyed by the source's identity
(``RepoRef.identity``: its real path or redacted URL), never its display name, so every item of a
profile comes from one repository and the image's setup commit is a commit of that repository.
A failed build is remembered (by profile and recipe) so a rerun does not try it again; its items
are rejected with the install log's tail.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.environments.profile import detect_profile
from trajforge.generators.environments.registry import fetch_image, image_digest, publish_image
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn, StageFn
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import from_row, to_row
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import ImageStore, RegistryError

PROFILES = "profiles"


@dataclass(frozen=True)
class Site:
    """Where an item's environment comes from: a source at a commit, and how items are ordered."""

    input_id: str  # names the item in rejections
    source: str
    commit: str
    repo: str
    order: tuple = ()  # the profile's image is built at the first item in this order


class DetectProfileFn(StageFn):
    """item -> (profile_id, (profile, item)), detected from the repository at the item's commit."""

    def __init__(self, params: Params, stage: str, locate: Callable[[Any], Site]) -> None:
        super().__init__(params)
        self.STAGE = stage
        self.locate = locate

    def process(self, item: Any):
        site = self.locate(item)
        env = self.params.environment
        try:
            repo = open_source(site.source, SourceOptions.from_params(self.params))
            profile = detect_profile(
                repo.path, site.commit, site.repo,
                default_python=env.default_python, pythons=tuple(env.pythons),
                source=repo.identity, registry=env.registry,
            )  # fmt: skip
        except UserError as exc:
            yield self.reject_error(site.input_id, exc)
            return
        yield profile.profile_id, (profile, item)


class BuildEnvironmentFn(SandboxFn):
    """(profile_id, [(profile, item)]) -> (built profile, item) for each item, or rejections."""

    def __init__(self, params: Params, stage: str, locate: Callable[[Any], Site]) -> None:
        super().__init__(params)
        self.STAGE = stage
        self.locate = locate

    def setup(self) -> None:
        super().setup()
        self.failures = ContentCache(self.params.cache_dir, "build-failures")

    def process(self, element: tuple[str, Iterable[tuple[EnvProfile, Any]]]):
        profile_id, members = element
        pairs = sorted(members, key=lambda pair: self.locate(pair[1]).order)
        profile, first = pairs[0]
        items = [item for _, item in pairs]
        sites = [self.locate(item) for item in items]
        if self.unavailable is not None:
            for site in sites:
                yield self.reject_unavailable(site.input_id)
            return
        try:
            built = self._build(profile, self.locate(first))
        except UserError as exc:
            for site in sites:
                yield self.reject_error(site.input_id, exc)
            return
        yield beam.pvalue.TaggedOutput(PROFILES, built)
        if built.status != "built":
            tail = "\n".join(built.log.strip().splitlines()[-15:])
            for site in sites:
                detail = f"{site.repo}: installing profile {profile_id} failed\n{tail}"
                yield self.reject(site.input_id, "install_failed", detail)
            return
        for item in items:
            yield built, item

    def _build(self, profile: EnvProfile, first: Site) -> EnvProfile:
        failure_key = profile.profile_id  # the recipe is in the id: a new recipe, a new try
        known = self.failures.get(failure_key)
        if known is not None:
            return from_row(EnvProfile, known)
        repo = open_source(first.source, SourceOptions.from_params(self.params))
        logs = os.path.join(self.params.cache_dir, "build-logs")
        assert self.sandbox is not None
        env = self.params.environment
        store = self.sandbox if isinstance(self.sandbox, ImageStore) else None
        if store is not None:  # pulled when the registry has it: no build below
            self._registry(profile, lambda: fetch_image(store, profile.image, env, self.count))
        existed = self.sandbox.has_image(profile.image)  # else this call builds it
        built = build_env_image(self.sandbox, profile, repo.path, env, logs)
        if not existed:
            self.count("images_built")
        if built.status == "failed":
            self.failures.put(failure_key, to_row(built))
            return built
        if store is None:
            return built
        digest = self._registry(profile, lambda: publish_image(store, built.image, env, self.count))
        return dataclasses.replace(built, image_digest=digest or image_digest(store, built.image))

    def _registry(self, profile: EnvProfile, step: Callable[[], str]) -> str:
        """A registry step; a registry that is down or refuses is one line and a count, and the
        stage goes on with what it builds here."""
        try:
            return step()
        except RegistryError as exc:
            progress.say(f"{self.STAGE}: profile {profile.profile_id}: {exc}")
            self.count("registry_errors")
            return ""


class BuildEnvironments(beam.PTransform):
    """Items -> {"ready": (built EnvProfile, item), "profiles", "rejections"}.

    ``locate`` says where each item's environment comes from (see ``Site``).
    """

    def __init__(self, params: Params, stage: str, locate: Callable[[Any], Site]) -> None:
        super().__init__()
        self.params, self.stage, self.locate = params, stage, locate

    def expand(self, items):
        args = (self.params, self.stage, self.locate)
        profiled = items | "DetectProfile" >> beam.ParDo(DetectProfileFn(*args)).with_outputs(
            REJECTED, main="profiled"
        )
        envs = (
            profiled.profiled
            | "GroupByProfile" >> beam.GroupByKey()
            | "BuildEnvironment"
            >> beam.ParDo(BuildEnvironmentFn(*args)).with_outputs(REJECTED, PROFILES, main="ready")
        )
        rejections = (profiled[REJECTED], envs[REJECTED]) | "EnvRejections" >> beam.Flatten()
        return {"ready": envs.ready, "profiles": envs[PROFILES], "rejections": rejections}
