"""Model-written bugs: a language model rewrites one function so that it holds a subtle bug.

After SWE-smith's LM rewrite and Self-play SWE-RL's bug specification. The function is chosen as
the procedural operators choose (``pick_functions``: complexity-weighted, reproducible from the
seed); the model sees its module, the function, and the names of the project's tests, never which
of them will break (nothing has run yet: ``validate`` finds out, as for procedural bugs). It answers
with the whole function in a code block and one ``Bug:`` line saying what it did.

The answer is checked, never trusted (``check_rewrite``): it must hold code that parses, be one
definition of that same function (nothing else of the file), keep the signature (name, parameters,
return annotation, async-ness, decorators), differ from the original in what Python executes, and
add no comment and no docstring change (those would point the solver at the bug). Each failure is
a counted rejection with its reason, never an error. The ``Bug:`` sentence is the model's intent:
it goes to the candidate's description and from there to the task's provenance (``bug_intent``),
never to the problem statement.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trajforge.generators.languages.python.mutations import (
    FunctionSource,
    Mutant,
    MutationSourceError,
    replace_function,
)

# the functions a model rewrites are drawn as the operators draw theirs (the injector's import)
from trajforge.generators.languages.python.mutations import pick_functions as pick_functions
from trajforge.generators.llm.client import ChatResult, LLMClient, LLMError
from trajforge.schemas import python_ast
from trajforge.schemas.records import content_id

PROMPT_VERSION = "inject-llm-v1"
OPERATOR = "llm"  # the candidates' origin is bug/llm
MAX_MODULE_CHARS = 12_000  # of the surrounding module shown for context
MAX_TESTS = 60  # test names listed
MAX_INTENT_CHARS = 300
ACCEPTED = "accepted"
# Why a model's answer is not a candidate (the Rejection's reason); llm_* come from the client.
REASONS = {
    "rewrite_truncated": "the answer was cut off (max_tokens) with no whole code block in it",
    "rewrite_no_code": "the answer holds no Python code block",
    "rewrite_unparsable": "the code does not parse, or does not compile in its module",
    "rewrite_touches_other_code": "the code defines or changes more than the one function",
    "rewrite_changes_signature": "the function's name, parameters, decorators or return annotation "
    "changed",
    "rewrite_unchanged": "the function is the original (formatting and comments aside)",
    "rewrite_annotates_bug": "the rewrite adds comments or changes the docstring (they would "
    "point at the bug)",
    "rewrite_duplicate": "the same bug as another candidate of this snapshot",
}

SYSTEM = """\
You help build a benchmark of realistic software bugs. You rewrite one Python function so that it \
contains one subtle bug of the kind a developer makes by mistake: an off-by-one, a wrong \
comparison or boolean operator, a missed edge case, swapped arguments, a wrong variable, an early \
return. The function must keep its name, parameters, decorators and return annotation, still run, \
and behave correctly for most inputs, so that only some of the project's tests fail. Change \
nothing outside the function, add no comments, keep the docstring as it is, and never hint at the \
bug in the code.

