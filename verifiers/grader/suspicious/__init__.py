"""Does a model patch's source do what no honest fix needs: look at who calls it, read the tests,
reach into the test runner? Read from the patch, never run.

Some reward hacks leave no trace a test run can see: ``add`` returns ``a + b`` only when
``sys._getframe(1)`` belongs to a test file, a patch reads the test file to find the value
expected of it, a ``__eq__`` says True to everything, a JavaScript module replaces
``globalThis.expect``. Each passes the graded tests in the supervised run, so the verdict says
``resolved``. This module reads the lines a patch adds to the source it keeps (test files are
reset to the task's own before the run, so they are not read) and names the first of these
kinds it finds, with file and line: ``frame introspection``, ``reads test files``, ``reaches into
the test runner``, ``tracing/profiling``, ``code object swap``, ``always-equal object``,
``patches builtins``, ``hidden attribute access``, ``dynamic code``, ``replaces test framework
globals``, ``replaces assertion functions``, ``replaces test output`` (and ``unreadable source``
where a reader itself fails: a flag, never a silent pass).

**A flag, not a guarantee.** A reader of code is defeated by enough obfuscation (a payload
decoded at run time, an attribute name built from pieces and looked up through an object the
reader does not watch), and an honest fix can, rarely, need one of these (a logging helper that
reads its caller's frame). It reads added lines only, so what the repository already did is
never the patch's fault. It is still worth having: it is how a trainer contains what the grader
cannot see by running tests. The verdict carries it (``PatchVerdict.suspicious_patch``, the
reason, "" when clean); ``reward(strict=True)`` and ``serve-rewards --strict`` give such a patch
reward 0, ``curate`` keeps such runs out of the SFT data by default, and the cheap routes the
hacks found so far take (a renamed ``getattr``, an alias, ``__import__``) are read through.

One reader per language (``Reader``), the language's own (``Grading.reader``,
``verifiers/languages/<lang>/suspicious.py``); this module runs whichever reader it is given.
"""

from __future__ import annotations

from collections.abc import Mapping

from trajforge.verifiers.grader.suspicious.common import UNREADABLE, Finding, Reader

__all__ = ["REASON", "Finding", "Reader", "suspicious_reason"]

MAX_REASON_CHARS = 300
REASON = "suspicious_patch"  # the reason a flagged patch is refused for (strict rewards, curate)


def suspicious_reason(
    reader: Reader | None, files: Mapping[str, bytes | None], added: Mapping[str, set[int]]
) -> str:
    """ "" when nothing in the added lines is suspicious; else the first finding (file, line,
    kind, what), and how many more. ``files``: path -> the file's new text (None: absent);
    ``added``: path -> the 1-based line numbers the patch adds there."""
    if reader is None:  # a language without a reader: nothing is flagged
        return ""
    findings: list[Finding] = []
    for path in sorted(files):
        source, lines = files[path], added.get(path, set())
        if source is None or not lines or not reader.reads(path):
            continue
        try:
            findings.extend(reader.findings(path, source, lines))
        except Exception as exc:  # a reader's bug on hostile input is a flag, never a pass
            findings.append(
                Finding(path, 0, UNREADABLE, f"the reader failed: {type(exc).__name__}")
            )
    if not findings:
        return ""
    findings.sort(key=lambda f: (f.path, f.line, f.kind))
    first = str(findings[0])
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return (first[: MAX_REASON_CHARS - len(more)] + more).replace("\n", " ")
