"""Every knob, validated on load: a bad value is one line that names the key.

``params.yaml`` mirrors these dataclasses section by section; CLI flags override single values.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml
from trajforge.schemas.errors import ParamsError


@dataclass
class SourcesParams:
    repos: list[str] = field(default_factory=list)  # local paths or git URLs
    pypi: list[str] = field(default_factory=list)  # PyPI names, turned into release histories
    max_releases: int = 15  # newest N releases of each PyPI package
    pypi_url: str = "https://pypi.org"


@dataclass
class MineParams:
    commits: list[str] = field(default_factory=list)  # only these SHAs (any repo)
    since: str | None = None  # git date, e.g. "2023-01-01"
    until: str | None = None
    max_commits: int = 300  # newest N first-parent commits per repo
    max_files: int = 30  # files changed (patch + test_patch), after skipping
    max_lines: int = 3000  # lines added + removed, after skipping
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
    pythons: list[str] = field(default_factory=lambda: ["3.11"])  # base images that may be built
    ca_bundle: str | None = "/etc/ssl/certs/ca-certificates.crt"  # mounted at build time
    pip_index_url: str | None = None
    build_timeout_s: int = 1200
    build_network: str = "bridge"  # network for image builds only; tests never get one


@dataclass
class SandboxParams:
    kind: str = "docker"  # docker | local (no isolation; development only)
    memory: str = "2g"
    cpus: float = 1.0
    pids: int = 512
    docker_host: str | None = None  # else DOCKER_HOST / the local socket


@dataclass
class ValidateParams:
    workers: int = 2
    reruns: int = 1
    rerun_scope: str = "changed"  # changed: rerun the tests the verdict rests on | suite
    test_timeout_s: int = 600
    max_log_bytes: int = 200_000


@dataclass
class InjectParams:
    """Bug injection (issue 3): which mutants to make and how to prove them."""

    repos: list[str] = field(default_factory=list)  # local paths or git URLs to inject into
    pypi: list[str] = field(default_factory=list)  # PyPI names (their newest release)
    commit: str | None = None  # snapshot to inject into (default: the newest commit)
    operators: list[str] = field(default_factory=list)  # empty: every operator
    max_candidates: int = 200  # mutants per snapshot, sampled reproducibly
    seed: int = 0
    min_complexity: int = 2  # skip trivial functions (cyclomatic complexity below this)
    combos: int = 10  # harder tasks: combinations of 2-3 validated mutants per snapshot
    mode: str = "procedural"  # procedural | llm (needs an endpoint)


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
    min_scores: dict[str, float] = field(default_factory=dict)  # score name -> minimum kept
    max_scores: dict[str, float] = field(default_factory=dict)  # score name -> maximum kept


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
    runner: str = "local"  # local (in-process FnApiRunner) | DataflowRunner | FlinkRunner | ...
    shards: int = 1  # Parquet files per output table


@dataclass
class Params:
    cache_dir: str = ".cache/trajforge"
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

    def check(self) -> Params:
        _choice("sandbox.kind", self.sandbox.kind, ("docker", "local"))
        _choice("validate.rerun_scope", self.validate.rerun_scope, ("changed", "suite"))
        for key, value in (
            ("validate.workers", self.validate.workers),
            ("pipeline.shards", self.pipeline.shards),
            ("mine.max_files", self.mine.max_files),
            ("mine.max_lines", self.mine.max_lines),
            ("validate.test_timeout_s", self.validate.test_timeout_s),
            ("llm.concurrency", self.llm.concurrency),
            ("describe.attempts", self.describe.attempts),
            ("rollout.attempts", self.rollout.attempts),
            ("rollout.max_steps", self.rollout.max_steps),
            ("rollout.workers", self.rollout.workers),
        ):
            if value < 1:
                raise ParamsError(f"params: {key} must be at least 1, got {value}")
        if self.validate.reruns < 0:
            raise ParamsError(
                f"params: validate.reruns must be 0 or more, got {self.validate.reruns}"
            )
        return self


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ParamsError(f"params: {key} must be one of {', '.join(allowed)}, got {value!r}")


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
