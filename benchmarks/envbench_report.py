"""Before and after on the EnvBench sample (issue 30): the four levels side by side, and each
repository that fell short, with the level it stopped at, its reason, the issue's class of cause
and the one-line detail.

Reads the ``--out`` JSON of ``environments.py --modes new --tasks`` (one run per code version).
The classes are the issue's ("What stopped them"), read from the reason and the detail by the
first rule that matches: a guide for the note, not a verdict; "hidden cause" is a failed build
whose line still shows the script's echo instead of its cause.

Usage: .venv/bin/python benchmarks/envbench_report.py BEFORE.json [AFTER.json]
"""

from __future__ import annotations

import json
import statistics
import sys

LEVELS = ("installed", "collected", "clean_pass", "task")
TARGETS = {"collected": 0.90, "clean_pass": 0.75}  # the issue's, with no LLM
MEDIAN_TARGET_MIN = 5.0

# (class, reasons that name it, words in the detail that name it), first match wins.
CLASSES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("project is a runner dependency", ("wrong_code_under_test",), ()),
    ("no tests at the newest commit", ("no_tests", "no_tests_at_commit"), ("no tests ran",)),
    ("Python not offered", ("no_supported_python", "no_base_image"), ("requires-python",)),
    (
        "VCS version without git",
        (),
        ("setuptools-scm", "setuptools_scm", "versioneer", "hatch-vcs", "dynamic-versioning"),
    ),
    ("hanging test", ("timeout_at_clean", "collection_timed_out"), ("timed out",)),
    (
        "needs keys/services",
        ("needs_outside_world",),
        ("connection refused", "api key", "network", "could not connect"),
    ),
    ("hidden cause", (), ("/bin/sh -ec", "error: the command")),
    (
        "unresolvable pins",
        (),
        (
            "resolutionimpossible",
            "no matching distribution",
            "could not find a version",
            "no solution found",
            "unsatisfiable",
            "conflict",
        ),
    ),
    (
        "needs a system package",
        (),
        ("failed to build", "pg_config", "fatal error:", "no such file or directory", "compiler"),
    ),
)


def reached(outcome: dict) -> dict[str, bool]:
    """The four levels of one outcome (as environments.py's Outcome.levels). Before 2026-11-27
    trajforge said ``no_tests`` also where every test module failed to import ("N test modules
    cannot be collected"): that is no collection, and is counted as none here."""
    uncollectable = "test modules cannot be collected" in outcome.get("detail", "")
    if "levels" in outcome:
        levels = dict(outcome["levels"])
        if uncollectable:
            levels.update(collected=False, clean_pass=False, task=False)
        return levels
    no_tests = outcome.get("reason") in ("no_tests", "no_tests_at_commit") and not uncollectable
    return {
        "installed": outcome["built"],
        "collected": outcome["built"] and (outcome["collected"] > 0 or no_tests),
        "clean_pass": outcome["reached"],
        "task": outcome.get("tasks", 0) > 0,
    }


def cause_class(reason: str, detail: str) -> str:
    """The issue's class for a reason and its detail: the first rule that matches, else other."""
    text = detail.lower()
    for name, reasons, words in CLASSES:
        if reason in reasons or any(word in text for word in words):
            return name
    return "other"


def shortfall(outcome: dict) -> tuple[str, str, str] | None:
    """(the first level missed, reason, detail) for a repository short of a task, else None."""
    levels = reached(outcome)
    missed = next((level for level in LEVELS if not levels[level]), None)
    if missed is None:
        return None
    if outcome.get("reason"):
        return missed, outcome["reason"], outcome.get("detail", "")
    return missed, "no_task", outcome.get("task_detail", "") or "no bug kept"


def summary(document: dict) -> dict:
    """Per level how many reached it, the median minutes and the shortfalls, of one run."""
    rows = [(r["name"], r["new"]) for r in document["repositories"]]
    total = len(rows)
    minutes = [(o["seconds"] + o.get("task_s", 0.0)) / 60 for _, o in rows]
    short = {name: s for name, o in rows if (s := shortfall(o)) is not None}
    return {
        "repositories": total,
        "levels": {level: sum(reached(o)[level] for _, o in rows) for level in LEVELS},
        "no_tests": sum(
            o.get("reason") in ("no_tests", "no_tests_at_commit") and reached(o)["collected"]
            for _, o in rows
        ),
        "median_minutes": statistics.median(minutes) if minutes else 0.0,
        "shortfalls": short,
    }


def print_report(labels: list[str], figures: list[dict]) -> None:
    total = figures[0]["repositories"]
    print(f"{'level':<12}" + "".join(f"{label:>16}" for label in labels))
    for level in LEVELS:
        cells = "".join(
            f"{f['levels'][level]:>7} ({f['levels'][level] / max(total, 1):4.0%})   "
            for f in figures
        )
        target = f"  target >= {TARGETS[level]:.0%}" if level in TARGETS else ""
        print(f"{level:<12}{cells}{target}")
    print(f"{'no tests':<12}" + "".join(f"{f['no_tests']:>16}" for f in figures))
    medians = "".join(f"{f['median_minutes']:>16.1f}" for f in figures)
    print(f"{'median min':<12}{medians}  target <= {MEDIAN_TARGET_MIN:.0f}")
    for label, f in zip(labels, figures, strict=True):
        print(f"\n{label}: short of a task, by the issue's class")
        by_class: dict[str, list[str]] = {}
        for name, (level, reason, detail) in sorted(f["shortfalls"].items()):
            line = f"{name}: stopped before {level}, {reason}: {detail[:200]}"
            by_class.setdefault(cause_class(reason, detail), []).append(line)
        for name, lines in sorted(by_class.items(), key=lambda item: -len(item[1])):
            print(f"  {name} ({len(lines)})")
            for line in lines:
                print(f"    {line}")


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not 1 <= len(paths) <= 2:
        print("envbench_report: give BEFORE.json [AFTER.json]", file=sys.stderr)
        return 2
    figures = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                figures.append(summary(json.load(handle)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(
                f"envbench_report: {path} is not an environments.py --out JSON of the new mode "
                f"({exc.__class__.__name__}: {exc}); run it with --modes new --tasks --out",
                file=sys.stderr,
            )
            return 2
    print_report(["before", "after"][: len(figures)], figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
