"""params.yaml is validated on load: a bad value is one line naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from trajforge.schemas.errors import ParamsError, UserError
from trajforge.schemas.params import (
    ABOVE_ZERO,
    AT_LEAST_ONE,
    AT_LEAST_ZERO,
    CHOICES,
    FRACTIONS,
    NOT_EMPTY,
    NOT_NEGATIVE,
    PROJECT_CHOICES,
    URLS,
    Params,
    SandboxParams,
    load_params,
)
from trajforge.verifiers.sandbox.base import Limits
from trajforge.verifiers.sandbox.factory import make_sandbox

ROOT = Path(__file__).resolve().parents[1]


def test_project_params_load():
    params = load_params(str(ROOT / "params.yaml"))
    assert params.sandbox.kind == "docker"
    assert params.sources.pypi  # the default run mines real PyPI packages


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("mine:\n  max_files: lots\n", "mine.max_files"),
        ("mine:\n  max_filez: 3\n", "mine.max_filez"),
        ("sandbox:\n  kind: vm\n", "sandbox.kind"),
        ("validate:\n  workers: 0\n", "validate.workers"),
        ("sources:\n  pypi: toolz\n", "sources.pypi"),
    ],
)
def test_bad_values_name_the_key(tmp_path, text, key):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as info:
        load_params(str(path))
    message = str(info.value)
    assert key in message and "\n" not in message


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(ParamsError, match="does not exist"):
        load_params(str(tmp_path / "nope.yaml"))


def test_python_version_given_as_a_number_is_kept_as_text(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("environment:\n  default_python: 3.11\n")
    assert load_params(str(path)).environment.default_python == "3.11"


def _knobs(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_project_params_are_the_defaults_section_by_section():
    """params.yaml is the commented copy of the dataclass defaults: the same knobs, the same
    values, except the workload the project picks (PROJECT_CHOICES, empty by default)."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    defaults, project = Params(), load_params(str(ROOT / "params.yaml"))
    assert set(raw) == _knobs(Params)
    for name in _knobs(Params):
        default = getattr(defaults, name)
        if not dataclasses.is_dataclass(default):
            assert raw[name] == default, name
            continue
        assert isinstance(raw[name], dict), name
        assert set(raw[name]) == _knobs(type(default)), name
        want = dataclasses.asdict(default)
        got = dataclasses.asdict(getattr(project, name))
        for knob in _knobs(type(default)):
            key = f"{name}.{knob}"
            if key in PROJECT_CHOICES:
                assert want[knob] == [] and got[knob], key
            else:
                assert got[knob] == want[knob], key


