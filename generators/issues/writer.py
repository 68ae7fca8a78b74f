"""Back-translation: a model writes the task's issue text from the fix and the failing tests.

Following SWE-smith and R2E-Gym, the model sees the gold patch, the FAIL_TO_PASS tests' source and
their failure output, and writes a user's bug report (few-shot). Every statement is checked before
it is kept; a rejected one is recorded as a failed attempt and the model tries again, and after
``attempts`` failures the template writer takes over, so every task still gets a statement and
``provenance`` says which writer wrote it and why. The system line is shared; its projects' name,
the worked example, the code fence and the prompt's version are the task's language's
(``Language.issue_text.prompt``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trajforge.generators.issues.context import IssueContext
from trajforge.generators.issues.leaks import statement_leak
from trajforge.generators.issues.template import template_statement
from trajforge.generators.languages.registry import language_named
from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.task_instance import TaskInstance

MIN_PROSE_SHARE = 0.6  # of whitespace-separated tokens that look like words or code names
MIN_FUNCTION_WORDS = 0.12  # English prose is ~40% function words; token soup from a bad model ~0
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "when",
        "while",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "my",
        "our",
        "your",
        "not",
        "no",
        "can",
        "could",
        "should",
        "would",
        "will",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "get",
        "gets",
        "got",
        "instead",
        "expected",
        "than",
        "then",
        "so",
        "there",
        "which",
        "what",
        "how",
        "why",
        "all",
        "any",
        "some",
        "one",
        "two",
        "after",
        "before",
        "into",
        "out",
        "up",
        "about",
        "like",
        "also",
        "only",
    ]
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_WORD = re.compile(r"^[`*(\"'\[]*[A-Za-z][\w.'\u2019\-/]*[`*)\"'\]:;,.!?]*$")
_FENCED = re.compile(r"```.*?```", re.DOTALL)

SYSTEM = """\
You write GitHub issues for {projects} projects, as the user who ran into the bug. Say what you \
did, what happened and what you expected, with a short example to reproduce it when that helps. \
Never describe, hint at or quote the fix, never quote the changed source lines, and never mention \
the project's tests or test names. Plain Markdown, at most 250 words, no preamble."""


@dataclass(frozen=True)
class Attempt:
    writer: str  # llm:<model> | template
    text: str
    accepted: bool
    reason: str  # accepted | empty | truncated | not_prose | ungrounded | leaks_patch | ...
    prompt_tokens: int = 0
    completion_tokens: int = 0


def request_messages(context: IssueContext, max_chars: int) -> list[dict[str, str]]:
    prompt = language_named(context.language).issue_text.prompt
    tests = "\n\n".join(context.test_sources.values()) or "(source not available)"
    failures = "\n\n".join(context.failures.values()) or "(no output recorded)"
    request = (
        f"Repository: {context.repo}\n\n"
        f"The fix (the reader must not see it):\n```diff\n{context.patch[:max_chars]}\n```\n\n"
        f"Tests that fail before the fix:\n```{prompt.fence}\n{tests[:max_chars]}\n```\n\n"
        f"Their failure output:\n```\n{failures[:max_chars]}\n```"
    )
    return [
        {"role": "system", "content": SYSTEM.format(projects=prompt.projects)},
        {"role": "user", "content": prompt.example_request},
        {"role": "assistant", "content": prompt.example_answer},
        {"role": "user", "content": request},
    ]


def check_statement(text: str, task: TaskInstance, context: IssueContext, min_chars: int) -> str:
    """``accepted`` or the first reason the statement cannot be used."""
    stats = parse_patch(task.patch)
    if len(text.strip()) < min_chars:
        return "empty"
    if (leak := statement_leak(text, stats, task.FAIL_TO_PASS)) is not None:
        return leak
    if not _reads_as_prose(text):
        return "not_prose"
    if context.anchors and not any(
        re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) for name in context.anchors
    ):
        return "ungrounded"
    return "accepted"


def _reads_as_prose(text: str) -> bool:
    """Words, sentences and the small words English cannot do without; no control bytes."""
    if _CONTROL.search(text):
        return False
    tokens = _FENCED.sub(" ", text).split()
    if not tokens or sum(bool(_WORD.match(t)) for t in tokens) / len(tokens) < MIN_PROSE_SHARE:
        return False
    plain = [t.strip("`*()\"'[],.:;!?").lower() for t in tokens]
    return sum(t in FUNCTION_WORDS for t in plain) / len(plain) >= MIN_FUNCTION_WORDS


def write_statement(
    client: LLMClient | None,
    task: TaskInstance,
    context: IssueContext,
    attempts: int,
    max_chars: int,
    min_chars: int,
) -> tuple[str, dict[str, str], list[Attempt]]:
    """(statement, provenance, every attempt): model text when one passes, else the template."""
    tried: list[Attempt] = []
    if client is not None:
        messages = request_messages(context, max_chars)
        for number in range(attempts):
            attempt = _model_attempt(client, messages, task, context, min_chars, number)
            tried.append(attempt)
            if attempt.accepted:
                version = language_named(context.language).issue_text.prompt.version
                provenance = {"problem_statement": attempt.writer, "prompt": version}
                return attempt.text, provenance, tried
    text = template_statement(task, context)
    tried.append(Attempt("template", text, True, "template"))
    if client is None:
        note = "no endpoint configured (llm.base_url): written from the failing tests' output"
    else:
        failures = ", ".join(a.reason for a in tried[:-1])
        note = f"model statements rejected ({failures}): written from the failing tests' output"
    return text, {"problem_statement": "template", "problem_statement_note": note}, tried


def _model_attempt(
    client: LLMClient,
    messages: list[dict[str, str]],
    task: TaskInstance,
    context: IssueContext,
    min_chars: int,
    number: int,
) -> Attempt:
    writer = f"llm:{client.model}"
    try:
        answer = client.chat(messages, temperature=0.0 if number == 0 else 0.7, seed=number)
    except LLMError as exc:
        return Attempt(writer, "", False, exc.reason)
    text = _unwrap(answer.message.get("content") or "")
    usage = answer.usage
    reason = (
        "truncated"
        if answer.finish_reason == "length"
        else check_statement(text, task, context, min_chars)
    )
    return Attempt(
        writer,
        text,
        reason == "accepted",
        reason,
        usage.get("prompt_tokens", 0),
        usage.get("completion_tokens", 0),
    )


def _unwrap(text: str) -> str:
    """Models sometimes fence the whole answer; the issue is what is inside."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and stripped.count("```") == 2:
        stripped = stripped.split("\n", 1)[-1].rsplit("```", 1)[0].strip()
    return stripped
