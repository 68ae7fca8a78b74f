"""Every knob, validated on load: a bad value is one line that names the key.

These dataclasses hold the one set of defaults. ``params.yaml`` is their commented, user-facing
copy, section by section and value for value (tests/test_params.py checks it), except the
workload it picks (``PROJECT_CHOICES``). CLI flags override single values; ``Params.check`` is the
one place every value is validated.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml
from trajforge.schemas.errors import ParamsError


@dataclass
class SourcesParams:
    repos: list[str] = field(default_factory=list)  # local paths or git URLs
    pypi: list[str] = field(default_factory=list)  # PyPI names, turned into release histories
    max_releases: int = 12  # newest N releases of each PyPI package
    pypi_url: str = "https://pypi.org"


@dataclass
class MineParams:
    commits: list[str] = field(default_factory=list)  # only these SHAs (any repo)
    since: str | None = None  # git date, e.g. "2023-01-01"
    until: str | None = None
    max_commits: int = 300  # newest N first-parent commits per repo
    max_files: int = 30  # files changed (patch + test_patch), after skipping
    max_lines: int = 3000  # lines added + removed, after skipping
    max_file_bytes: int = 1_000_000  # one changed file (its larger side), read before any diff
    max_bytes: int = 5_000_000  # all changed files together, after skipping
    skip_globs: list[str] = field(
        default_factory=lambda: [
            "*vendor/*",
            "*_vendor/*",
            "*third_party/*",
            "*.min.js",
            "*.lock",
            "*_pb2.py",
            "*.egg-info/*",
            "PKG-INFO",
        ]
    )


@dataclass
class EnvironmentParams:
    default_python: str = "3.11"
    # the Pythons a project may get (the project's evidence picks: python_choice.py); each base
    # image is built the first time a profile needs it (make setup builds 3.9, 3.11, 3.13)
    pythons: list[str] = field(
        default_factory=lambda: ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
    )
    ca_bundle: str | None = "/etc/ssl/certs/ca-certificates.crt"  # mounted at build time
    pip_index_url: str | None = None
    build_timeout_s: int = 1200
    # no build starts with less free space where the engine keeps images (0: no floor); a full
    # disk is the machine's fault, never a repository's verdict (verifiers/sandbox/faults.py)
    min_free_gb: float = 2.0
    # One environment image, all its layers (the base's too): a bigger one is removed and its
    # sites rejected ``image_too_large`` (a CUDA torch writes several GB per image); null: no cap
    max_image_size: str | None = "8g"
    build_workers: int = 2  # profiles prepared at once per Beam worker (environment.py)
    repair_rounds: int = 3  # collect, repair from the errors, rebuild: at most this many times
    setup_agent: bool = False  # with an llm endpoint: a model proposes installs the rules missed
    agent_rounds: int = 3  # proposals the setup agent may try
    registry: str | None = None  # host[:port]/path ("localhost:5000/trajforge"): images live there
    push: bool = False  # push each image built here to the registry (needs registry)
    # A site whose evidence picks a new profile first tries the recipe of a profile already
    # built for its repository (same toolchain line), built at its own commit; its probe
    # decides (reuse.py). Off by default (docs/environments.md says why)
    reuse: bool = False
    # this share of reused profiles (seeded) also builds its own profile and compares their
    # clean runs test by test and, in validate, a candidate's verdict (FAIL_TO_PASS and
    # PASS_TO_PASS); a disagreement stops reuse for that repository
    reuse_audit: float = 0.1
    reuse_seed: int = 0


@dataclass
class SandboxParams:
    kind: str = "docker"  # docker | podman (daemonless) | local (no isolation; development only)
    memory: str = "2g"  # a size with a unit (b, k, m, g), at least 6m (Docker's minimum)
    cpus: float = 1.0
    pids: int = 512  # processes and threads; never 0 (to Docker that means no limit)
    tmp_size: str = "1g"  # /tmp of a test session is a tmpfs this size; counts against memory
    writable_layer_size: str = "10g"  # the rest of its disk, where the storage driver can cap it
    max_read_bytes: int = 64 * 1024 * 1024  # a file read back from a session (JUnit XML) above
    docker_host: str | None = None  # else DOCKER_HOST / the local socket


@dataclass
class ValidateParams:
    workers: int = 2
    reruns: int = 1
    rerun_scope: str = "changed"  # changed: rerun the tests the verdict rests on | suite
    test_timeout_s: int = 300
    max_log_bytes: int = 200_000
    # One test's limit (pytest-timeout, signal method): a hanging test fails alone and the rest
    # of the suite decides; 0: no per-test limit (a hang then costs the whole run)
    per_test_timeout_s: int = 60
    # A test module that does not build or import at base + test_patch while the rest of the
    # suite runs (a Go package whose new test calls the function the fix adds): `fail` counts
    # its tests as failing there (SWE-bench's, Multi-SWE-bench's n2p); `reject` the candidate
    unbuilt_at_base: str = "fail"
    # Injected bugs: `covering` lets a kept bug's covering tests decide its FAIL_TO_PASS (the
    # rest of the suite is not run); `full` runs the whole suite for every kept bug
    mutant_mode: str = "covering"
    # covering: this share of kept bugs per profile (seeded, and always the first) also gets a
    # full run; a disagreement switches the profile to full runs for the rest of the run
    audit_share: float = 0.2
    audit_seed: int = 0
    # Bug runs fork from a pytest imported once per container
    # (verifiers/languages/python/fork_server.py) instead of starting Python and pytest anew:
    # about half of a short run on a fast suite
    fork_server: bool = True
    # Each kept task's gold patch is graded this many times by the grader RL uses (fresh
    # containers), and a patch that changes nothing once; any miss: gold_not_gradable. 3 for a
    # release (a gold that passes the grader only sometimes is caught more often); 0: none (the
    # column stays empty)
    gold_runs: int = 1


@dataclass
class InjectParams:
    """Bug injection (issue 3): which mutants to make and how to prove them."""

    repos: list[str] = field(default_factory=list)  # local paths or git URLs to inject into
    pypi: list[str] = field(default_factory=list)  # PyPI names (their newest release)
    commit: str | None = None  # snapshot to inject into (default: the newest commit)
    operators: list[str] = field(default_factory=list)  # empty: every operator
    max_candidates: int = 40  # mutants per snapshot, sampled reproducibly
    seed: int = 0
    min_complexity: int = 2  # skip trivial functions (cyclomatic complexity below this)
    combos: int = 10  # harder tasks: combinations of 2-3 validated mutants per snapshot
    mode: str = "procedural"  # procedural | llm | both (llm and both need an LLM endpoint)
    llm_rewrites: int = 10  # mode llm|both: functions a model rewrites per snapshot (a call each)
    # No tests at the newest commit: the newest of this many first-parent ancestors with a suite
    max_commits_back: int = 50
    # Sites only on lines the passing tests run (validate's clean run, under coverage)
    coverage_guided: bool = True
    # coverage_guided and nothing measured yet: inject makes validate's clean run itself (its
    # environment and one run of the suite; validate then reuses both); false: unguided until a
    # validate has measured the snapshot
    measure_coverage: bool = True


@dataclass
class CurateParams:
    """Dedup, decontamination and score thresholds (issue 5)."""

    dedup_fields: list[str] = field(default_factory=lambda: ["patch", "problem_statement"])
    shingle_size: int = 5  # tokens per shingle
    num_perm: int = 128  # MinHash permutations
    bands: int = 32  # LSH bands (num_perm / bands rows each)
    threshold: float = 0.8  # estimated Jaccard at or above which two records are near-duplicates
    benchmarks: list[str] = field(default_factory=list)  # SWE-bench-style Parquet/JSONL files
    decontam_ngram: int = 13  # n-gram size (tokens) for benchmark overlap
    decontam_threshold: float = 0.5  # fraction of a record's n-grams found in a benchmark
    min_scores: dict[str, float] = field(  # score name -> minimum kept
        default_factory=lambda: {"fail_to_pass": 1.0, "explore_score": 3.0}
    )
    max_scores: dict[str, float] = field(default_factory=dict)  # score name -> maximum kept
    # Unresolved runs kept for SFT, marked near_miss: submitted, with soft_reward (the share of
    # the gold patch's touched lines the patch touches) at least this; None: none kept.
    near_miss_soft_reward: float | None = None
    # Runs whose patch the grader flagged (suspicious_patch: caller inspection, reading the
    # tests...) are dropped (rejection "suspicious_patch"); true keeps them, flag and all.
    keep_suspicious: bool = False


@dataclass
class ExportParams:
    """The released dataset (issue 5)."""

    name: str = "trajforge"
    license: str = "apache-2.0"
    validation_fraction: float = 0.1  # share of repositories held out (split by repo)
    seed: int = 0
    shard_rows: int = 10_000  # rows per Parquet shard


@dataclass
class LLMParams:
    """One OpenAI-compatible endpoint (``vllm serve``, a hosted API); no base_url = no endpoint."""

    base_url: str | None = None  # e.g. http://localhost:8000/v1
    model: str | None = None  # the served model's name
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key (never the key itself)
    concurrency: int = 4  # requests in flight per process
    max_retries: int = 4  # on 429, 5xx, timeouts and dropped connections, with backoff
    timeout_s: float = 120.0  # per request
    temperature: float = 0.0
    max_tokens: int = 1024  # per completion
    cache: bool = True  # on-disk, keyed by the request's hash: a rerun makes no new calls


@dataclass
class DescribeParams:
    """Issue text written from the gold patch and the failing tests (back-translation)."""

    overwrite: bool = False  # also rewrite tasks that already have a problem_statement
    attempts: int = 2  # model tries before the template writer takes over
    max_patch_chars: int = 6000  # context given to the model, each part cut to this
    min_chars: int = 80  # shorter statements are rejected as empty


@dataclass
class RolloutParams:
    """Agent runs on proven tasks, each verified in a fresh container."""

    attempts: int = 1  # k runs per task (solve rate = resolved / k)
    max_steps: int = 30  # model turns
    max_tokens: int = 200_000  # prompt + completion tokens over the whole run
    max_time_s: int = 900  # wall time of one run
    command_timeout_s: int = 60  # one shell command
    max_observation_chars: int = 8000  # tool output shown to the model (head and tail)
    temperature: float = 0.7  # k > 1 needs sampling to differ
    workers: int = 2  # runs in flight per Beam worker
    format_error_limit: int = 3  # consecutive turns without a usable tool call
    # Guided retries (Agent-RLVR): a task none of whose ``attempts`` resolved gets up to this many
    # more, one after another until one resolves, each shown the failing tests' output of the
    # attempt before it and the files the gold patch changes (never their content).
    guided_attempts: int = 0
    max_guidance_chars: int = 4000  # failing-test output kept for guidance (head and tail)


@dataclass
class ExploreParams:
    """Exploration with backward instruction construction (tasks from interaction)."""

    repos: list[str] = field(default_factory=list)  # local paths or git URLs to explore
    pypi: list[str] = field(default_factory=list)  # PyPI names (their newest release)
    commit: str | None = None  # snapshot to explore (default: the newest commit)
    explorations: int = 3  # seeded model explorations per repository
    max_steps: int = 20
    max_tokens: int = 100_000
    max_time_s: int = 600
    command_timeout_s: int = 30
    max_observation_chars: int = 4000
    temperature: float = 0.8
    max_examples: int = 20  # doc examples run by the template explorer, per repository
    max_labels: int = 4  # prefixes of one exploration offered to the labeler (NNetnav)


@dataclass
class PipelineParams:
    runner: str = "local"  # local (in-process FnApiRunner) | dask | DataflowRunner | FlinkRunner
    shards: int = 1  # Parquet files per output table
    # dask: the scheduler, as an address (tcp://host:8786) or a scheduler file (`dask scheduler
    # --scheduler-file`); null: a LocalCluster of `workers` processes is started for the run.
    dask_scheduler: str | None = None
    workers: int = 2  # dask, no scheduler: worker processes (one thread each) of that LocalCluster
    # The cores a run holds, for its cost figures (runtime/cost.py); null: this machine's cores
    # on the local runner, ``workers`` otherwise. With a price per core-hour, $ per kept row.
    cores: int | None = None
    core_hour_price: float | None = None

    @property
    def on_dask(self) -> bool:
        return is_dask(self.runner)

    def cores_held(self) -> int:
        if self.cores:
            return self.cores
        return self.workers if self.on_dask else os.cpu_count() or 1


# The names that pick the Dask runner (pipelines/runtime/dask_runner.py), in any case.
DASK = "dask"
DASK_RUNNERS = (DASK, "daskrunner", "apache_beam.runners.dask.dask_runner.daskrunner")


def is_dask(runner: str) -> bool:
    return runner.lower() in DASK_RUNNERS


@dataclass
class Params:
    cache_dir: str = ".cache/trajforge"
    # Results any worker may reuse (verdicts, LLM replies, environment outcomes, rollouts): a path
    # or an object store (s3://bucket/cache) that every machine of a cluster reaches. None: under
    # cache_dir. Clones, sdists and build logs stay in cache_dir, on each worker's own disk.
    shared_cache: str | None = None
    sources: SourcesParams = field(default_factory=SourcesParams)
    mine: MineParams = field(default_factory=MineParams)
    environment: EnvironmentParams = field(default_factory=EnvironmentParams)
    sandbox: SandboxParams = field(default_factory=SandboxParams)
    validate: ValidateParams = field(default_factory=ValidateParams)
    inject: InjectParams = field(default_factory=InjectParams)
    curate: CurateParams = field(default_factory=CurateParams)
    export: ExportParams = field(default_factory=ExportParams)
    llm: LLMParams = field(default_factory=LLMParams)
    describe: DescribeParams = field(default_factory=DescribeParams)
    rollout: RolloutParams = field(default_factory=RolloutParams)
    explore: ExploreParams = field(default_factory=ExploreParams)
    pipeline: PipelineParams = field(default_factory=PipelineParams)

    @property
    def results_cache(self) -> str:
        """Where ``ContentCache`` results live (``shared_cache``, else ``cache_dir``)."""
        return self.shared_cache or self.cache_dir

    def check(self) -> Params:
        """Every value in range, or a ``ParamsError`` naming the first bad key."""
        for key, allowed in CHOICES.items():
            _choice(key, self._value(key), allowed)
        for key in AT_LEAST_ONE:
            _at_least(key, self._value(key), 1)
        for key in AT_LEAST_ZERO:
            _at_least(key, self._value(key), 0)
        for key in ABOVE_ZERO:
            if not self._value(key) > 0:
                raise ParamsError(f"params: {key} must be more than 0, got {self._value(key)}")
        for key in NOT_NEGATIVE:
            if not self._value(key) >= 0:
                raise ParamsError(f"params: {key} must be 0 or more, got {self._value(key)}")
        for key, low in OPTIONAL_AT_LEAST.items():
            if self._value(key) is not None and not self._value(key) >= low:
                raise ParamsError(f"params: {key} must be {low} or more (or null)")
        for key, interval in FRACTIONS.items():
            value = self._value(key)
            low_ok = value > 0 if interval.startswith("(") else value >= 0
            high_ok = value < 1 if interval.endswith(")") else value <= 1
            if not (low_ok and high_ok):
                raise ParamsError(f"params: {key} must be in {interval}, got {value}")
        for key in OPTIONAL_FRACTIONS:  # None: off
            value = self._value(key)
            if value is not None and not 0 < value <= 1:
                raise ParamsError(f"params: {key} must be in (0, 1] or null, got {value}")
        for key in NOT_EMPTY:
            if not self._value(key):
                raise ParamsError(f"params: {key} must not be empty")
        for key in URLS:
            url = self._value(key)
            if url is not None and not url.startswith(("http://", "https://")):
                raise ParamsError(f"params: {key} must be an http(s) URL, got {url!r}")
        box = self.sandbox
        memory = size_bytes("sandbox.memory", box.memory)
        size_bytes("sandbox.writable_layer_size", box.writable_layer_size)
        if self.environment.max_image_size is not None:
            size_bytes("environment.max_image_size", self.environment.max_image_size)
        if size_bytes("sandbox.tmp_size", box.tmp_size) > memory:
            raise ParamsError(
                f"params: sandbox.tmp_size ({box.tmp_size}) must not be larger than sandbox.memory "
                f"({box.memory}): what a session writes to /tmp counts against its memory"
            )
        _at_least("sandbox.max_read_bytes", box.max_read_bytes, MIN_READ_BYTES)
        env = self.environment
        for i, python in enumerate(env.pythons):
            _python_version(f"environment.pythons[{i}]", python)
        _python_version("environment.default_python", env.default_python)
        if env.default_python not in env.pythons:
            raise ParamsError(
                f"params: environment.default_python {env.default_python!r} must be one of "
                f"environment.pythons ({', '.join(env.pythons) or 'none'})"
            )
        _registry(env.registry, env.push)
        scheduler = self.pipeline.dask_scheduler
        if scheduler is not None and not scheduler.strip():
            raise ParamsError(
                "params: pipeline.dask_scheduler must be a scheduler address (tcp://host:8786) "
                "or a scheduler file, or null (a LocalCluster of pipeline.workers processes)"
            )
        if self.validate.gold_runs < 0:
            raise ParamsError(
                f"params: validate.gold_runs ({self.validate.gold_runs}) must be 0 (no gold "
                "grading: the column stays empty) or a number of runs"
            )
        if self.curate.num_perm % self.curate.bands:
            raise ParamsError(
                f"params: curate.bands ({self.curate.bands}) must divide curate.num_perm "
                f"({self.curate.num_perm}) into equal rows"
            )
        return self

    def _value(self, key: str) -> Any:
        value: Any = self
        for name in key.split("."):
            value = getattr(value, name)
        return value


# A zero or a negative makes no sense for these (a count, a size, a time limit, a limit).
AT_LEAST_ONE = (
    "sources.max_releases",
    "mine.max_commits",
    "mine.max_files",
    "mine.max_lines",
    "mine.max_file_bytes",
    "mine.max_bytes",
    "environment.build_timeout_s",
    "environment.build_workers",
    "environment.agent_rounds",
    "sandbox.pids",
    "validate.workers",
    "validate.test_timeout_s",
    "validate.max_log_bytes",
    "inject.max_candidates",
    "inject.min_complexity",
    "inject.llm_rewrites",
    "curate.shingle_size",
    "curate.num_perm",
    "curate.bands",
    "curate.decontam_ngram",
    "export.shard_rows",
    "llm.concurrency",
    "llm.max_tokens",
    "describe.attempts",
    "describe.max_patch_chars",
    "describe.min_chars",
    "rollout.attempts",
    "rollout.max_steps",
    "rollout.max_tokens",
    "rollout.max_time_s",
    "rollout.command_timeout_s",
    "rollout.max_observation_chars",
    "rollout.workers",
    "rollout.format_error_limit",
    "rollout.max_guidance_chars",
    "explore.explorations",
    "explore.max_steps",
    "explore.max_tokens",
    "explore.max_time_s",
    "explore.command_timeout_s",
    "explore.max_observation_chars",
    "explore.max_examples",
    "explore.max_labels",
    "pipeline.shards",
    "pipeline.workers",
)
AT_LEAST_ZERO = (  # 0: none of them
    "validate.reruns", "inject.combos", "llm.max_retries", "rollout.guided_attempts",
    "validate.per_test_timeout_s", "inject.max_commits_back",
)  # fmt: skip
ABOVE_ZERO = ("sandbox.cpus", "llm.timeout_s")
OPTIONAL_AT_LEAST = {"pipeline.cores": 1, "pipeline.core_hour_price": 0}  # null: not given
NOT_NEGATIVE = (
    "llm.temperature",
    "rollout.temperature",
    "explore.temperature",
    "environment.min_free_gb",
)
FRACTIONS = {
    # 0 would make every pair a duplicate, and any shared n-gram a contamination.
    "curate.threshold": "(0, 1]",
    "curate.decontam_threshold": "(0, 1]",
    # 1 would hold out every repository and leave no training split.
    "export.validation_fraction": "[0, 1)",
    "validate.audit_share": "[0, 1]",  # 0: only the first kept bug of each profile is audited
    "environment.reuse_audit": "[0, 1]",  # 0: no reuse audited, 1: every one
}
OPTIONAL_FRACTIONS = ("curate.near_miss_soft_reward",)  # (0, 1] when set
NOT_EMPTY = (
    "cache_dir",
    "curate.dedup_fields",
    "export.name",
    "export.license",
    "llm.api_key_env",
    "pipeline.runner",  # local, or any Beam runner name (DataflowRunner, a dotted class path)
)
URLS = ("sources.pypi_url", "llm.base_url")  # None: not configured
CHOICES = {
    "sandbox.kind": ("docker", "podman", "local"),
    "validate.rerun_scope": ("changed", "suite"),
    "validate.unbuilt_at_base": ("fail", "reject"),  # verifiers/validation/rule.py
    "validate.mutant_mode": ("covering", "full"),  # see verifiers/languages/python/mutants.py
    "inject.mode": ("procedural", "llm", "both"),  # see generators/bugs/injector.py
}
# What params.yaml runs on rather than a default: the code defaults process nothing, so a params
# file that names its own sources never also mines, injects into or explores these.
PROJECT_CHOICES = ("sources.pypi", "inject.pypi", "explore.pypi")

MEMORY_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
MIN_MEMORY = 6 * 1024**2  # Docker refuses a smaller limit
MIN_READ_BYTES = 1024**2  # sandbox.max_read_bytes: below this, real JUnit files are refused


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ParamsError(f"params: {key} must be one of {', '.join(allowed)}, got {value!r}")


def _at_least(key: str, value: int, low: int) -> None:
    if value < low:
        wanted = "0 or more" if low == 0 else f"at least {low}"
        raise ParamsError(f"params: {key} must be {wanted}, got {value}")


def size_bytes(key: str, value: str) -> int:
    """A Docker size (``2g``, ``512m``, ``1.5g``, ``2gb``) in bytes, at least 6 MiB; else a
    ``ParamsError`` naming ``key``."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)b?", value.strip().lower())
    size = int(float(match[1]) * MEMORY_UNITS[match[2]]) if match else 0
    if size < MIN_MEMORY:
        raise ParamsError(
            f"params: {key} must be a size of at least 6m with a unit (b, k, m, g), "
            f"e.g. 2g or 512m, got {value!r}"
        )
    return size


