"""Each snapshot's environment: its profile detected, and one image per profile, built once.

Shared by validate (candidates) and explore (repository snapshots). Items are keyed by the profile
detected at their commit (a GroupByKey), so each profile's image is built once, at the oldest
commit among its items, and shared by all of them; ``environment.build_workers`` profiles are
prepared at once per worker (a release history needs many). ``prepare_environment`` picks the
install set that builds, repairs what the suite's collection shows missing and leaves out what
still cannot collect (generators/languages/python/prepare.py). A profile is keyed by the source's
identity (``RepoRef.identity``: its real path or redacted URL), never its display name, so every
item of a profile comes from one repository and the image's setup commit is a commit of that
repository. The outcome, failed or not, is cached by the detected profile's id, so a rerun
neither builds nor probes again; a failed profile's items are rejected with the reason in one
line (the raw build log stays in ``<cache_dir>/build-logs/``).

With ``environment.reuse`` (off by default) a repository's profiles on one toolchain line are
prepared in history order in one thread (``chained``), and a profile not built yet first tries
the recipe of the nearest profile built before it on its line, built at its own commit: its
probe decides, an audited share also builds its own and compares clean runs, and the stage's
``LabelAudit`` (validate's) compares verdicts (``generators/environments/reuse.py``). Lines and
repositories prepare at once.

The language of a site is the registry's answer for its commit's tree
(``generators/languages/at_commit.py:language_at``), and the language makes its profile
(``Language.site_profile``: Python's ``detect_profile`` exactly as before; a JavaScript
project's runner, Node and full-suite command) and prepares its environment
(``Language.prepare``: Python's built or pulled, collected and repaired; a JavaScript image from
its recipe).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, NamedTuple

import apache_beam as beam
from trajforge.generators.environments.image import image_bytes
from trajforge.generators.environments.prepare import Count, Prepared
from trajforge.generators.environments.registry import fetch_image, image_digest, publish_image
from trajforge.generators.environments.reuse import (
    ReuseBook,
    build_on_site,
    clean_statuses,
    disagreement,
    on_site,
    own_record,
    reuse_line,
)
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.languages.registry import language_named
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime import progress, reach
from trajforge.pipelines.runtime.pool_work import InFlight, PoolCounts
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn, StageFn
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox.base import ImageStore, RegistryError, Sandbox

PROFILES = "profiles"
# Items per batch for a stage's thread pool (profile groups here, candidates in validate): a
# bundle's items in one batch, so the pool takes the next as soon as a thread is free (a bundle on
# the in-process runner holds all of them).
BATCH = 64


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
        try:
            repo = open_source(site.source, SourceOptions.from_params(self.params))
            language = language_at(repo.path, site.commit)
            profile = language.site_profile(
                repo.path, site.commit, site.repo, repo.identity, self.params
            )
        except UserError as exc:
            yield self.reject_error(site.input_id, exc)
            return
        if self.STAGE == "validate":
            reach.mark(self, "seen", site.repo)
        yield profile.profile_id, (profile, item)


# (sandbox, the site's reused profile, its own built profile, the site's items, repo path): why
# the items' verdicts differ between the two images, "" when the same. A stage whose items have
# verdicts (validate's candidates) gives one; the clean runs' audit is every stage's.
LabelAudit = Callable[[Sandbox, EnvProfile, EnvProfile, list[Any], str], str]


class Built(NamedTuple):
    """One profile's preparation as its pool thread leaves it for the bundle's thread."""

    prepared: Prepared | None
    error: UserError | None  # detection's or the sandbox's one line (each item rejected)
    counts: PoolCounts
    overlapped: bool  # another profile of this worker was being prepared meanwhile
    own: EnvProfile | None = None  # the site's own profile when it reused another's image


class Group(NamedTuple):
    """One profile's items in build order, where each comes from, and its repository here."""

    pairs: list
    sites: list[Site]
    repo_path: str


def chained(entries: list[tuple[str, str, Group]], reuse: bool) -> list[tuple[str, list[Group]]]:
    """(repository identity, groups) per thread of preparation, from (identity, toolchain line,
    group) entries. With reuse, a repository's groups on one line form one chain in history
    order (a profile may reuse the recipe of one prepared before it on its line), and lines
    and repositories go at once; without, every group is its own."""
    if not reuse:
        return [(identity, [group]) for identity, _, group in entries]
    chains: dict[tuple[str, str], list[Group]] = {}
    for identity, line, group in entries:
        chains.setdefault((identity, line), []).append(group)
    return [
        (identity, sorted(chain, key=lambda group: group.sites[0].order))
        for (identity, _), chain in chains.items()
    ]


