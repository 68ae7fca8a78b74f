"""TAP (version 13 and 14) as written by node's test runner (``--test-reporter=tap``), node-tap
and ava (``--tap``).

Nesting is indentation, four spaces a level; ``# Subtest: name`` announces a test whose result
line follows its children. A test id is the path of names from the top: node-tap's top level is
the file (``test/a.js > adds``), node's runner names describe blocks and tests, ava writes
``file <U+203A> title`` on one line (U+203A becomes the separator). An announced test with
no announced test inside it is a test; a point that was not announced is an assertion inside its
parent (node-tap), whose own line decides, except at the top level where every point is a test.
A failed test whose inner tests all passed or skipped (a file that crashed, a failing hook) is a
collection error. ``1..N`` must count the points of its block, else the stream contradicts itself
and is refused (``problem``), and so is a stream that bailed out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports.ids import ReportError, check_size, record
from trajforge.verifiers.reports.ids import test_id as make_id

# `ok 1 - name # SKIP why`: number and dash optional; a directive is `# skip`/`# todo` (any case)
_POINT = re.compile(r"(not ok|ok)\b(?: +\d+)?(?: +-)?(?: +(.*))?$")
_DIRECTIVE = re.compile(r"(.*?)\s+#\s*(skip|todo)\b.*$", re.IGNORECASE)
_TIME = re.compile(r"(.*?)\s+#\s*time=\S*$")  # node-tap appends ` # time=12ms`
_PLAN = re.compile(r"1\.\.(\d+)\b")
_AVA_SEPARATOR = " \u203a "  # ava's `file <U+203A> title`


@dataclass
class _Point:
    name: str
    status: str
    announced: bool
    children: list[_Point] = field(default_factory=list)

    def test_like(self) -> bool:
        return self.announced or bool(self.children)


@dataclass
class _Block:
    points: list[_Point] = field(default_factory=list)
    plan: int | None = None


def parse_tap(text: str | bytes, split_titles: str = "") -> ParsedLog:
    """Statuses by test id from a TAP stream; ``split_titles`` splits each title into parts."""
    check_size(text, "TAP")
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    blocks: dict[int, _Block] = {0: _Block()}
    announced: dict[int, str] = {}
    yaml_indent: int | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if yaml_indent is not None:  # a point's YAML diagnostics: never read as TAP
            if stripped == "..." and indent <= yaml_indent:
                yaml_indent = None
            continue
        if stripped == "---":
            yaml_indent = indent
        elif stripped.startswith("Bail out!"):
            return ParsedLog({}, (), problem=f"the TAP stream bailed out: {stripped[:120]}")
        elif stripped.startswith("# Subtest:"):
            announced[indent] = stripped[len("# Subtest:") :].strip()
        elif (plan := _PLAN.match(stripped)) is not None:
            block = blocks.setdefault(indent, _Block())
            if block.plan is not None:
                return ParsedLog({}, (), problem=f"two TAP plans at indent {indent} in one block")
            block.plan = int(plan.group(1))
        elif (point := _POINT.match(stripped)) is not None:
            problem = _add_point(blocks, announced, indent, point)
            if problem:
                return ParsedLog({}, (), problem=problem)
    problem = _plan_problem(blocks.get(0, _Block()), 0)
    if problem:
        return ParsedLog({}, (), problem=problem)
    statuses: dict[str, str] = {}
    broken: dict[str, None] = {}
    for top in blocks[0].points:
        _walk(top, [], top=True, split=split_titles, statuses=statuses, broken=broken)
    return ParsedLog(statuses, tuple(broken))


def parse_ava_tap(text: str | bytes) -> ParsedLog:
    return parse_tap(text, split_titles=_AVA_SEPARATOR)


def _add_point(
    blocks: dict[int, _Block], announced: dict[int, str], indent: int, point: re.Match[str]
) -> str:
    """Close the point's block of children (checking its plan) and file the point; a problem."""
    name, status = _name_status(point.group(1), point.group(2) or "")
    title = announced.pop(indent, None)
    inner = blocks.pop(indent + 4, None) or _Block()
    for deeper in [d for d in blocks if d > indent + 4]:  # an unterminated deeper block
        del blocks[deeper]
    problem = _plan_problem(inner, indent + 4)
    point_ = _Point(title if title is not None else name, status, title is not None, inner.points)
    blocks.setdefault(indent, _Block()).points.append(point_)
    return problem


def _name_status(word: str, rest: str) -> tuple[str, str]:
    status = "FAILED" if word == "not ok" else "PASSED"
    directive = _DIRECTIVE.match(rest)
    if directive is not None:
        return directive.group(1).strip(), "SKIPPED"
    timed = _TIME.match(rest)
    return (timed.group(1) if timed else rest).strip(), status


def _plan_problem(block: _Block, indent: int) -> str:
    if block.plan is None or block.plan == len(block.points):
        return ""
    return f"a TAP plan at indent {indent} says {block.plan} tests but {len(block.points)} ran"


def _walk(
    point: _Point,
    path: list[str],
    *,
    top: bool,
    split: str,
    statuses: dict[str, str],
    broken: dict[str, None],
) -> None:
    parts = [*path, *(point.name.split(split) if split else [point.name])]
    inner = [child for child in point.children if child.test_like()]
    if not inner:
        if point.announced or top:
            if not point.name:
                raise ReportError(f"a TAP test under {' > '.join(path)[:80]!r} has no name")
            record(statuses, make_id("", parts[:-1], parts[-1]), point.status)
        return
    for child in inner:
        _walk(child, parts, top=False, split=split, statuses=statuses, broken=broken)
    if point.status == "FAILED" and not any(c.status == "FAILED" for c in inner):
        broken[make_id("", parts[:-1], parts[-1])] = None