def _python_version(key: str, value: str) -> None:
    match = re.fullmatch(r"3\.(\d{1,2})", value)
    if match is None or int(match[1]) < 6:
        raise ParamsError(
            f"params: {key} must be a Python version like '3.11', in quotes (YAML reads 3.10 "
            f"as 3.1), got {value!r}"
        )


# A registry as Docker reads an image name's first part: a host with a dot or a port, or
# localhost (else Docker takes it for a Docker Hub account), then a lowercase repository path.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY_RE = re.compile(
    rf"(?P<host>{_LABEL}(?:\.{_LABEL})*)(?P<port>:[0-9]{{1,5}})?(?:/{_PATH_PART})+"
)


def _registry(registry: str | None, push: bool) -> None:
    """environment.registry is host[:port]/path (no scheme); push needs somewhere to push to."""
    if registry is None:
        if push:
            raise ParamsError(
                "params: environment.push needs environment.registry (where to push, e.g. "
                "localhost:5000/trajforge); set it, or set push: false"
            )
        return
    example = "e.g. localhost:5000/trajforge"
    if "://" in registry:
        raise ParamsError(
            f"params: environment.registry is host[:port]/path without a scheme ({example}), "
            f"got {registry!r}"
        )
    match = REGISTRY_RE.fullmatch(registry)
    if match is None or not (match["port"] or "." in match["host"] or match["host"] == "localhost"):
        raise ParamsError(
            "params: environment.registry must be host[:port]/path, the host with a dot or a "
            f"port (or localhost) and a lowercase path ({example}), got {registry!r}"
        )