def test_defaults_pass_their_own_checks_and_every_checked_key_exists():
    params = Params().check()
    assert load_params(None) == params
    tables = (AT_LEAST_ONE, AT_LEAST_ZERO, ABOVE_ZERO, NOT_NEGATIVE, FRACTIONS, NOT_EMPTY, URLS)
    for key in [*CHOICES, *PROJECT_CHOICES, *(k for table in tables for k in table)]:
        section, _, knob = key.partition(".")
        assert knob in _knobs(type(getattr(params, section))) if knob else hasattr(params, key)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("inject:\n  mode: neural\n", "inject.mode"),
        ("validate:\n  rerun_scope: all\n", "validate.rerun_scope"),
        ("sandbox:\n  memory: '0'\n", "sandbox.memory"),
        ("sandbox:\n  memory: lots\n", "sandbox.memory"),
        ("sandbox:\n  memory: 2048\n", "sandbox.memory"),  # bytes: under Docker's minimum
        ("sandbox:\n  memory: ''\n", "sandbox.memory"),
        ("sandbox:\n  cpus: 0\n", "sandbox.cpus"),
        ("sandbox:\n  cpus: -1.5\n", "sandbox.cpus"),
        ("sandbox:\n  pids: 0\n", "sandbox.pids"),
        ("sandbox:\n  pids: -1\n", "sandbox.pids"),
        ("sandbox:\n  tmp_size: lots\n", "sandbox.tmp_size"),
        ("sandbox:\n  tmp_size: 1k\n", "sandbox.tmp_size"),  # under Docker's minimum
        ("sandbox:\n  tmp_size: 3g\n", "sandbox.tmp_size"),  # larger than memory (2g)
        ("sandbox:\n  memory: 512m\n  tmp_size: 1g\n", "sandbox.tmp_size"),
        ("sandbox:\n  writable_layer_size: ten\n", "sandbox.writable_layer_size"),
        ("sandbox:\n  writable_layer_size: ''\n", "sandbox.writable_layer_size"),
        ("sandbox:\n  max_read_bytes: 1000\n", "sandbox.max_read_bytes"),  # under 1 MiB
        ("sandbox:\n  max_read_bytes: 64m\n", "sandbox.max_read_bytes"),  # a count, not a size
        ("mine:\n  max_file_bytes: 0\n", "mine.max_file_bytes"),
        ("mine:\n  max_bytes: -1\n", "mine.max_bytes"),
        ("validate:\n  test_timeout_s: 0\n", "validate.test_timeout_s"),
        ("validate:\n  reruns: -1\n", "validate.reruns"),
        ("validate:\n  max_log_bytes: 0\n", "validate.max_log_bytes"),
        ("sources:\n  max_releases: 0\n", "sources.max_releases"),
        ("sources:\n  pypi_url: pypi.org\n", "sources.pypi_url"),
        ("mine:\n  max_commits: -5\n", "mine.max_commits"),
        ("environment:\n  build_timeout_s: 0\n", "environment.build_timeout_s"),
        ("environment:\n  build_network: bridge\n", "environment.build_network"),  # removed
        ("environment:\n  pythons: [3.10]\n", "environment.pythons[0]"),  # YAML reads 3.1
        ("environment:\n  default_python: '3.15'\n", "environment.default_python"),
        ("inject:\n  max_candidates: 0\n", "inject.max_candidates"),
        ("inject:\n  combos: -1\n", "inject.combos"),
        ("curate:\n  num_perm: 0\n", "curate.num_perm"),
        ("curate:\n  bands: 0\n", "curate.bands"),
        ("curate:\n  bands: 5\n", "curate.bands"),  # does not divide 128
        ("curate:\n  threshold: 1.5\n", "curate.threshold"),
        ("curate:\n  threshold: 0\n", "curate.threshold"),
        ("curate:\n  decontam_threshold: -0.1\n", "curate.decontam_threshold"),
        ("curate:\n  decontam_ngram: 0\n", "curate.decontam_ngram"),
        ("curate:\n  dedup_fields: []\n", "curate.dedup_fields"),
        ("export:\n  validation_fraction: 1\n", "export.validation_fraction"),
        ("export:\n  validation_fraction: -0.1\n", "export.validation_fraction"),
        ("export:\n  shard_rows: 0\n", "export.shard_rows"),
        ("export:\n  name: ''\n", "export.name"),
        ("llm:\n  base_url: localhost:8000/v1\n", "llm.base_url"),
        ("llm:\n  timeout_s: 0\n", "llm.timeout_s"),
        ("llm:\n  max_retries: -1\n", "llm.max_retries"),
        ("llm:\n  temperature: -0.5\n", "llm.temperature"),
        ("describe:\n  min_chars: 0\n", "describe.min_chars"),
        ("rollout:\n  max_time_s: 0\n", "rollout.max_time_s"),
        ("rollout:\n  temperature: .nan\n", "rollout.temperature"),
        ("explore:\n  explorations: 0\n", "explore.explorations"),
        ("explore:\n  command_timeout_s: 0\n", "explore.command_timeout_s"),
        ("pipeline:\n  shards: 0\n", "pipeline.shards"),
        ("pipeline:\n  runner: ''\n", "pipeline.runner"),
        ("cache_dir: ''\n", "cache_dir"),
    ],
)
def test_out_of_range_values_name_the_key(tmp_path, text, key):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_params(str(path))
    message = str(info.value)
    assert message.startswith(f"params: {key} ") or f" {key} " in message, message
    assert "\n" not in message


@pytest.mark.parametrize("memory", ["2g", "512m", "1.5g", "2gb", "512M", "6m", "8388608"])
def test_docker_memory_sizes_are_accepted(tmp_path, memory):
    path = tmp_path / "params.yaml"
    path.write_text(f"sandbox:\n  memory: '{memory}'\n  tmp_size: '{memory}'\n")
    box = load_params(str(path)).sandbox
    assert box.memory == box.tmp_size == memory  # a tmp_size reads like a memory size


def test_tmp_size_larger_than_memory_names_both_keys(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("sandbox:\n  memory: 512m\n  tmp_size: 1g\n")
    with pytest.raises(ParamsError, match=r"sandbox\.tmp_size .*sandbox\.memory"):
        load_params(str(path))
    path.write_text("sandbox:\n  memory: 1g\n  tmp_size: 1g\n")  # equal is allowed
    assert load_params(str(path)).sandbox.tmp_size == "1g"


def test_sandbox_limits_come_from_params(tmp_path):
    """make_sandbox passes every sandbox knob into Limits; Limits' defaults are SandboxParams'."""
    local = Params(cache_dir=str(tmp_path), sandbox=SandboxParams(kind="local"))
    assert make_sandbox(local, quiet=True).limits == Limits()
    path = tmp_path / "params.yaml"
    path.write_text(
        f"cache_dir: {tmp_path / 'cache'}\n"
        "sandbox:\n  kind: local\n  memory: 3g\n  cpus: 2\n  pids: 99\n  tmp_size: 1.5g\n"
        "  writable_layer_size: 20g\n  max_read_bytes: 2097152\n"
        "validate:\n  max_log_bytes: 1234\n"
    )
    sandbox = make_sandbox(load_params(str(path)), quiet=True)
    assert sandbox.limits == Limits(
        memory="3g",
        cpus=2.0,
        pids=99,
        max_output_bytes=1234,
        tmp_size="1.5g",
        writable_layer_size="20g",
        max_read_bytes=2 * 1024 * 1024,
    )


def test_overrides_are_checked_again():
    """Commands set values from flags, then call check(): the same rules apply."""
    params = Params()
    params.sandbox.pids = 0
    with pytest.raises(ParamsError, match=r"sandbox\.pids"):
        params.check()


def test_every_supported_mode_loads(tmp_path):
    path = tmp_path / "params.yaml"
    for mode in CHOICES["inject.mode"]:
        path.write_text(f"inject:\n  mode: {mode}\n")
        assert load_params(str(path)).inject.mode == mode