class BuildEnvironmentFn(SandboxFn):
    """A batch of (profile_id, [(profile, item)]) -> (built profile, item) for each item, or
    rejections; ``environment.build_workers`` profiles prepared at once.

    A release history needs a profile per release or two, and each is a build plus a collection
    probe: one at a time, the other cores wait. The threads only prepare (build, probe, cache,
    push); every output, count and reach mark is made here, in the bundle's own thread, so
    Beam's metrics (kept per thread) see them (``pool_work.py``).
    """

    # A profile's image serves one collection probe here (validate's runs use their own
    # sandbox): a spare container per image would be started and removed unused.
    SPARES = 0

    def __init__(
        self,
        params: Params,
        stage: str,
        locate: Callable[[Any], Site],
        audit: LabelAudit | None = None,
    ) -> None:
        super().__init__(params)
        self.STAGE = stage
        self.locate = locate
        self.audit = audit

    def setup(self) -> None:
        super().setup()
        env = self.params.environment
        self.pool = ThreadPoolExecutor(
            max_workers=env.build_workers, thread_name_prefix="profile-build"
        )
        self.flight = InFlight()
        self.reuse = ReuseBook(env.reuse_audit, env.reuse_seed)  # this worker's, all batches

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)
        super().teardown()

    def process(self, batch: list[tuple[str, Iterable[tuple[EnvProfile, Any]]]]):
        groups = [self._group(members) for _, members in batch]
        if self.unavailable is not None:
            for _, sites in groups:
                for site in sites:
                    yield self.reject_unavailable(site.input_id)
            return
        entries: list[tuple[str, str, Group]] = []
        reuse = self.params.environment.reuse
        for pairs, sites in groups:
            try:  # here, not in the threads: one clone or fetch of a repository at a time
                repo = open_source(sites[0].source, SourceOptions.from_params(self.params))
            except UserError as exc:
                for site in sites:
                    yield self.reject_error(site.input_id, exc)
                continue
            line = self._line(pairs[0][0]) if reuse else ""
            entries.append((repo.identity, line, Group(pairs, sites, repo.path)))
        futures = {
            self.pool.submit(self._prepare_chain, identity, chain): chain
            for identity, chain in chained(entries, reuse)
        }
        for future in as_completed(futures):  # each chain's items go on as it is ready
            for group, built in zip(futures[future], future.result(), strict=True):
                yield from self._built(group, built)

    def _built(self, group: Group, built: Built):
        built.counts.replay(self.count)
        if built.overlapped:
            self.count("profiles_built_concurrently")
        if built.error is not None:
            for site in group.sites:
                yield self.reject_error(site.input_id, built.error)
            return
        assert built.prepared is not None
        if built.own is not None:
            yield beam.pvalue.TaggedOutput(PROFILES, own_record(built.own, built.prepared.profile))
        yield from self._outcome(built.prepared, [item for _, item in group.pairs], group.sites)

    def _group(self, members: Iterable[tuple[EnvProfile, Any]]) -> tuple[list, list[Site]]:
        """A profile's (profile, item) pairs in build order, and where each item comes from."""
        pairs = sorted(members, key=lambda pair: self.locate(pair[1]).order)
        return pairs, [self.locate(item) for _, item in pairs]

    @staticmethod
    def _line(profile: EnvProfile) -> str:
        """The line a donor must share with the profile ("" never reuses: ``reuse_line``)."""
        return reuse_line(language_named(profile.language).toolchain_line(profile), profile)

    def _prepare_chain(self, key: str, chain: list[Group]) -> list[Built]:
        """In a pool thread: a repository's profiles in history order, each reused or built."""
        return [self._prepare_counted(key, group) for group in chain]

    def _prepare_counted(self, key: str, group: Group) -> Built:
        """The profile prepared at its first item (or another's image reused), its counts kept
        for the bundle's thread."""
        counts = PoolCounts()
        profile, first = group.pairs[0][0], group.sites[0]
        line = self._line(profile) if self.params.environment.reuse else ""
        with self.flight.entered() as overlap:
            try:
                donor = self.reuse.donor(key, line, first.order) if line else None
                if donor is not None:
                    found, audit_s = self._reuse(key, donor, group, counts.add)
                    if found is not None:
                        own = dataclasses.replace(profile, build_s=audit_s)
                        return Built(found, None, counts, overlap.seen, own=own)
                prepared = self._prepare(profile, first, group.repo_path, counts.add)
            except UserError as exc:  # a SandboxBroken too: each item a sandbox_error
                return Built(None, exc, counts, overlap.seen)
        if line and prepared.profile.status == "built" and not prepared.reason:
            self.reuse.add(key, line, first.order, prepared)
        return Built(prepared, None, counts, overlap.seen)

    def _reuse(
        self, key: str, donor: Prepared, group: Group, count: Count
    ) -> tuple[Prepared | None, float]:
        """The donor's recipe built at the group's first commit, for the group's profile, when
        its probe passes there (and, when audited, its own profile's clean run agrees), else
        None: build the profile's own; and the seconds the reuse spent building (its image and
        an audit's own image: what the record's build_s says)."""
        assert self.sandbox is not None
        profile, first = group.pairs[0][0], group.sites[0]
        language = language_named(profile.language)
        where = f"{self.STAGE}: profile {profile.profile_id}"
        say = lambda line: progress.say(f"{where}: {line}")  # noqa: E731
        site, why = self._on_site(donor.profile, group, count)
        probed, collected = None, 0
        if site is not None:
            probed, collected, why = language.probe_reuse(
                self.sandbox, site, profile, group.repo_path, first.commit, self.params
            )
        if probed is None:
            count("reuse_refused")
            say(f"not reused from {donor.profile.profile_id} ({why}); building its own")
            return None, 0.0
        assert site is not None  # a probe ran in it
        found, spent = Prepared(probed, "", "", collected), site.build_s
        if not self.reuse.audits(profile.profile_id):
            count("environments_reused")
            return found, spent
        own = self._prepare(profile, first, group.repo_path, count)
        if own.reason or own.profile.status != "built":  # nothing to compare with: kept as is
            count("environments_reused")
            return found, spent + own.profile.build_s
        limits = (self.params.validate.test_timeout_s, self.params.validate.per_test_timeout_s)
        runs = [
            clean_statuses(
                self.sandbox, p, language.reading(p), group.repo_path, first.commit, *limits
            )
            for p in (found.profile, own.profile)
        ]
        differs = disagreement(*runs)
        if not differs and self.audit is not None:  # the verdicts a task would rest on
            items = [item for _, item in group.pairs]
            differs = self.audit(self.sandbox, found.profile, own.profile, items, group.repo_path)
        self.reuse.record(key, agreed=not differs)
        if differs:
            count("reuse_audit_disagreed")
            say(f"reuse audit: {differs}; this repository builds its own profiles from now on")
            return None, 0.0  # its own profile, built now, is used (cached: no second build)
        count("reuse_audit_agreed")
        count("environments_reused")
        return found, spent + own.profile.build_s

    def _on_site(
        self, donor: EnvProfile, group: Group, count: Count
    ) -> tuple[EnvProfile | None, str]:
        """The donor's recipe built at the group's first commit (``reuse.on_site``), measured
        and published as any profile's image; (None, why) when it cannot serve."""
        store = self.sandbox if isinstance(self.sandbox, ImageStore) else None
        if store is None:
            return (
                None,
                "reuse builds the donor's recipe at the site's commit: a backend with images",
            )
        env = self.params.environment
        site = on_site(donor, group.sites[0].commit, env.registry)
        fetch_image(store, site.image, env, count)  # another machine may have built it
        built, why = build_on_site(store, site, group.repo_path, self.params)
        if built is None:
            return None, why
        if built.build_s:
            count("reuse_images_built")
        return measured(store, built, self.params, self.STAGE, count), ""

    def _outcome(self, prepared: Prepared, items: list[Any], sites: list[Site]):
        built = prepared.profile
        if not built.reused_from:  # a reuse's record is its own profile's (``own_record``)
            yield beam.pvalue.TaggedOutput(PROFILES, built)
        if self.STAGE == "validate" and built.status == "built":
            reach.mark(self, "installed", built.repo)
            # a language without a collection probe: validate marks it when its suite runs
            probed = language_named(built.language).probes_collection
            if prepared.reason in ("", "no_tests") and probed:
                reach.mark(self, "collected", built.repo)
        # No tests at the setup commit is no reason to drop the profile's items: a mined fix
        # may add the repository's first tests (each item's own run decides).
        # One line that names the cause (prepare's); the raw build log stays in its file.
        if prepared.reason and prepared.reason != "no_tests":
            detail = prepared.detail
            if prepared.reason == "install_failed":
                detail += f" (raw log: <cache_dir>/build-logs/{built.profile_id}.log)"
            for site in sites:
                yield self.reject(site.input_id, prepared.reason, detail)
            return
        for item in items:
            yield built, item

    def _prepare(self, profile: EnvProfile, first: Site, repo_path: str, count: Count) -> Prepared:
        """The profile's environment: built (or pulled), collected, repaired, cached by its id."""
        assert self.sandbox is not None
        return prepare_profile(
            self.sandbox, profile, repo_path, first.commit, self.params, self.STAGE, count
        )


