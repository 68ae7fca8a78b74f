"""Model-written bugs (inject.mode llm|both): a model rewrites one function to hold a bug.

The model is the only stand-in: a scripted OpenAI-compatible server (tests/scripted_llm.py) that
answers per function, or the real llama.cpp server with random weights. Everything else is real:
the CLI, git, libcst, the validate stage's containers.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import RepoBuilder
from scripted_llm import ScriptedLLM
from trajforge.generators.bugs.llm_rewrite import (
    REASONS,
    check_rewrite,
    collect_test_ids,
    rewrite_functions,
)
from trajforge.generators.languages.python.mutations import pick_functions
from trajforge.generators.llm import client as llm_client
from trajforge.generators.llm.client import LLMClient
from trajforge.schemas.diff import unified_diff
from trajforge.schemas.params import LLMParams

pytestmark = [pytest.mark.docker, pytest.mark.podman, pytest.mark.llama]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tally"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["tally"]
"""

CORE = '''\
"""Small functions with branches: room for a model's bugs."""


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(items):
    result = 0
    for item in items:
        if item > 0:
            result += item
    return result


def count_up(n):
    i = 0
    steps = []
    while i < n:
        steps.append(i)
        i += 1
    return steps


def parse_pair(text):
    try:
        left, right = text.split(",")
        return int(left), int(right)
    except ValueError:
        return None


def sign(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def scale(values, factor):
    if factor == 0:
        return [0 for _ in values]
    return [v * factor for v in values]


def first_word(text):
    words = text.split()
    if not words:
        return ""
    return words[0]


def never_tested(x, y):
    if x > y and y > 0:
        return x - y
    return y - x
'''

TESTS = """\
from tally.core import clamp, count_up, first_word, parse_pair, scale, sign, total


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_total_skips_negatives():
    assert total([1, -2, 3]) == 4


def test_count_up():
    assert count_up(3) == [0, 1, 2]


def test_parse_pair():
    assert parse_pair("1,2") == (1, 2)


def test_sign():
    assert [sign(-3), sign(0), sign(4)] == [-1, 0, 1]


def test_scale():
    assert scale([1, 2], 3) == [3, 6]


class TestWords:
    def test_first_word(self):
        assert first_word("a b") == "a"
"""

TEST_IDS = [
    "tests/test_core.py::test_clamp_low",
    "tests/test_core.py::test_clamp_high",
    "tests/test_core.py::test_clamp_inside",
    "tests/test_core.py::test_total_skips_negatives",
    "tests/test_core.py::test_count_up",
    "tests/test_core.py::test_parse_pair",
    "tests/test_core.py::test_sign",
    "tests/test_core.py::test_scale",
    "tests/test_core.py::TestWords::test_first_word",
]

CLAMP_INTENT = "values above the upper bound come back as the lower bound"


def _function(name: str) -> str:
    """The function ``name`` of CORE, as the model is shown it."""
    start = CORE.index(f"def {name}(")
    end = CORE.find("\n\n\n", start)
    return CORE[start:] if end < 0 else CORE[start : end + 1]


# What the scripted model answers for each function it is asked to rewrite.
ANSWERS = {
    # a real bug that a test catches: validation keeps it
    "clamp": "```python\n"
    + _function("clamp").replace("        return hi\n", "        return lo\n")
    + f"```\nBug: {CLAMP_INTENT}.",
    # a rewrite that changes the text but not the behaviour: validation rejects it (no test fails)
    "total": "```python\n"
    + _function("total").replace("result += item", "result = result + item")
    + "```\nBug: adds the items in another way.",
    # a real bug no test covers: validation rejects it
    "never_tested": "```python\n"
    + _function("never_tested").replace("x > y and", "x >= y and")
    + "```\nBug: equal values take the first branch.",
    # the rest never reach validation
    "count_up": "Here is the function with a bug:\n```python\n"
    + _function("count_up")
    + "    # nothing changed\n```\nBug: none.",  # unchanged, a comment aside
    "parse_pair": "I would rather not write bugs into working code.",  # prose, no code
    "sign": "```python\ndef sign(x)\n    if x > 0:\n        return 1\n    return 0\n```",
    "scale": "```python\n"
    + _function("scale").replace("v * factor", "v + factor")
    + "\n\n"
    + _function("clamp")
    + "```\nBug: adds instead of multiplying.",  # and clamp, which it was not asked to touch
    "first_word": "```python\n"
    + _function("first_word").replace("def first_word(text):", "def first_word(text, n=0):")
    + "```\nBug: takes an extra parameter.",
}


