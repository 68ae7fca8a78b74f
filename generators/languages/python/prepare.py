"""From a detected profile to an environment whose suite collects, with no per-repo spec.

Detection (``profile.py``) ranks install sets, widest first. ``prepare_environment`` builds the
first that installs (each failure is recorded on the profile), collects the suite once at the
setup commit, and repairs from the evidence: a test module that cannot import ``railroad`` gets
the project's own ``railroad-diagrams`` requirement (``repairs.py``), a pytest warning the
project's ``filterwarnings = error`` turns into a collection error gets ``-W ignore`` for that one
warning class. Each repair is a new recipe, so a new content-addressed image: cached like any
other. Bounded rounds; what still cannot collect is left out of ``test_cmd`` (``--ignore``) and
named on the profile with its error, and the rest of the suite is used.

When the rules still fail and ``environment.setup_agent`` is on with an LLM endpoint, a model
proposes installs (``setup_agent.py``), each built and collected the same way; the first that
collects is kept, marked ``origin="agent"``.

The result is cached by the detected profile's id, so a rerun reuses the repaired profile and
its image with no build and no probe.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import shlex
import time
from collections.abc import Sequence
from pathlib import PurePosixPath

from trajforge.generators.environments.build_errors import (
    cause_line,
    loosening_can_help,
    system_packages,
)
from trajforge.generators.environments.commit_files import commit_date, ls_tree
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.environments.image import (
    LOG_TAIL,
    build_env_image,
    image_sizes,
    refused_line,
    trusted_commit,
)
from trajforge.generators.environments.prepare import Count, Fetch, Prepared, Say
from trajforge.generators.environments.recipe import add_step, image_name, render_dockerfile
from trajforge.generators.environments.setup_agent import agent_install
from trajforge.generators.languages.python.install_sets import UPGRADE_PIP, InstallSet, decode_set
from trajforge.generators.languages.python.profile import TEST_CMD, config_files, detect_profile
from trajforge.generators.languages.python.relax import LOOSENED, project_requirements, relaxed
from trajforge.generators.languages.python.repairs import requirement_for, requirement_for_option
from trajforge.generators.languages.python.stdlib_ladder import (
    Missing,
    missing_names,
    newer_python,
)
from trajforge.generators.llm.client import LLMClient, endpoint_configured
from trajforge.generators.sources.pypi_source import pypi_has
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.collection import (
    CollectError,
    Collection,
    collect,
    ignore_flags,
    warning_flag,
)
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox, SessionSpec
from trajforge.verifiers.sandbox.faults import machine_fault
from trajforge.verifiers.sandbox.git_tree import archive

PREPARE_VERSION = "prepare-v2"  # v2: the relaxation ladder and system packages
MIN_BUILD_S = 30  # below this much of the build budget left, no new build starts
MAX_BUILDS = 10  # install builds per profile: sets, rungs and system-package retries together
APT_ROUNDS = 2  # a compiler's absence hides the missing header: a second round may name it
RECENT_DAYS = 30  # a commit this recent resolves as of today: no era rung
# unittest suites in files pytest's default python_files misses (tests.py, test.py, *tests.py)
UNITTEST_FILES = "-o 'python_files=test*.py *_test.py *tests.py'"


def prepare_environment(
    sandbox: Sandbox,
    profile: EnvProfile,
    repo_path: str,
    params: Params,
    *,
    legacy: bool = False,
    count: Count | None = None,
    fetch: Fetch | None = None,
    say: Say | None = None,
) -> Prepared:
    """The profile built, collected, repaired and trimmed to what collects (see the module doc).

    ``legacy``: build the detected install only and take the suite as it collects, with no
    fallback, repair or exclusion (the detector before ranking; the benchmark's baseline).
    ``fetch(image)`` is called before any build, so a registry can supply the image instead.
    An image here under a profile's name that was not built from the profile's recipe is built
    again (``build_env_image``), counted ``images_untrusted``, and ``say`` hears one line why.
    """
    counted: Count = count or (lambda name, value=1: None)
    untrusted = _untrusted(counted, say)
    cache = ContentCache(params.results_cache, "environments")
    key = content_id(PREPARE_VERSION, profile.profile_id, legacy)
    known = cache.get(key)
    # an older trajforge cached a full disk as the repository's failure: not a verdict, built again
    cached = _from_cache(known) if known is not None else None
    if cached is not None and not _machine_fault_cached(cached):
        prepared = cached
        if prepared.reason:
            return prepared
        ready = _image_ready(sandbox, prepared.profile, repo_path, params, fetch, untrusted)
        if ready is not None:
            return dataclasses.replace(prepared, profile=ready)
    prepared = _Preparation(
        sandbox, profile, repo_path, params, legacy, counted, fetch, untrusted
    ).run()
    cache.put(key, _to_cache(prepared))
    return prepared


class _Preparation:
    """One profile's way to a collecting suite; the steps share the sandbox, params and logs."""

    def __init__(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        repo_path: str,
        params: Params,
        legacy: bool,
        count: Count,
        fetch: Fetch | None,
        untrusted: Say,
    ) -> None:
        self.sandbox, self.profile, self.repo_path = sandbox, profile, repo_path
        self.params, self.legacy, self.count, self.fetch = params, legacy, count, fetch
        self.untrusted = untrusted
        self.logs = os.path.join(params.cache_dir, "build-logs")
        self.last_output = ""  # the last collection's output: evidence for the setup agent
        # where the suite runs from (suite_layout.py): detection's options, in every collection
        self.layout = profile.test_cmd.removeprefix(TEST_CMD).strip()
        self.last_errors: list[CollectError] = []  # what the last collection could not import
        # One build budget for every set, repair and agent proposal together: a hanging install
        # must not cost environment.build_timeout_s once per narrower set.
        self.deadline = time.monotonic() + params.environment.build_timeout_s

    def run(self) -> Prepared:
        built, attempts = self._install()
        if built.status != "built":
            failed = dataclasses.replace(built, attempts=attempts)
            prepared = Prepared(
                failed, "install_failed", _install_detail(self.profile, attempts), 0
            )
        elif self.legacy:
            prepared = self._finish(built, self._collect(built, ""), [], [])
        else:
            prepared = self._repair(dataclasses.replace(built, attempts=attempts))
            prepared = self._newer_python(prepared) or prepared
        if prepared.reason and not self.legacy and self._agent_allowed():
            return self._agent(prepared) or prepared
        return prepared

    def _newer_python(self, prepared: Prepared) -> Prepared | None:
        """The project prepared again on the first newer Python whose standard library has what
        the suite could not import (``stdlib_ladder.py``: ``typing.Unpack`` on 3.10 -> 3.11),
        when that collects more than this one; None when no rung has it, the project's declared
        range forbids the rung, or the rung does no better. The rung is a new profile (its id
        derived from this one's), and climbs again from there if it must."""
        wanted = missing_names(self.last_errors)
        environment = self.params.environment
        move = newer_python(self.sandbox, self.profile.python, environment.pythons, wanted)
        if move is None:
            return None
        try:
            detected = detect_profile(
                self.repo_path, self.profile.setup_commit, self.profile.repo,
                default_python=move.python, pythons=(move.python,),
                registry=environment.registry,
            )  # fmt: skip
        except UserError:  # the declared range excludes the rung: the project says no
            return None
        profile_id = content_id("python", self.profile.profile_id, move.python, length=16)
        rung = dataclasses.replace(
            detected, profile_id=profile_id, image=image_name(environment.registry, profile_id)
        )
        heard: dict[str, int] = {}
        climb = _Preparation(
            self.sandbox, rung, self.repo_path, self.params, False,
            lambda name, value=1: heard.update({name: heard.get(name, 0) + value}),
            self.fetch, self.untrusted,
        )  # fmt: skip
        climb.deadline = self.deadline  # one build budget for the whole ladder
        moved = climb.run()
        taken = not moved.reason and (bool(prepared.reason) or moved.collected > prepared.collected)
        for name, value in heard.items():  # a rung not taken still built its images
            if taken or name == "images_built":
                self.count(name, value)
        if not taken:
            return None
        self.count("python_moves")
        self.count("excluded_modules", -len(prepared.profile.excluded))  # counted by the rung
        note = f"python {self.profile.python} -> {move.python} ({move.why})"
        profile = dataclasses.replace(moved.profile, repairs=(note, *moved.profile.repairs))
        return dataclasses.replace(moved, profile=profile)

    def _agent_allowed(self) -> bool:
        return self.params.environment.setup_agent and endpoint_configured(self.params.llm)

    def _agent(self, failed: Prepared) -> Prepared | None:
        """The setup agent's recipe (``setup_agent.py``) when the rules could not make the suite
        collect; None when it finds none. Its proposals are built like any install set."""
        runner = self.profile.install[-1]
        tried: dict[tuple[str, ...], tuple[EnvProfile, Collection]] = {}

        def try_install(commands: Sequence[str]) -> tuple[bool, str]:
            install = (UPGRADE_PIP, *commands, runner)
            candidate = self._variant(self.profile, InstallSet("agent", install), "agent")
            built = self._build(candidate)
            if built.status != "built":
                return False, built.log
            collection = self._collect(built, "")
            tried[tuple(commands)] = (built, collection)
            ok = collection.collected > 0 and collection.conftest_error is None
            return ok, collection.output

        files = config_files(self.repo_path, self.profile.setup_commit)
        log = f"{failed.detail}\n{self.last_output or failed.profile.log}"
        client = LLMClient(self.params.llm, self.params.results_cache)
        outcome = agent_install(
            client, self.profile.repo, self.profile.python, files, log, try_install,
            rounds=self.params.environment.agent_rounds,
        )  # fmt: skip
        self.count("agent_rounds", outcome.rounds)
        if outcome.install is None or outcome.install not in tried:
            return None
        built, collection = tried[outcome.install]
        built = dataclasses.replace(
            built, origin="agent", attempts=failed.profile.attempts, log=outcome.log[-LOG_TAIL:]
        )
        self.count("agent_recipes")
        return self._finish(built, collection, [], [])

    def _install(self) -> tuple[EnvProfile, tuple[str, ...]]:
        """The first install that builds (else the last one tried, failed), and why each one
        before it did not, in ``_plan``'s order. A build whose log asks for system packages
        (a compiler, a header: ``build_errors.py``) is built again with them, and they stay for
        every later build; at most ``APT_ROUNDS`` times, ``MAX_BUILDS`` builds in all, within
        the one build budget (``self.deadline``)."""
        attempts: list[str] = []
        apt: tuple[str, ...] = ()
        built, builds, apt_rounds = self.profile, 0, 0
        plan = self._plan()
        index = 0
        while index < len(plan) and builds < MAX_BUILDS:
            install_set = dataclasses.replace(plan[index], apt=apt)
            kind = "" if index == 0 and not apt else "set"
            built = self._build(self._variant(self.profile, install_set, kind))
            builds += 1
            if built.status == "built":
                self.count("install_fallbacks", int(install_set.name != plan[0].name))
                self.count("relaxations", 1 if install_set.rung != "declared" else 0)
                self.count("system_packages", int(bool(apt)))  # environments that needed them
                return built, tuple(attempts)
            log = self._full_log(built)
            label = _label(install_set)
            attempts.append(f"{label}: {cause_line(log, self.profile.python)}")
            wanted = tuple(p for p in system_packages(log) if p not in apt)
            if wanted and apt_rounds < APT_ROUNDS and not self.legacy:
                apt, apt_rounds = (*apt, *wanted), apt_rounds + 1
                continue  # the same install again, with what the log asked for
            if "budget spent" in log:
                break
            index += 1
            if not loosening_can_help(log):  # only another set as declared may install
                plan = plan[:index] + [s for s in plan[index:] if s.rung == "declared"]
        return built, tuple(attempts)

    def _plan(self) -> list[InstallSet]:
        """What ``_install`` tries, in order: the first ranked set as declared, then resolved
        as of the commit's date; the narrower sets as declared; then the first set's looser
        rungs (relax.py). A narrower set drops whole files of pins at the cost of one build, so
        it comes before loosening every pin of the widest set. ``ranges`` keeps the commit's
        date (the compatible releases of its time); ``unpinned`` and ``no-deps`` resolve as of
        today, the one thing a dated rung cannot give: a later release with files for a Python
        newer than the commit (``mecab-python3==1.0.5`` has no wheel for 3.11, 1.0.6 does)."""
        first = InstallSet(self.profile.install_set, self.profile.install)
        if self.legacy:
            return [first]
        narrower = [decode_set(encoded) for encoded in self.profile.alternatives]
        era = _era(self.repo_path, self.profile.setup_commit)
        dated = [dataclasses.replace(first, rung="era", exclude_newer=era)] if era else []
        files = config_files(self.repo_path, self.profile.setup_commit)
        own = project_requirements(files)
        looser = [
            InstallSet(first.name, relaxed(first.commands, rung, files, own), rung, day)
            for rung, day in zip(LOOSENED, (era, "", ""), strict=True)
        ]
        return [first, *dated, *narrower, *looser]

    def _full_log(self, built: EnvProfile) -> str:
        """The whole build log (the profile keeps its tail): the cause may be further up."""
        try:
            with open(os.path.join(self.logs, f"{built.profile_id}.log"), "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return built.log

    def _repair(self, built: EnvProfile) -> Prepared:
        """Collect, repair from what failed, collect again; bounded by environment.repair_rounds."""
        flags: list[str] = []
        repairs: list[str] = []
        tried: set[str] = set()
        collection = self._collect(built, "")
        if collection.foreign:  # the tests import PyPI's copy of the project: link /repo back
            built, collection, repairs = self._relink(built, collection)
        for _ in range(self.params.environment.repair_rounds):
            errors = _all_errors(collection)
            new_flags = _dedupe(
                warning_flag(e.runner_warning)
                for e in errors
                if e.runner_warning and warning_flag(e.runner_warning) not in flags
            )
            fixes = {
                e.missing: found
                for e in errors
                if e.missing and e.missing not in tried
                for found in [
                    requirement_for(e.missing, self.profile.declared, self.profile.python)
                ]
                if found is not None
            }
            fixes.update(
                (error.missing, found)
                for error in [collection.conftest_error]
                if error is not None and error.missing and error.missing not in tried
                and error.missing not in fixes
                for found in [self._undeclared(error)]
                if found is not None
            )  # fmt: skip
            fixes.update(
                (option, found)
                for option in collection.unknown_options
                if option not in tried
                for found in [requirement_for_option(option, self.profile.declared)]
                if found is not None
            )
            if not new_flags and not fixes:
                break
            flags += new_flags
            repairs += [
                f"{flag} (the project's filterwarnings made it an error)" for flag in new_flags
            ]
            if fixes:
                tried |= set(fixes)
                built, notes = self._install_repairs(built, fixes)
                repairs += notes
            self.count("repairs", len(new_flags) + len(fixes))
            collection = self._collect(built, " ".join(flags))
        if collection.collected == 0 and not _all_errors(collection):
            widened = self._collect(built, " ".join([*flags, UNITTEST_FILES]))
            if widened.collected:  # unittest files pytest's default names miss (tests.py)
                flags.append(UNITTEST_FILES)
                repairs.append(f"{UNITTEST_FILES} (unittest files named outside pytest's default)")
                collection = widened
        return self._finish(built, collection, flags, repairs)

    def _undeclared(self, error: CollectError) -> tuple[str, str] | None:
        """(requirement, where) for a module a conftest imports that no declaration and no map
        explains: its own name, when PyPI has a project of that name and the repository has no
        folder or file of it anywhere (then it is the project's own code, not a distribution).
        Only a conftest's import: it stops the whole suite, where a test module's is left out.
        A module a newer Python's standard library has is the ladder's (``tomllib``), never
        PyPI's project of that name."""
        top = error.missing.split(".")[0]
        if top in self._own_names():
            return None
        pythons = self.params.environment.pythons
        if newer_python(self.sandbox, self.profile.python, pythons, [Missing(top)]) is not None:
            return None
        if pypi_has(top, self.params.sources.pypi_url) is not True:
            return None
        return top, f"on PyPI; {error.path} imports it and nothing declares it"

    def _own_names(self) -> set[str]:
        """Every folder and module name in the repository at the setup commit."""
        names: set[str] = set()
        for path in ls_tree(self.repo_path, self.profile.setup_commit):
            parts = PurePosixPath(path).parts
            names.update(parts[:-1])
            if parts[-1].endswith(".py"):
                names.add(parts[-1][:-3])
        return names

    def _install_repairs(
        self, built: EnvProfile, fixes: dict[str, tuple[str, str]]
    ) -> tuple[EnvProfile, list[str]]:
        """A new image with the missing requirements installed after the last good install, as
        one more layer (``add_step``): the builder reuses every layer before it, so a round costs
        its own step, not a rebuild. The runner's requirement is installed again after it, so a
        repair cannot move pytest off the era's pin."""
        requirements = sorted({requirement for requirement, _ in fixes.values()})
        step = ("pip install " + " ".join(_quote(r) for r in requirements), built.install[-1])
        install = InstallSet(
            built.install_set, (*built.install, *step), built.relaxation, built.resolved_as_of,
            built.system_packages,
        )  # fmt: skip
        candidate = self._variant(built, install, "repair", recipe=add_step(built.recipe, step))
        rebuilt = self._build(candidate)
        if rebuilt.status != "built":
            why = failure_line(rebuilt.log)
            return built, [f"{m} -> {r}: did not install ({why})" for m, (r, _) in fixes.items()]
        notes = [f"{module} -> {req} ({where})" for module, (req, where) in sorted(fixes.items())]
        return dataclasses.replace(rebuilt, attempts=built.attempts), notes

    def _relink(
        self, built: EnvProfile, collection: Collection
    ) -> tuple[EnvProfile, Collection, list[str]]:
        """One more layer, ``RELINK`` (after the runner, whose dependencies replaced the
        project's own install), when that makes the tests import /repo's code; else as it was."""
        if built.install[-1] == RELINK:
            return built, collection, []
        install = InstallSet(
            built.install_set, (*built.install, RELINK), built.relaxation, built.resolved_as_of,
            built.system_packages,
        )  # fmt: skip
        recipe = add_step(built.recipe, (RELINK,))
        rebuilt = self._build(self._variant(built, install, "relink", recipe=recipe))
        if rebuilt.status != "built":
            return built, collection, []
        again = self._collect(rebuilt, "")
        if again.foreign or not again.collected:  # no better (pytest needs PyPI's copy itself)
            return built, collection, []
        self.count("repairs")
        note = f"{RELINK} last ({collection.foreign[0]}: the runner's install replaced it)"
        return dataclasses.replace(rebuilt, attempts=built.attempts), again, [note]

    def _finish(
        self, built: EnvProfile, collection: Collection, flags: list[str], repairs: list[str]
    ) -> Prepared:
        """Leave out what still fails (never under legacy), then judge what is left."""
        excluded = [] if self.legacy else list(collection.errors)
        ignored = ignore_flags([e.path for e in excluded])
        parts = (TEST_CMD, self.layout, " ".join(flags), ignored)
        test_cmd = " ".join(part for part in parts if part)
        profile = dataclasses.replace(
            built,
            test_cmd=test_cmd,
            repairs=tuple(repairs),
            excluded=tuple(f"{e.path}: {e.error}" for e in excluded),
        )
        profile = dataclasses.replace(profile, log=_with_steps(profile, collection))
        self.count("excluded_modules", len(excluded))
        where = f"{profile.repo}@{profile.setup_commit[:12]}"
        if collection.timed_out:
            detail = f"{where}: collecting the suite timed out"
            return Prepared(profile, "collection_timed_out", detail, 0)
        if collection.foreign:  # a run would test PyPI's code and look like success
            detail = f"{where}: tests import {collection.foreign[0]}, not /repo"
            return Prepared(profile, "wrong_code_under_test", detail, collection.collected)
        if collection.unknown_options:
            options = " ".join(collection.unknown_options)
            detail = f"{where}: pytest does not know {options} (a plugin the addopts name)"
            return Prepared(profile, "collection_failed", detail, 0)
        failing = collection.conftest_error or (
            collection.errors[0] if self.legacy and collection.errors else None
        )
        if failing is not None:
            detail = f"{where}: {failing.path} cannot be collected: {failing.error}"
            return Prepared(profile, "collection_failed", detail, collection.collected)
        if collection.collected == 0 and excluded:  # tests there are, and none imports
            first = excluded[0]
            detail = (
                f"{where}: none of the {len(excluded)} test modules can be collected "
                f"({first.path}: {first.error})"
            )
            return Prepared(profile, "collection_failed", detail, 0)
        if collection.collected == 0:
            detail = f"{where}: pytest collects no tests here"
            return Prepared(profile, "no_tests", detail, 0)
        return Prepared(profile, "", "", collection.collected)

    def _variant(
        self,
        base: EnvProfile,
        install_set: InstallSet,
        kind: str,
        *,
        recipe: str | None = None,
    ) -> EnvProfile:
        """``base`` with another install: a new recipe, so a new profile id and image name.

        The recipe is rendered from the set (its commands, the day it resolves as of, its
        system packages), or given whole (a repair: the last good recipe plus a step)."""
        if recipe is None:
            recipe = render_dockerfile(
                base.python,
                install_set.commands,
                exclude_newer=install_set.exclude_newer or None,
                apt=install_set.apt,
                services=base.services,
                service_env=base.service_env,
                service_hosts=base.service_hosts,
            )
        profile_id = base.profile_id
        if kind:
            profile_id = content_id(kind, base.profile_id, recipe, length=16)
        registry = self.params.environment.registry
        return dataclasses.replace(
            base,
            profile_id=profile_id,
            image=image_name(registry, profile_id),
            install=install_set.commands,
            install_set=install_set.name,
            relaxation=install_set.rung,
            resolved_as_of=install_set.exclude_newer,
            system_packages=install_set.apt,
            recipe=recipe,
            alternatives=(),
            status="detected",
        )

    def _build(self, candidate: EnvProfile) -> EnvProfile:
        if self.fetch is not None:
            self.fetch(candidate.image)
        existed = self.sandbox.has_image(candidate.image)
        remaining = int(self.deadline - time.monotonic())
        if not existed and remaining < MIN_BUILD_S:
            budget = self.params.environment.build_timeout_s
            log = f"build time budget spent (environment.build_timeout_s: {budget} s in all)"
            return dataclasses.replace(candidate, status="failed", log=log)
        env = dataclasses.replace(self.params.environment, build_timeout_s=max(remaining, 1))
        refused: list[str] = []
        built = build_env_image(
            self.sandbox, candidate, self.repo_path, env, self.logs, note=refused.append,
            sizes=image_sizes(self.params),
        )  # fmt: skip
        for line in refused:
            self.untrusted(line)
        if not existed or refused:
            self.count("images_built")
        return built

    def _collect(self, built: EnvProfile, flags: str) -> Collection:
        """The suite collected in the image at the setup commit, with no network."""
        tree = archive(self.repo_path, built.setup_commit, prefix="repo/")
        with self.sandbox.session(SessionSpec(image=built.image)) as session:
            options = " ".join(part for part in (self.layout, flags) if part)
            collection = collect(session, options, self.params.validate.test_timeout_s, tree)
        self.last_output = collection.output
        self.last_errors = _all_errors(collection)
        return collection


def _with_steps(profile: EnvProfile, collection: Collection) -> str:
    """The build log's tail, then every step that led here: what the log alone cannot say."""
    steps = [f"install set {profile.install_set} built ({profile.origin})"]
    steps += [f"install set failed: {attempt}" for attempt in profile.attempts]
    steps += [f"repair: {repair}" for repair in profile.repairs]
    steps += [f"excluded: {excluded}" for excluded in profile.excluded]
    steps.append(f"collected: {collection.collected} tests")
    summary = "\n--- trajforge prepare ---\n" + "\n".join(steps)
    return profile.log[-max(LOG_TAIL - len(summary), 0) :] + summary


def _all_errors(collection: Collection) -> list[CollectError]:
    errors = list(collection.errors)
    return errors + ([collection.conftest_error] if collection.conftest_error else [])


def failure_line(log: str, python: str = "") -> str:
    """The line that names why a build failed (``build_errors.cause_line``)."""
    return cause_line(log, python)


def _install_detail(profile: EnvProfile, attempts: Sequence[str]) -> str:
    """One line: the repository, then each install tried and its cause, the first first (the
    one the ranking wanted) and the last (what the ladder ended on) when there are many."""
    shown = list(attempts) if len(attempts) <= 3 else [*attempts[:2], "...", attempts[-1]]
    tried = "; ".join(shown)
    return f"{profile.repo}: nothing installs for profile {profile.profile_id} ({tried})"


def _label(install_set: InstallSet) -> str:
    """An install as the attempts name it: its set, its rung and its system packages."""
    notes = [install_set.rung] if install_set.rung != "declared" else []
    notes += [f"as of {install_set.exclude_newer}"] if install_set.exclude_newer else []
    notes += [f"apt {' '.join(install_set.apt)}"] if install_set.apt else []
    return install_set.name + (f" ({', '.join(notes)})" if notes else "")


def _era(repo_path: str, commit: str) -> str:
    """The day after the commit's (uv resolves as of its midnight, so the commit's own day's
    releases count), or "" when git cannot say or the commit is from the last 30 days (the
    newest releases are the era's)."""
    day = commit_date(repo_path, commit)
    if day is None:
        return ""
    after = datetime.date.fromisoformat(day) + datetime.timedelta(days=1)
    if after > datetime.date.today() - datetime.timedelta(days=RECENT_DAYS):
        return ""
    return after.isoformat()


def _image_ready(
    sandbox: Sandbox,
    profile: EnvProfile,
    repo_path: str,
    params: Params,
    fetch: Fetch | None,
    untrusted: Say,
) -> EnvProfile | None:
    """A cached profile with its image here (present and trusted, pulled, or rebuilt from its
    recipe), at the setup commit the image was built at; None when it cannot be built."""
    if fetch is not None:
        fetch(profile.image)
    if isinstance(sandbox, ImageStore):
        if sandbox.image_info(profile.image) is not None:
            commit, why = trusted_commit(sandbox, profile, repo_path)
            if commit is not None:
                return dataclasses.replace(profile, setup_commit=commit)
            untrusted(refused_line(profile, why))
    elif sandbox.has_image(profile.image):  # the local backend: nothing else names its images
        return profile
    logs = os.path.join(params.cache_dir, "build-logs")
    rebuilt = build_env_image(
        sandbox, profile, repo_path, params.environment, logs, sizes=image_sizes(params)
    )
    return rebuilt if rebuilt.status == "built" else None


def _untrusted(count: Count, say: Say | None) -> Say:
    """What hears of an image refused by content: a count and, where someone listens, a line."""

    def heard(line: str) -> None:
        count("images_untrusted")
        if say is not None:
            say(line)

    return heard


def _to_cache(prepared: Prepared) -> dict:
    return {
        "profile": to_row(prepared.profile),
        "reason": prepared.reason,
        "detail": prepared.detail,
        "collected": prepared.collected,
    }


def _machine_fault_cached(prepared: Prepared) -> bool:
    return bool(prepared.reason) and bool(
        machine_fault(f"{prepared.detail}\n{prepared.profile.log}")
    )


def _from_cache(row: dict) -> Prepared:
    profile = from_row(EnvProfile, row["profile"])
    return Prepared(profile, row["reason"], row["detail"], int(row["collected"]))


def _dedupe(items) -> list[str]:
    return list(dict.fromkeys(items))


def _quote(requirement: str) -> str:
    return shlex.quote(requirement)