def prepare_profile(
    sandbox: Sandbox,
    profile: EnvProfile,
    repo_path: str,
    commit: str,
    params: Params,
    stage: str,
    count: Count,
) -> Prepared:
    """A profile's environment at ``commit``: built (or pulled from the registry, and pushed
    there once built), collected, repaired, cached by its id. Validate's environments and
    inject's first coverage run (``inject_coverage.py``) are both made here."""
    env = params.environment
    store = sandbox if isinstance(sandbox, ImageStore) else None
    say = lambda line: progress.say(f"{stage}: {line}")  # noqa: E731
    fetch = None
    if store is not None:  # pulled when the registry has it: no build

        def fetch(image: str) -> None:
            _registry(profile, stage, lambda: fetch_image(store, image, env, count), count)

    prepared = language_named(profile.language).prepare(
        sandbox, profile, repo_path, commit, params, count=count, fetch=fetch, say=say,
    )  # fmt: skip
    built = prepared.profile
    if store is None or built.status != "built":
        return prepared
    return dataclasses.replace(prepared, profile=measured(store, built, params, stage, count))


def measured(
    store: ImageStore, built: EnvProfile, params: Params, stage: str, count: Count
) -> EnvProfile:
    """A built profile with its image's digest (pushed first when ``environment.push`` is set)
    and its size on disk: what a task row names."""
    push = lambda: publish_image(store, built.image, params.environment, count)  # noqa: E731
    digest = _registry(built, stage, push, count) or image_digest(store, built.image)
    return dataclasses.replace(
        built, image_digest=digest, image_bytes=image_bytes(store, built.image)
    )


