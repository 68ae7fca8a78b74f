"""Options every stage command shares, and params with the command line's overrides.

Light on purpose: the CLI imports it to build its parser, before any stage (or Beam) is loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from trajforge.schemas.errors import UserError
from trajforge.schemas.params import DASK, Params, is_dask, load_params


def positive_int(text: str) -> int:
    """An argparse ``type``: a count of at least 1 (argparse prints the one line and exits 2)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def count(text: str) -> int:
    """An argparse ``type``: 0 or more (``--reruns 0``: none)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
    parser.add_argument(
        "--runner", help="local (default), dask, DataflowRunner, FlinkRunner, SparkRunner"
    )
    parser.add_argument("--shards", type=positive_int, help="Parquet files per output table")
    dask = parser.add_mutually_exclusive_group()
    dask.add_argument(
        "--dask_client_address", metavar="HOST:PORT",
        help="run on this Dask scheduler (picks the dask runner; default: "
        "pipeline.dask_scheduler, else a LocalCluster started for the run)",
    )  # fmt: skip
    dask.add_argument(
        "--dask_scheduler_file",
        metavar="PATH",
        help="run on the Dask scheduler this file names (`dask scheduler --scheduler-file`)",
    )
    parser.add_argument(
        "--dask_workers", type=positive_int, metavar="N",
        help="worker processes of the Dask LocalCluster started when no scheduler is given "
        "(picks the dask runner; default: pipeline.workers)",
    )  # fmt: skip


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """``--repo`` / ``--pypi``, repeatable: they replace the stage's configured sources."""
    parser.add_argument("--repo", action="append", default=[], help="local path or git URL")
    parser.add_argument("--pypi", action="append", default=[], help="PyPI package name")


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """What grading commands (evaluate, serve-rewards) share: the tasks, where their code is, the
    test run's limit, the sandbox and the params."""
    parser.add_argument(
        "--tasks", action="append", required=True, metavar="DIR",
        help="a stage output (validate or later) or an exported dataset (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--source", action="append", default=[], metavar="REPO=PATH_OR_URL",
        help="where a task repo's code is on this machine (repeatable; default: the task's own)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, help="seconds per test run (default: params)")
    parser.add_argument(
        "--sandbox", choices=("docker", "podman", "local"), help="default: sandbox.kind"
    )
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
    parser.add_argument(
        "--fail-fast", action="store_true",
        help="run FAIL_TO_PASS first and stop when one fails: a wrong patch costs its failing "
        "tests, not the suite; PASS_TO_PASS are then NOT_RUN, never passed",
    )  # fmt: skip
    parser.add_argument(
        "--strict", action="store_true",
        help="a patch whose source inspects its caller, reads the tests or reaches into the test "
        "runner (suspicious_patch) is unresolved, reward 0; without it, only reported",
    )  # fmt: skip


def load_for_tasks(args: argparse.Namespace) -> tuple[Params, dict]:
    """Params with ``--sandbox`` applied and the ``--tasks`` by instance id (see
    ``add_task_options``); one UserError line for bad params, sources or task directories."""
    from trajforge.pipelines.evaluation.task_rows import load_tasks, parse_sources

    params = load(args)
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    params.check()
    return params, load_tasks(args.tasks, parse_sources(args.source))


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: llm.base_url)")
    parser.add_argument("--model", help="served model name (default: llm.model)")


def load(args: argparse.Namespace) -> Params:
    """The params file (``--params``, else ./params.yaml, else defaults) with run overrides."""
    path = getattr(args, "params", None)
    if path is None and os.path.exists("params.yaml"):
        path = "params.yaml"
    params = load_params(path)
    _reachable(args)
    if getattr(args, "runner", None):
        params.pipeline.runner = args.runner
    if getattr(args, "shards", None) is not None:
        params.pipeline.shards = args.shards
    _dask_overrides(args, params)
    return params


def _reachable(args: argparse.Namespace) -> None:
    """Every object-store location the command line names answers, else one line at once (Beam's
    own S3 client retries a refused connection for minutes)."""
    named: list[str] = []
    for name in ("input", "paths", "output", "tasks"):
        value = getattr(args, name, None) or []
        named.extend(value if isinstance(value, list) else [value])
    remote = [str(path) for path in named if "://" in str(path)]
    if remote:
        from trajforge.schemas.storage import check_reachable

        for path in remote:
            check_reachable(path)


def _dask_overrides(args: argparse.Namespace, params: Params) -> None:
    """``--dask_client_address`` / ``--dask_scheduler_file`` / ``--dask_workers`` run the stage on
    Dask (they pick the dask runner); with ``--runner`` naming another runner, one line."""
    address = getattr(args, "dask_client_address", None)
    scheduler_file = getattr(args, "dask_scheduler_file", None)
    workers = getattr(args, "dask_workers", None)
    flags = {
        "--dask_client_address": address,
        "--dask_scheduler_file": scheduler_file,
        "--dask_workers": workers,
    }
    given = [flag for flag, value in flags.items() if value]
    if not given:
        return
    runner = getattr(args, "runner", None)
    if runner and not is_dask(runner):
        raise UserError(f"{given[0]} runs a stage on Dask, but --runner is {runner}")
    if scheduler_file and not os.path.isfile(scheduler_file):
        raise UserError(
            f"--dask_scheduler_file {scheduler_file}: no such file; start the scheduler with "
            f"`dask scheduler --scheduler-file {scheduler_file}` first"
        )
    params.pipeline.runner = DASK
    if address or scheduler_file:
        params.pipeline.dask_scheduler = address or scheduler_file
    if workers is not None:
        params.pipeline.workers = workers


def endpoint_overrides(args: argparse.Namespace, params: Params) -> None:
    if args.base_url:
        params.llm.base_url = args.base_url
    if args.model:
        params.llm.model = args.model
    params.check()


def warn(stage: str) -> Callable[[str], None]:
    """A stage's one-line warnings, on stderr (the run goes on)."""
    return lambda line: print(f"{stage}: {line}", file=sys.stderr)
