"""``trajforge evaluate``: a model's predictions (SWE-bench's format) graded on trajforge tasks.

Each patch goes to a fresh container of its task's image, on the task's starting tree, test files
reset, the graded tests run: the rollout stage's verifier, so a model's score here and a
trajectory's reward there are the same judgement. Reports land as SWE-bench's harness lays them.
A row's image name is a request: the image runs the row only when it is the row's own (its
digest, or built from its recipe); else the row's recipe is built as ``trajforge-eval:<hash>``
(``generators/environments/task_image.py``), and the summary says which image ran what.
"""

from __future__ import annotations

import argparse
import os

from trajforge.pipelines.commands import options

NAME = "evaluate"
HELP = "grade a model's predictions (SWE-bench format) on trajforge tasks in their environments"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_task_options(parser)
    parser.add_argument(
        "--predictions", required=True,
        help="JSONL or JSON rows: instance_id, model_name_or_path, model_patch",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="where reports and the summary go")
    parser.add_argument("--workers", type=options.positive_int, default=1,
                        help="predictions evaluated at once (default 1)")  # fmt: skip
    parser.add_argument("--run-id", default="evaluate", help="names the summary file")
    parser.add_argument(
        "--no-rebuild", action="store_true",
        help="never rebuild a missing image from the task's recipe (pull it, or report an error)",
    )  # fmt: skip
    parser.add_argument("--no-cache", action="store_true",
                        help="run every prediction, even one judged before")  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.evaluation.evaluator import IMAGE_COUNTERS, Evaluator
    from trajforge.pipelines.evaluation.predictions import read_predictions
    from trajforge.pipelines.evaluation.run import evaluate_predictions, summary_lines
    from trajforge.pipelines.runtime import progress

    params, tasks = options.load_for_tasks(args)
    predictions, problems = read_predictions(args.predictions)
    for problem in problems:
        print(f"evaluate: {problem.detail}")
    evaluator = Evaluator(
        params, use_cache=not args.no_cache, rebuild=not args.no_rebuild,
        timeout_s=args.timeout, spares=args.workers, fail_fast=args.fail_fast,
        strict=args.strict, say=lambda line: progress.say(f"evaluate: {line}"),
    )  # fmt: skip
    try:
        outcome = evaluate_predictions(
            evaluator, tasks, predictions, problems, args.output, args.run_id, args.workers
        )
    finally:
        evaluator.close()
    counts = [(name, evaluator.counts[name]) for name in IMAGE_COUNTERS]
    print("\n".join(summary_lines(outcome, counts)))
    for tag, runs in sorted(evaluator.images.items()):
        print(f"evaluate: ran {runs} prediction(s) in {tag}")
    print(f"evaluate: reports in {os.path.abspath(args.output)}")
    return 0