def _asked_for(request: dict[str, Any]) -> str:
    last = request["messages"][-1]["content"]
    found = re.search(r"Rewrite the function `([\w.]+)`", last)
    assert found, last
    return found.group(1)


def _respond(request: dict[str, Any]) -> dict[str, Any]:
    return {"content": ANSWERS[_asked_for(request)]}


@pytest.fixture(scope="module")
def tally_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llm-bugs") / "tally"
    RepoBuilder(path).commit(
        "tally",
        {
            "pyproject.toml": PYPROJECT,
            "tally/__init__.py": "",
            "tally/core.py": CORE,
            "tests/test_core.py": TESTS,
        },
    )
    return path


def _rows(directory: Path) -> list[dict[str, Any]]:
    files = sorted(directory.glob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]).to_dicts() if files else []


def _summary(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "summary.json").read_text())


# --- the checks on a model's answer (no model needed) -----------------------------------------


STACK = '''\
class Stack:
    """LIFO."""

    def __init__(self):
        self.items = []

    @property
    def size(self):
        return len(self.items)

    def push(self, item, limit=3):
        """Push unless full; returns whether it did."""
        if len(self.items) >= limit:
            return False
        self.items.append(item)
        return True
'''


def _push():
    functions, _ = pick_functions({"stack.py": STACK}, seed=0, count=10, min_complexity=1)
    return next(f for f in functions if f.target.qualname == "Stack.push")


PUSH = _push().code
PUSH_BUG = '''\
def push(self, item, limit=3):
    """Push unless full; returns whether it did."""
    if len(self.items) > limit:
        return False
    self.items.append(item)
    return True
'''


def _fenced(old: str, new: str) -> str:
    """The model's answer: PUSH_BUG with ``old`` replaced by ``new``, in a code block."""
    return f"```python\n{PUSH_BUG.replace(old, new)}```"


INDENTED_BUG = "".join("    " + line for line in PUSH_BUG.splitlines(keepends=True))
REFORMATTED = PUSH.replace("    if", "\n    if")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (f"```python\n{PUSH_BUG}```\nBug: one item too many fits.", "accepted"),
        (f"```py\n{INDENTED_BUG}```", "accepted"),
        (PUSH_BUG + "Bug: bare code, no fence", "accepted"),
        (f"```python\n{PUSH_BUG}```", "accepted"),  # no Bug: line is no reason to drop a bug
        (f"```diff\n-a\n+b\n```\nThe bug:\n```python\n{PUSH_BUG}```", "accepted"),
        (f"```python\n{PUSH_BUG}\nBug: it forgot to close the fence", "accepted"),
        ("The function looks correct to me.", "rewrite_no_code"),
        ("", "rewrite_no_code"),
        ("```python\ndef push(self, item, limit=3:\n    return 1\n```", "rewrite_unparsable"),
        ("```python\ndef push(self, item, limit=3):\nreturn 1\n```", "rewrite_unparsable"),
        ("```python\ndef push(self, item, limit=3):\n    yield = 1\n```", "rewrite_unparsable"),
        (f"```python\nimport os\n\n{PUSH_BUG}```", "rewrite_touches_other_code"),
        (f"```python\nclass Stack:\n    pass\n\n{PUSH_BUG}```", "rewrite_touches_other_code"),
        ("```python\ndef size(self):\n    return 0\n```", "rewrite_touches_other_code"),
        (f"```python\n{PUSH_BUG.replace('limit=3', 'limit=4')}```", "rewrite_changes_signature"),
        (f"```python\n{PUSH_BUG.replace('item,', 'thing,')}```", "rewrite_changes_signature"),
        (_fenced("def push", "def push_many"), "rewrite_changes_signature"),
        (f"```python\n@staticmethod\n{PUSH_BUG}```", "rewrite_changes_signature"),
        (_fenced("def push", "async def push"), "rewrite_changes_signature"),
        (f"```python\n{PUSH}```", "rewrite_unchanged"),
        (f"```python\n{PUSH.replace('>= limit:', '>= limit:  # full')}```", "rewrite_unchanged"),
        (f"```python\n{REFORMATTED}```", "rewrite_unchanged"),
        (_fenced("> limit:", "> limit:  # off by one"), "rewrite_annotates_bug"),
        (_fenced("Push unless full", "Push (one too many)"), "rewrite_annotates_bug"),
    ],
)  # fmt: skip
def test_each_answer_is_checked(reply: str, reason: str) -> None:
    checked = check_rewrite(_push(), STACK, reply)
    assert checked.reason == reason, checked.detail
    if reason != "accepted":
        assert checked.mutated == "" and checked.detail.startswith("Stack.push (stack.py): ")
        assert REASONS[reason] in checked.detail
        return
    # only the one line of the bug changes; the method keeps its class's indentation
    patch = unified_diff("stack.py", STACK, checked.mutated)
    changed = [line for line in patch.splitlines() if line[:1] in "+-" and line[:3] not in "---+++"]
    assert changed == [
        "-        if len(self.items) >= limit:",
        "+        if len(self.items) > limit:",
    ]