def load_params(path: str | None) -> Params:
    """Params from a YAML file (missing keys keep their defaults); None gives the defaults."""
    if path is None:
        return Params().check()
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        raise ParamsError(
            f"params: {path} does not exist; pass --params with a YAML file"
        ) from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"params: {path} is not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"params: {path} must hold a mapping of sections")
    return _build(Params, raw, prefix="").check()


def _build(cls: type, raw: dict[str, Any], prefix: str) -> Any:
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in names:
            known = ", ".join(sorted(names))
            raise ParamsError(f"params: unknown key {prefix}{key} (known here: {known})")
    kwargs = {key: _coerce(f"{prefix}{key}", hints[key], value) for key, value in raw.items()}
    return cls(**kwargs)


def _coerce(key: str, hint: Any, value: Any) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _coerce(key, inner[0], value)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ParamsError(f"params: {key} must be a mapping")
        return _build(hint, value, prefix=f"{key}.")  # type: ignore[arg-type]
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(f"params: {key} must be a mapping, got {value!r}")
        return {str(k): _coerce(f"{key}.{k}", get_args(hint)[1], v) for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ParamsError(f"params: {key} must be a list, got {value!r}")
        return [_coerce(f"{key}[{i}]", get_args(hint)[0], v) for i, v in enumerate(value)]
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # python: 3.11 in YAML is a float
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ParamsError(f"params: {key} must be {hint.__name__}, got {value!r}")
    return value