def _registry(profile: EnvProfile, stage: str, step: Callable[[], str], count: Count) -> str:
    """A registry step; a registry that is down or refuses is one line and a count, and the
    stage goes on with what it builds here."""
    try:
        return step()
    except RegistryError as exc:
        progress.say(f"{stage}: profile {profile.profile_id}: {exc}")
        count("registry_errors")
        return ""


class BuildEnvironments(beam.PTransform):
    """Items -> {"ready": (built EnvProfile, item), "profiles", "rejections"}.

    ``locate`` says where each item's environment comes from (see ``Site``); ``audit``, where
    items have verdicts, compares an audited reuse's verdicts with its own image's.
    """

    def __init__(
        self,
        params: Params,
        stage: str,
        locate: Callable[[Any], Site],
        audit: LabelAudit | None = None,
    ) -> None:
        super().__init__()
        self.params, self.stage, self.locate, self.audit = params, stage, locate, audit

    def expand(self, items):
        args = (self.params, self.stage, self.locate)
        profiled = items | "DetectProfile" >> beam.ParDo(DetectProfileFn(*args)).with_outputs(
            REJECTED, main="profiled"
        )
        envs = (
            profiled.profiled
            | "GroupByProfile" >> beam.GroupByKey()
            | "SpreadProfiles" >> beam.Reshuffle()
            # one batch per bundle: the pool keeps build_workers busy while any profile waits
            | "BatchProfiles" >> beam.BatchElements(min_batch_size=BATCH, max_batch_size=BATCH)
            | "BuildEnvironment"
            >> beam.ParDo(BuildEnvironmentFn(*args, self.audit)).with_outputs(
                REJECTED, PROFILES, main="ready"
            )
        )
        rejections = (profiled[REJECTED], envs[REJECTED]) | "EnvRejections" >> beam.Flatten()
        return {"ready": envs.ready, "profiles": envs[PROFILES], "rejections": rejections}