def test_truncated_answer_and_the_models_intent() -> None:
    push = _push()
    cut = "```python\n" + PUSH_BUG[:60]
    assert check_rewrite(push, STACK, cut, truncated=True).reason == "rewrite_truncated"
    # a code block that closed before the cut is still a whole function
    whole = f"```python\n{PUSH_BUG}```\nBug: the full check is off by one, so a fou"
    checked = check_rewrite(push, STACK, whole, truncated=True)
    assert checked.reason == "accepted"
    assert checked.intent == "the full check is off by one, so a fou"
    assert check_rewrite(push, STACK, f"**Bug:** it fits one more\n```python\n{PUSH_BUG}```").intent
    # a property and its setter share a qualname: the picked one is the one rewritten
    source = (
        "class A:\n    @property\n    def v(self):\n        if self:\n            return 1\n"
        "        return 0\n\n    @v.setter\n    def v(self, x):\n        if x:\n"
        "            self.x = x\n"
    )
    setter = [f for f in pick_functions({"a.py": source}, seed=0, count=5)[0] if f.index == 1]
    (function,) = setter
    answer = "```python\ndef v(self, x):\n    if not x:\n        self.x = x\n```"
    mutated = check_rewrite(function, source, answer).mutated
    assert mutated == source.replace("        if x:\n", "        if not x:\n")


def test_test_names_are_pytest_ids() -> None:
    assert (
        collect_test_ids({"tests/test_core.py": TESTS, "tests/test_bad.py": "def (:"}) == TEST_IDS
    )


