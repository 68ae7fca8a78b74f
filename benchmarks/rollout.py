"""Rollout throughput on real tasks, with an oracle model behind a real OpenAI-compatible server.

The oracle writes the task's gold patch to a file through the ``create`` tool, applies it with
``git apply`` through ``bash`` and submits: three model turns, the same tool and verification path
as any model. So the figures measure trajforge's own cost per rollout (containers, tools,
verification) and check the verifier on real tasks: every oracle run must come out resolved.

Three passes over the same tasks, in the same run:

- ``baseline``: one rollout at a time (``rollout.workers = 1``), cold caches;
- ``parallel``: ``--workers`` at a time, cold caches;
- ``rerun``: the parallel pass again on its warm cache (no calls, no containers).

Each pass is ``trajforge rollout`` itself (Beam start-up included), on its own cache directory.

Usage: ``python benchmarks/rollout.py --input data/describe [--tasks 12] [--workers 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the scripted OpenAI-compatible server

from scripted_llm import ScriptedLLM, tool_call, turn  # noqa: E402
from trajforge.schemas.storage import read_records, write_records  # noqa: E402
from trajforge.schemas.task_instance import TaskInstance  # noqa: E402
from trajforge.schemas.trajectory import Trajectory  # noqa: E402

PROJECT_PARAMS = os.path.join(ROOT, "params.yaml")
TRAJFORGE = os.path.join(os.path.dirname(sys.executable), "trajforge")


def oracle(patches: dict[str, str]):
    """Finds the task by its issue text in the prompt and plays back the gold patch."""

    def respond(request):
        issue = request["messages"][1]["content"]
        patch = next((p for s, p in patches.items() if s in issue), "")
        steps = [
            tool_call("create", path="/tmp/gold.patch", file_text=patch),
            tool_call("bash", command="git apply /tmp/gold.patch"),
            tool_call("submit"),
        ]
        return {"content": "", "tool_calls": [steps[min(turn(request), 2)]]}

    return respond


RESULT_CACHES = ("llm", "rollout", "verify")  # what a pass must start without


def cold_cache(source_cache: str, path: str) -> str:
    """A cache with the sources (clones, PyPI histories) but no model answers, runs or verdicts."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(source_cache):
        if name not in RESULT_CACHES:
            os.symlink(os.path.abspath(os.path.join(source_cache, name)), os.path.join(path, name))
    return path


def one_pass(server: ScriptedLLM, input_dir: str, work: str, cache: str, workers: int) -> dict:
    """``trajforge rollout`` as a user runs it, with its own params and cache directory."""
    params = os.path.join(work, f"params-{workers}.yaml")
    with open(PROJECT_PARAMS) as handle:  # the sources must be read as the tasks were made
        settings = yaml.safe_load(handle)
    settings["cache_dir"] = cache
    settings["rollout"] = {**settings.get("rollout", {}), "workers": workers, "max_steps": 5}
    settings["llm"] = {"base_url": server.base_url, "model": "oracle", "concurrency": workers}
    with open(params, "w") as handle:
        yaml.safe_dump(settings, handle)
    output = tempfile.mkdtemp(dir=work)
    command = [TRAJFORGE, "rollout", "--params", params, "--input", input_dir, "--output", output]
    calls_before, started = len(server.requests), time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    seconds = time.monotonic() - started
    done = read_records(Trajectory, os.path.join(output, "trajectories"))
    return {
        "seconds": round(seconds, 2),
        "rollouts": len(done),
        "resolved": sum(bool(t.resolved) for t in done),
        "rollouts_per_hour": round(len(done) / seconds * 3600, 1),
        "llm_calls": len(server.requests) - calls_before,  # requests the server answered
        "unresolved": [t.instance_id for t in done if not t.resolved],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default="data/describe", help="a describe output")
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", default=".cache/trajforge", help="where the sources are cached")
    args = parser.parse_args()
    tasks = sorted(
        read_records(TaskInstance, os.path.join(args.input, "tasks")), key=lambda t: t.instance_id
    )[: args.tasks]
    patches = {t.problem_statement: t.patch for t in tasks}
    with ScriptedLLM(oracle(patches)) as server, tempfile.TemporaryDirectory() as work:
        input_dir = os.path.join(work, "input")
        write_records(
            os.path.join(input_dir, "tasks", "part-0.parquet"), tasks, TaskInstance.ARROW_SCHEMA
        )
        cold = cold_cache(args.cache, os.path.join(work, "cache-a"))
        warm = cold_cache(args.cache, os.path.join(work, "cache-b"))
        baseline = one_pass(server, input_dir, work, cold, workers=1)
        parallel = one_pass(server, input_dir, work, warm, args.workers)
        rerun = one_pass(server, input_dir, work, warm, args.workers)
    figures = {
        "tasks": len(tasks),
        "workers": args.workers,
        "baseline": baseline,
        "parallel": parallel,
        "rerun": rerun,
        "speedup_parallel_vs_baseline": round(baseline["seconds"] / parallel["seconds"], 2),
        "speedup_rerun_vs_baseline": round(baseline["seconds"] / max(rerun["seconds"], 1e-3), 1),
        "oracle_resolved_share": round(parallel["resolved"] / max(len(tasks), 1), 3),
    }
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
