"""Every record round-trips through Arrow and Parquet, and its schema names its fields."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from trajforge.schemas import Candidate, CandidateMeta, EnvProfile, Rejection, TaskInstance, TestRun
from trajforge.schemas.records import check_schema, content_id
from trajforge.schemas.storage import ContentCache, read_records, write_records
from trajforge.schemas.task_instance import Validation
from trajforge.schemas.test_run import TestStatus
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

RECORDS = [
    Candidate(
        "c1", "local/calc", "/tmp/calc", "abc", "--- a\n", "--- t\n", "commit", "2024-01-01",
        CandidateMeta("def", "Fix caf\ufffd", "2024-01-01", 2, 3, 1, ("vendor/x.py",)),
    ),
    EnvProfile(
        "p1", "local/calc", "3.11", ("pip install -e .",), "pytest", "img:p1", "built", "", "abc"
    ),
    Rejection("c1", "validate", "no_fail_to_pass", "detail"),
    TestRun(
        "r1", "c1", "p1", "base", 0, ("t::a",), 1, True, False, 0.5,
        (TestStatus("t::a", "FAILED"), TestStatus("t::b[x y]", "PASSED")), (), "d" * 64, "log",
    ),
    TaskInstance(
        "local__calc-c1", "local/calc", "abc", "p", "tp", "", "", "2024-01-01",
        ("t::a",), ("t::b[x y]",), "abc", "img:p1", "pytest", "commit", "p1", "c1", "/tmp/calc",
        ("t::flaky",), None, {"size": 1.0}, {"validated_by": "v1"},
        Validation(1, 0, "a" * 64, "b" * 64, 2, 4), "--- bug\n",
    ),
    Trajectory(
        "t1", "local__calc-c1", "m",
        (
            Message("user", "fix it"),
            Message("assistant", "", (ToolCall("c1", "function", FunctionCall("bash", "{}")),)),
            Message("tool", "calc.py", tool_call_id="c1", name="bash"),
        ),
        "[]", "diff", "submitted", True, 1.0, {"t::a": "PASSED"}, {"prompt_tokens": 3}, "rollout",
    ),
]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip_through_parquet(tmp_path, record):
    cls = type(record)
    check_schema(cls)
    path = str(tmp_path / "table.parquet")
    write_records(path, [record], cls.ARROW_SCHEMA)
    assert pq.read_schema(path).names == cls.ARROW_SCHEMA.names
    assert read_records(cls, path) == [record]


def test_content_ids_are_stable_and_sensitive():
    assert content_id("a", 1) == content_id("a", 1)
    assert content_id("a", 1) != content_id("a", 2)
    assert len(content_id("x")) == 16


def test_content_cache_round_trip_and_torn_entry(tmp_path):
    cache = ContentCache(str(tmp_path), "ns")
    assert cache.get("k" * 32) is None
    cache.put("k" * 32, {"a": [1, 2]})
    assert cache.get("k" * 32) == {"a": [1, 2]}
    torn = tmp_path / "ns" / "kk" / ("k" * 32 + ".json")
    torn.write_text("{not json")
    assert cache.get("k" * 32) is None