def test_llm_mode_needs_an_endpoint(tmp_path: Path, tally_repo: Path) -> None:
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")
    done = run_cli(
        "inject", "--repo", str(tally_repo), "--mode", "llm", "--params", str(params),
        "--output", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "trajforge: inject: mode llm has a model rewrite functions, but no endpoint is "
        "configured; set llm.base_url and llm.model (or --base-url and --model)"
    ]
    bad = write_params(tmp_path / "bad.yaml", tmp_path / "cache", "inject:\n  mode: neural\n")
    done = run_cli(
        "inject", "--repo", str(tally_repo), "--params", str(bad),
        "--output", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "inject.mode" in done.stderr and "procedural, llm, both" in done.stderr


# --- the scripted model through the real CLI --------------------------------------------------


def test_mode_both_mixes_operator_and_model_bugs(tmp_path: Path, tally_repo: Path) -> None:
    # every function asked for: unguided (guided picks: test_coverage_sites.py)
    extra = "inject:\n  measure_coverage: false\n"
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", extra)
    with ScriptedLLM(_respond) as llm:
        done = run_cli(
            "inject", "--repo", str(tally_repo), "--mode", "both", "--max-candidates", "5",
            "--base-url", llm.base_url, "--model", "scripted", "--params", str(params),
            "--output", str(tmp_path / "both"), cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    origins = [row["origin"] for row in _rows(tmp_path / "both" / "candidates")]
    reasons = [row["reason"] for row in _rows(tmp_path / "both" / "rejections")]
    # clamp, total and never_tested are code that changes; one may be a bug an operator made too
    assert origins.count("bug/llm") + reasons.count("rewrite_duplicate") == 3
    assert origins.count("bug/llm") >= 2
    procedural = [o for o in origins if o != "bug/llm"]
    assert len(procedural) == 5 and all(o.startswith("bug/") for o in procedural)
    assert len(llm.requests) == 8  # every function of complexity >= 2, once


def test_scripted_model_bugs_are_validated_like_procedural_ones(
    tmp_path: Path, tally_repo: Path, docker_engine: None
) -> None:
    params = write_params(
        tmp_path / "params.yaml",
        tmp_path / "cache",
        "inject:\n  mode: llm\n  llm_rewrites: 20\n  measure_coverage: false\n",
    )
    endpoint = ("--model", "scripted", "--params", str(params))
    with ScriptedLLM(_respond) as llm:
        done = run_cli(
            "inject", "--repo", str(tally_repo), "--base-url", llm.base_url, *endpoint,
            "--output", str(tmp_path / "inject"), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        asked = [_asked_for(r) for r in llm.requests]
        again = run_cli(
            "inject", "--repo", str(tally_repo), "--base-url", llm.base_url, *endpoint,
            "--output", str(tmp_path / "inject-again"), cwd=tmp_path,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert len(llm.requests) == len(asked)  # the rerun's answers all come from the cache
    assert sorted(asked) == sorted(ANSWERS)  # each function of complexity >= 2, once
    # the model is told which tests exist, never which of them will fail
    for request in llm.requests:
        prompt = request["messages"][-1]["content"]
        assert all(f"- {test_id}\n" in prompt + "\n" for test_id in TEST_IDS)
        assert "tally/core.py" in prompt
    # every answer that cannot be a bug is one counted rejection, with its reason
    candidates = _rows(tmp_path / "inject" / "candidates")
    rejections = _rows(tmp_path / "inject" / "rejections")
    by_function = {r["input"].rsplit("::", 1)[-1]: r["reason"] for r in rejections}
    assert by_function == {
        "count_up": "rewrite_unchanged",
        "parse_pair": "rewrite_no_code",
        "sign": "rewrite_unparsable",
        "scale": "rewrite_touches_other_code",
        "first_word": "rewrite_changes_signature",
    }
    assert (
        _summary(tmp_path / "inject-again")["rejected"] == _summary(tmp_path / "inject")["rejected"]
    )
    assert {c["origin"] for c in candidates} == {"bug/llm"} and len(candidates) == 3
    (clamp,) = [c for c in candidates if "rewrote clamp " in c["meta"]["message"]]
    assert clamp["meta"]["message"] == (
        f"llm:scripted rewrote clamp (tally/core.py): {CLAMP_INTENT}."
    )
    assert (
        "+        return lo\n" in clamp["bug_patch"]
        and "-        return hi\n" in clamp["bug_patch"]
    )

    validate = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = _rows(tmp_path / "val" / "tasks")
    dropped = {r["input"]: r["reason"] for r in _rows(tmp_path / "val" / "rejections")}
    (task,) = tasks  # the clamp bug, proven; the other two are counted rejections
    assert task["candidate_id"] == clamp["candidate_id"] and task["origin"] == "bug/llm"
    assert task["FAIL_TO_PASS"] == ["tests/test_core.py::test_clamp_high"]
    assert "tests/test_core.py::test_clamp_low" in task["PASS_TO_PASS"]
    assert task["bug_patch"] == clamp["bug_patch"] and task["patch"] == clamp["patch"]
    provenance = dict(task["provenance"])
    assert CLAMP_INTENT in provenance["bug_intent"]
    assert task["problem_statement"] == ""
    others = {c["candidate_id"] for c in candidates} - {task["candidate_id"]}
    assert {dropped[c] for c in others} <= {"equivalent", "not_covered"}
    assert len(others & set(dropped)) == 2

    # the intent stays in provenance: the issue text is written without it
    describe = run_cli(
        "describe", "--input", str(tmp_path / "val"), "--output", str(tmp_path / "desc"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert describe.returncode == 0, describe.stderr
    (described,) = _rows(tmp_path / "desc" / "tasks")
    statement = described["problem_statement"]
    assert statement and CLAMP_INTENT not in statement and "lower bound" not in statement
    assert CLAMP_INTENT in dict(described["provenance"])["bug_intent"]


# --- a real model server: random weights, every answer rejected and counted -------------------


def test_llama_server_garbage_is_rejected_and_counted(
    tmp_path: Path, tally_repo: Path, llama_endpoint: dict[str, str]
) -> None:
    params = write_params(
        tmp_path / "params.yaml", tmp_path / "cache", "llm:\n  max_tokens: 64\n  timeout_s: 300\n"
    )
    done = run_cli(
        "inject", "--repo", str(tally_repo), "--mode", "llm", "--llm-rewrites", "3",
        "--base-url", llama_endpoint["base_url"], "--model", llama_endpoint["model"],
        "--params", str(params), "--output", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _rows(tmp_path / "out" / "candidates") == []
    rejections = _rows(tmp_path / "out" / "rejections")
    assert len(rejections) == 3
    for rejection in rejections:
        assert rejection["stage"] == "inject"
        assert rejection["reason"] in REASONS, rejection
        assert rejection["input"].startswith("local/tally@")
    summary = _summary(tmp_path / "out")
    assert sum(summary["rejected"].values()) == 3, summary


def test_only_the_requests_run_on_the_pool_and_every_parse_on_the_caller(tmp_path: Path) -> None:
    """CPython 3.11 < 3.11.8 raises SystemError when two threads parse at once (gh-106905).

    The pool's threads are profiled: none of them may enter ``ast.parse``, and eight workers give
    the outcomes one worker gives.
    """
    functions, _ = pick_functions({"tally/core.py": CORE}, seed=0, count=8, min_complexity=1)
    assert len(functions) >= 4
    parsed_off_caller: list[str] = []
    caller = threading.current_thread()

    def not_caller() -> bool:
        return threading.current_thread() is not caller

    def watch(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is ast.parse.__code__ and not_caller():
            parsed_off_caller.append(threading.current_thread().name)

    def outcomes(workers: int) -> list[tuple[str, str, str]]:
        llm_client._SLOTS.clear()
        params = LLMParams(base_url=server.base_url, model="scripted", cache=False)
        client = LLMClient(params, str(tmp_path / f"cache{workers}"))
        threading.setprofile(watch)
        try:
            found = rewrite_functions(
                client,
                functions,
                {"tally/core.py": CORE},
                {"tests/test_core.py": TESTS},
                seed=0,
                workers=workers,
            )
        finally:
            threading.setprofile(None)
        return [
            (o.function.target.qualname, o.reason, o.mutant.mutated if o.mutant else "")
            for o in found
        ]

    second = threading.Event()  # in the eight-worker run the first answer waits for a second
    arrived: list[int] = []  # request, so the requests overlap whatever the machine's load

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        arrived.append(1)
        if len(arrived) > 1:
            second.set()
        second.wait(10)
        return _respond(request)

    with ScriptedLLM(_respond) as server:
        one = outcomes(1)
    with ScriptedLLM(respond) as server:
        eight = outcomes(8)
    assert server.max_in_flight > 1  # the requests did overlap
    assert parsed_off_caller == []
    assert eight == one
    assert {reason for _, reason, _ in one} >= {"accepted", "rewrite_no_code"}
