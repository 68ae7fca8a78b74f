"""Every stage's summary says what it cost (issue 44): core-seconds split into build / test /
other, per kept row, and in dollars when a core-hour has a price. The figures from a real run are
checked where validate runs (``test_gold_runs.py``); here, the arithmetic and the params."""

from __future__ import annotations

from collections import Counter

import pytest
from trajforge.pipelines.runtime import cost
from trajforge.pipelines.runtime.progress import Summary
from trajforge.schemas.params import ParamsError, load_params
from trajforge.verifiers.sandbox import usage


def _summary(kept: int, seconds: float, **extra: object) -> Summary:
    summary = Summary("validate", kept + 1, kept, Counter({"no_fail_to_pass": 1}), seconds)
    summary.kept_table = "tasks"
    summary.extra.update(extra)
    return summary


def test_core_seconds_split_and_per_task() -> None:
    summary = _summary(4, 100.0, sandbox_build_ms=60_000, sandbox_run_ms=90_000)
    cost.fold(summary, cores=2, core_hour_price=0.05)
    extra = summary.extra
    assert extra["core_s"] == "200 (100 s x 2 cores): build 60, test 90, other 50"
    assert extra["tasks_per_core_hour"] == 72.0  # 4 tasks in 200/3600 core-hours
    assert extra["core_s_per_task"] == 50.0
    assert extra["usd_per_task"] == pytest.approx(50 / 3600 * 0.05, abs=1e-4)
    assert cost.BUILD_MS not in extra and cost.RUN_MS not in extra
    assert "core_s: 200" in summary.render()


def test_more_containers_than_cores_leave_no_negative_other_and_nothing_kept_no_ratio() -> None:
    busy = _summary(1, 10.0, sandbox_build_ms=30_000)
    cost.fold(busy, cores=1)
    assert busy.extra["core_s"].endswith("other 0") and "usd_per_task" not in busy.extra
    empty = _summary(0, 10.0)
    cost.fold(empty, cores=2)
    assert empty.extra["core_s"].startswith("20 ") and "tasks_per_core_hour" not in empty.extra


def test_the_sandbox_seconds_drain_once() -> None:
    usage.drain()
    usage.record(usage.BUILD, 1.5)
    usage.record(usage.RUN, 2.0)
    usage.record(usage.RUN, -1.0)  # a clock step back is no negative cost
    assert usage.drain() == {usage.BUILD: 1.5, usage.RUN: 2.0}
    assert usage.drain() == {}


def test_cores_held_and_price_params() -> None:
    params = load_params(None)
    assert params.pipeline.cores_held() >= 1 and params.pipeline.core_hour_price is None
    params.pipeline.runner, params.pipeline.workers = "dask", 6
    assert params.pipeline.cores_held() == 6
    params.pipeline.cores = 16
    assert params.pipeline.cores_held() == 16
    params.pipeline.core_hour_price = -0.1
    with pytest.raises(ParamsError, match=r"pipeline\.core_hour_price"):
        params.check()