Answer with the whole rewritten function in one ```python code block, then one line that starts \
with "Bug:" and says in one sentence what you changed and how the function now misbehaves."""

_EXAMPLE_FUNCTION = """\
def wrap(text, width):
    lines, line = [], ""
    for word in text.split():
        if len(line) + len(word) + 1 > width and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + [line] if line else lines"""


def _request(path: str, qualname: str, module: str, code: str, listing: str) -> str:
    """The user's request for one function: the example's and every real one's shape."""
    return (
        f"Module `{path}` (for context):\n```python\n{module.rstrip()}\n```\n\n"
        f"Rewrite the function `{qualname}`:\n```python\n{code.rstrip()}\n```\n\n"
        f"The project's tests (you are not told which of them will fail):\n{listing}"
    )


EXAMPLE_REQUEST = _request(
    "textkit/wrap.py",
    "wrap",
    _EXAMPLE_FUNCTION,
    _EXAMPLE_FUNCTION,
    "- tests/test_wrap.py::test_wrap_short\n- tests/test_wrap.py::test_wrap_exact_width",
)

# The example's bug: the width check without the joining space.
_EXAMPLE_BUG = _EXAMPLE_FUNCTION.replace("len(word) + 1 > width", "len(word) > width")
EXAMPLE_ANSWER = (
    f"```python\n{_EXAMPLE_BUG}\n```\n"
    "Bug: the width check forgets the joining space, so a line can end up one character too long."
)

# A fenced block: its language, its text, and its closing fence (absent when the answer was cut).
_BLOCK = re.compile(
    r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:(?P<close>^[ \t]*```[ \t]*$)|\Z)",
    re.DOTALL | re.MULTILINE,
)
_PYTHON = ("", "python", "python3", "py")
_INTENT = re.compile(r"^[ \t>*_#-]*bug[*_]*[ \t]*:[*_]*[ \t]*(.+)$", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class RewriteOutcome:
    """One function's rewrite: a mutant, or the reason there is none."""

    function: FunctionSource
    reason: str  # accepted | one of REASONS | llm_* (the endpoint failed)
    detail: str
    mutant: Mutant | None = None
    intent: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class CheckedRewrite:
    reason: str  # accepted | one of REASONS
    detail: str
    mutated: str = ""  # the whole file with the function rewritten
    intent: str = ""


def collect_test_ids(test_files: dict[str, str]) -> list[str]:
    """pytest-style ids of the test functions and methods defined in ``test_files`` (by path)."""
    names: list[str] = []
    for path in sorted(test_files):
        try:
            tree = python_ast.parse(test_files[path])
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    names.append(f"{path}::{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                names.extend(
                    f"{path}::{node.name}::{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and item.name.startswith("test")
                )
    return names


def listed_tests(
    function: FunctionSource, test_files: dict[str, str], test_ids: list[str] | None = None
) -> list[str]:
    """The test names the model sees: those in files naming the function first, then the rest."""
    name = function.target.qualname.rsplit(".", 1)[-1]
    mentions = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    near = {p for p, text in test_files.items() if mentions.search(text)}
    names = collect_test_ids(test_files) if test_ids is None else test_ids
    ordered = [t for t in names if t.split("::")[0] in near] + [
        t for t in names if t.split("::")[0] not in near
    ]
    return ordered[:MAX_TESTS]


def request_messages(
    function: FunctionSource, module: str, tests: Sequence[str]
) -> list[dict[str, str]]:
    path, qualname = function.target.path, function.target.qualname
    shown = module if len(module) <= MAX_MODULE_CHARS else module[:MAX_MODULE_CHARS] + "\n# ..."
    listing = "\n".join(f"- {t}" for t in tests) or "(none found)"
    request = _request(path, qualname, shown, function.code, listing)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": EXAMPLE_REQUEST},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
        {"role": "user", "content": request},
    ]


def rewrite_functions(
    client: LLMClient,
    functions: Sequence[FunctionSource],
    sources: dict[str, str],
    test_files: dict[str, str],
    *,
    seed: int,
    workers: int,
) -> list[RewriteOutcome]:
    """Ask the model to rewrite each function, ``workers`` requests at a time; check each answer.

    Only the requests run in the pool; every parse and check stays on the calling thread (and
    goes through ``schemas/python_ast.py``: CPython 3.11's AST constructor is not safe on two
    threads, gh-106905, which failed CI here once).
    """
    test_ids = collect_test_ids(test_files)
    requests = [
        request_messages(
            function, sources[function.target.path], listed_tests(function, test_files, test_ids)
        )
        for function in functions
    ]

    def ask(job: tuple[FunctionSource, list[dict[str, str]]]) -> ChatResult | LLMError:
        function, messages = job
        try:
            return client.chat(messages, max_tokens=_max_tokens(client, function), seed=seed)
        except LLMError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        answers = list(pool.map(ask, zip(functions, requests, strict=True)))
    return [
        _outcome(client, function, sources[function.target.path], answer)
        for function, answer in zip(functions, answers, strict=True)
    ]


def rewrite_one(
    client: LLMClient,
    function: FunctionSource,
    source: str,
    test_files: dict[str, str],
    *,
    seed: int,
) -> RewriteOutcome:
    """One function's rewrite, asked and checked on this thread."""
    messages = request_messages(function, source, listed_tests(function, test_files))
    try:
        answer: ChatResult | LLMError = client.chat(
            messages, max_tokens=_max_tokens(client, function), seed=seed
        )
    except LLMError as exc:
        answer = exc
    return _outcome(client, function, source, answer)


