"""``trajforge evaluate``: a model's predictions (SWE-bench's format) graded on trajforge tasks.

Each patch goes to a fresh container of its task's image, on the task's starting tree, test files
reset, the graded tests run: the rollout stage's verifier, so a model's score here and a
trajectory's reward there are the same judgement. Reports land as SWE-bench's harness lays them.
"""

from __future__ import annotations

import argparse
import os

from trajforge.pipelines.commands import options

NAME = "evaluate"
HELP = "grade a model's predictions (SWE-bench format) on trajforge tasks in their environments"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks", action="append", required=True, metavar="DIR",
        help="a stage output (validate or later) or an exported dataset (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--predictions", required=True,
        help="JSONL or JSON rows: instance_id, model_name_or_path, model_patch",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="where reports and the summary go")
    parser.add_argument("--workers", type=options.positive_int, default=1,
                        help="predictions evaluated at once (default 1)")  # fmt: skip
    parser.add_argument("--run-id", default="evaluate", help="names the summary file")
    parser.add_argument(
        "--source", action="append", default=[], metavar="REPO=PATH_OR_URL",
        help="where a task repo's code is on this machine (repeatable; default: the task's own)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, help="seconds per test run (default: params)")
    parser.add_argument(
        "--no-rebuild", action="store_true",
        help="never rebuild a missing image from the task's recipe (pull it, or report an error)",
    )  # fmt: skip
    parser.add_argument("--no-cache", action="store_true",
                        help="run every prediction, even one judged before")  # fmt: skip
    parser.add_argument(
        "--sandbox", choices=("docker", "podman", "local"), help="default: sandbox.kind"
    )
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.evaluation.evaluator import REBUILT_COUNTER, Evaluator
    from trajforge.pipelines.evaluation.predictions import read_predictions
    from trajforge.pipelines.evaluation.run import evaluate_predictions, summary_lines
    from trajforge.pipelines.evaluation.task_rows import load_tasks, parse_sources

    params = options.load(args)
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    params.check()
    tasks = load_tasks(args.tasks, parse_sources(args.source))
    predictions, problems = read_predictions(args.predictions)
    for problem in problems:
        print(f"evaluate: {problem.detail}")
    evaluator = Evaluator(
        params, use_cache=not args.no_cache, rebuild=not args.no_rebuild,
        timeout_s=args.timeout, spares=args.workers,
    )  # fmt: skip
    try:
        outcome = evaluate_predictions(
            evaluator, tasks, predictions, problems, args.output, args.run_id, args.workers
        )
    finally:
        evaluator.close()
    counts = [(name, evaluator.counts[name]) for name in ("images_pulled", REBUILT_COUNTER)]
    print("\n".join(summary_lines(outcome, counts)))
    print(f"evaluate: reports in {os.path.abspath(args.output)}")
    return 0
