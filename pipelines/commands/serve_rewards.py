"""``trajforge serve-rewards``: an HTTP reward service over trajforge tasks, for RL trainers."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "serve-rewards"
HELP = "serve rewards over HTTP: POST a task id and a patch, get reward, resolved and the report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_task_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    parser.add_argument("--workers", type=options.positive_int, default=2,
                        help="patches graded at once (default 2)")  # fmt: skip
    parser.add_argument("--queue", type=options.count, default=64,
                        help="requests that may wait beyond the workers (default 64)")  # fmt: skip
    parser.add_argument(
        "--request-timeout", type=float, default=900.0,
        help="seconds a request may take, waiting included (default 900)",
    )  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.evaluation.evaluator import IMAGE_COUNTERS, Evaluator
    from trajforge.pipelines.evaluation.service import RewardService, serve

    params, tasks = options.load_for_tasks(args)
    evaluator = Evaluator(
        params, timeout_s=args.timeout, spares=args.workers, fail_fast=args.fail_fast,
        strict=args.strict,
        say=lambda line: print(f"serve-rewards: {line}", flush=True),
    )  # fmt: skip
    service = RewardService(evaluator, tasks, args.workers, args.queue, args.request_timeout)
    server = serve(service, args.host, args.port)
    host, port = args.host, server.server_address[1]
    print(f"serve-rewards: {len(tasks)} tasks, {args.workers} workers, "
          f"POST http://{host}:{port}/reward", flush=True)  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        service.close()
        evaluator.close()
        counts = service.stats()["counts"]
        said = ", ".join(f"{name} {value}" for name, value in counts.items())
        print(f"serve-rewards: stopped; {said or 'no requests'}")
        images = {name: evaluator.counts[name] for name in IMAGE_COUNTERS}
        if any(images.values()):
            print("serve-rewards: " + ", ".join(f"{k} {v}" for k, v in images.items() if v))
        for tag, runs in sorted(evaluator.images.items()):
            print(f"serve-rewards: graded {runs} request(s) in {tag}")
    return 0