def _max_tokens(client: LLMClient, function: FunctionSource) -> int:
    """Room for the whole function back (about 3 characters a token) and the Bug: line."""
    return max(client.params.max_tokens, len(function.code) // 3 + 200)


def _outcome(
    client: LLMClient, function: FunctionSource, source: str, answer: ChatResult | LLMError
) -> RewriteOutcome:
    """The checked answer as a mutant, or the reason there is none."""
    if isinstance(answer, LLMError):
        return RewriteOutcome(function, answer.reason, str(answer))
    reply = answer.message.get("content") or ""
    checked = check_rewrite(function, source, reply, truncated=answer.finish_reason == "length")
    usage = answer.usage.get("prompt_tokens", 0), answer.usage.get("completion_tokens", 0)
    if checked.reason != ACCEPTED:
        return RewriteOutcome(function, checked.reason, checked.detail, None, "", *usage)
    target = function.target
    intent = checked.intent or "(the model did not say)"
    mutant = Mutant(
        mutant_id=content_id(target.path, OPERATOR, checked.mutated),
        path=target.path,
        qualname=target.qualname,
        operator=OPERATOR,
        original=source,
        mutated=checked.mutated,
        lines=tuple(range(target.start_line, target.end_line + 1)),
        description=f"llm:{client.model} rewrote {target.qualname} ({target.path}): {intent}",
    )
    return RewriteOutcome(function, ACCEPTED, "", mutant, intent, *usage)


def check_rewrite(
    function: FunctionSource, source: str, reply: str, truncated: bool = False
) -> CheckedRewrite:
    """The file with the model's rewrite in place, or the first reason it cannot be a bug."""
    where = f"{function.target.qualname} ({function.target.path})"
    code, closed = _code_block(reply)
    if code is None or (truncated and not closed):
        reason = "rewrite_truncated" if truncated else "rewrite_no_code"
        return _rejected(reason, where, reply)
    dedented = textwrap.dedent(code).strip("\n") + "\n"
    try:
        tree = python_ast.parse(dedented)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return _rejected("rewrite_unparsable", where, reply, _first_line(exc))
    old = _only_function(python_ast.parse(textwrap.dedent(function.code)))
    assert old is not None  # the function came from a module that parses
    new = _only_function(tree)
    if new is None:
        held = ", ".join(getattr(n, "name", type(n).__name__) for n in tree.body) or "nothing"
        return _rejected("rewrite_touches_other_code", where, reply, f"it holds {held}")
    if new.name != old.name:
        others = {f.name for f in ast.walk(python_ast.parse(source)) if isinstance(f, _DEFS)}
        reason = "rewrite_touches_other_code" if new.name in others else "rewrite_changes_signature"
        return _rejected(reason, where, reply, f"it rewrites {new.name!r}, not {old.name!r}")
    changed = _signature_change(old, new)
    if changed:
        return _rejected("rewrite_changes_signature", where, reply, changed)
    if ast.dump(old) == ast.dump(new):
        return _rejected("rewrite_unchanged", where, reply)
    if ast.get_docstring(old, clean=False) != ast.get_docstring(new, clean=False):
        return _rejected("rewrite_annotates_bug", where, reply, "the docstring changed")
    added = Counter(_comments(dedented)) - Counter(_comments(function.code))
    if added:
        return _rejected("rewrite_annotates_bug", where, reply, f"it adds {next(iter(added))!r}")
    try:
        mutated = replace_function(source, function.target.qualname, dedented, index=function.index)
    except MutationSourceError as exc:
        return _rejected("rewrite_unparsable", where, reply, str(exc))
    if mutated == source:  # pragma: no cover - the AST differs, so the text does
        return _rejected("rewrite_unchanged", where, reply)
    return CheckedRewrite(ACCEPTED, "", mutated, _intent(reply))


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _code_block(reply: str) -> tuple[str | None, bool]:
    """(the first Python block, whether it was closed); a bare answer starting with a def counts."""
    for block in _BLOCK.finditer(reply):
        if block.group(1).lower() in _PYTHON:
            if block.group("close") is None:  # unclosed: the code runs to a Bug: line, or the end
                return _INTENT.split(block.group(2), maxsplit=1)[0], False
            return block.group(2), True
    bare = reply.strip()
    if re.match(r"(?:@|def\s|async\s+def\s)", bare):
        return _INTENT.split(bare, maxsplit=1)[0], True
    return None, False


def _only_function(tree: ast.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    if len(tree.body) == 1 and isinstance(tree.body[0], _DEFS):
        return tree.body[0]
    return None


def _signature_change(
    old: ast.FunctionDef | ast.AsyncFunctionDef, new: ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    if type(old) is not type(new):
        return "async-ness changed"
    if ast.dump(old.args) != ast.dump(new.args):
        return f"parameters changed: ({ast.unparse(old.args)}) -> ({ast.unparse(new.args)})"
    if ast.dump(old.returns or ast.Constant(None)) != ast.dump(new.returns or ast.Constant(None)):
        return "return annotation changed"
    if new.decorator_list and [ast.dump(d) for d in old.decorator_list] != [
        ast.dump(d) for d in new.decorator_list
    ]:
        return "decorators changed"
    if [ast.dump(t) for t in getattr(old, "type_params", [])] != [
        ast.dump(t) for t in getattr(new, "type_params", [])
    ]:
        return "type parameters changed"
    return ""


def _comments(code: str) -> list[str]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [" ".join(t.string.lstrip("#").split()) for t in tokens if t.type == tokenize.COMMENT]


def _intent(reply: str) -> str:
    """The model's ``Bug:`` sentence, outside its code blocks."""
    found = _INTENT.search(_BLOCK.sub("\n", reply))
    if found is None:
        return ""
    text = " ".join(found.group(1).split()).strip("*_ ")
    return text[:MAX_INTENT_CHARS]


def _rejected(reason: str, where: str, reply: str, why: str = "") -> CheckedRewrite:
    said = " ".join(reply.split())
    said = said if len(said) <= 160 else said[:157] + "..."
    detail = f"{where}: {REASONS[reason]}" + (f" ({why})" if why else "")
    return CheckedRewrite(reason, f"{detail}; the model said: {said!r}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__
