"""The label check: a published dataset's FAIL_TO_PASS / PASS_TO_PASS against what validate proved.

An imported row (``Candidate.labels``) is validated like any candidate; this compares, per label,
their list with ours, test by test, and says why each test they list is not in ours:

- ``agrees``: in both lists;
- ``flaky_here``: theirs, and its status changed between identical runs here;
- ``not_run_here``: theirs, but skipped or absent in our runs (missing in our environment);
- ``they_missed``: ours, not theirs;
- ``we_missed``: theirs, ran here, not flaky, not ours; ``why`` says what we saw (it passes with
  the bug here, it is our PASS_TO_PASS...);
- ``name_unmapped``: theirs, a name that no one test of ours answers to (none or several:
  ``label_names.py``); ``why`` says which. Their names that do map are classed as the id of ours
  they name; a name for a whole file (or for Go subtests their parser cut to one name) is
  classed as the file, judged as their runner's one line (every test of ours in it our
  PASS_TO_PASS; one our FAIL_TO_PASS and none failing with the fix), and the tests of ours in it
  are not ``they_missed``.

A rejected candidate has no task; its lists are read from the runs it has (the rule's per-test
reading of the main runs at base and gold, without its verdict), so its tests are still classed
where the runs allow. Pure functions: no sandbox, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.label_check import (
    AGREES,
    CLASSES,
    CONFIRMED,
    DIFFERS,
    FLAKY_HERE,
    LABELS,
    NOT_RUN_HERE,
    PHRASES,
    REJECTED,
    WE_MISSED,
    LabelCheck,
    LabelClasses,
)
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.validation.candidate import ValidationResult
from trajforge.verifiers.validation.label_names import NameMap, map_names
from trajforge.verifiers.validation.rule import FAILING, flaky_tests


class _Evidence:
    """What our runs say: statuses of the main run of each state, the flaky tests, our lists."""

    def __init__(self, result: ValidationResult, clean: Iterable[TestRun] = ()) -> None:
        runs = [*result.runs, *clean]  # an injected bug's "gold" is its snapshot's clean runs
        base, gold = _main(runs, "base"), _main(runs, "gold") or _main(runs, "clean")
        self.base = base.statuses() if base is not None else None
        self.gold = gold.statuses() if gold is not None else None
        self.any_runs = bool(runs)
        task = result.task
        self.has_task = task is not None
        if task is not None:
            if task.provenance.get("mutant_runs") == "covering" and self.base and self.gold:
                # The covering tests decided: a test the bug's run left out executes no changed
                # line, so it runs as at clean (the inference its PASS_TO_PASS rests on).
                self.base = {**self.gold, **self.base}
            self.flaky = set(task.flaky_tests)
            self.ours = {
                "FAIL_TO_PASS": set(task.FAIL_TO_PASS),
                "PASS_TO_PASS": set(task.PASS_TO_PASS),
            }
            return
        self.flaky = set()
        for state in ("base", "gold", "clean"):
            # the main run first, as the rule reads them
            of_state = sorted((r for r in runs if r.state == state), key=lambda r: r.attempt)
            if of_state and of_state[0].attempt == 0:
                self.flaky |= flaky_tests(of_state)
        self.ours = _lists_from_runs(base, gold, self.flaky)

    def seen(self) -> set[str]:
        """Every test id our runs and lists name."""
        found = set(self.base or ()) | set(self.gold or ()) | self.flaky
        return found.union(*self.ours.values())


def check_labels(
    candidate: Candidate, result: ValidationResult, clean: Iterable[TestRun] = ()
) -> LabelCheck | None:
    """The label check of one validated candidate; None when it carries no labels. ``clean``:
    for an injected bug, the clean runs of its snapshot (the state its fix gives back)."""
    labels = candidate.labels
    if labels is None:
        return None
    evidence = _Evidence(result, clean)
    published = {"FAIL_TO_PASS": labels.FAIL_TO_PASS, "PASS_TO_PASS": labels.PASS_TO_PASS}
    names = map_names(labels.dataset, [*labels.FAIL_TO_PASS, *labels.PASS_TO_PASS], evidence.seen())
    classes = {name: _classify(name, published[name], names, evidence) for name in LABELS}
    if result.task is None:
        verdict = REJECTED
        reason = result.rejection.reason if result.rejection is not None else "rejected"
    else:
        differs = any(classes[name].of(c) for name in LABELS for c in CLASSES if c != "agrees")
        verdict, reason = (DIFFERS if differs else CONFIRMED), ""
    line = "; ".join(f"{name}: {_counts_phrase(classes[name])}" for name in LABELS)
    if verdict == REJECTED:
        line = f"rejected here ({reason}); {line}"
    return LabelCheck(
        candidate_id=candidate.candidate_id,
        instance_id=labels.instance_id,
        dataset=labels.dataset,
        repo=candidate.repo,
        verdict=verdict,
        reason=reason,
        detail=line,
        FAIL_TO_PASS=classes["FAIL_TO_PASS"],
        PASS_TO_PASS=classes["PASS_TO_PASS"],
    )


def class_counts(check: LabelCheck) -> dict[str, int]:
    """Tests per class over both labels, every class present (for counters)."""
    return {c: sum(len(check.label(name).of(c)) for name in LABELS) for c in CLASSES}


def _classify(
    label: str, published: Iterable[str], names: NameMap, evidence: _Evidence
) -> LabelClasses:
    ours = evidence.ours[label]
    theirs = names.theirs_as_ours(published)
    found: dict[str, list[str]] = {c: [] for c in CLASSES}
    why = {name: names.unmapped[name] for name in published if name in names.unmapped}
    found["name_unmapped"] = sorted(why)
    files = {name: names.files[name] for name in published if name in names.files}
    for name, tests in files.items():
        kind, seen = _whole_file(label, tests, evidence, names.group_kind(name))
        found[kind].append(name)
        if seen:
            why[name] = seen
    covered = set().union(*files.values())  # ours in a file they name: not they_missed
    for test_id in sorted(theirs | (ours - covered)):
        if test_id not in theirs:
            found["they_missed"].append(test_id)
        elif test_id in ours:
            found["agrees"].append(test_id)
        elif test_id in evidence.flaky:
            found["flaky_here"].append(test_id)
        else:
            missed, seen = _missed(label, test_id, evidence)
            found["we_missed" if missed else "not_run_here"].append(test_id)
            why[test_id] = seen
    return LabelClasses(**{c: tuple(sorted(tests)) for c, tests in found.items()}, why=why)


def _whole_file(
    label: str, tests: frozenset[str], evidence: _Evidence, group: str
) -> tuple[str, str]:
    """Their name for several of ours (``group`` says what: a whole file, folded subtests), as
    their runner's one line means it: PASS_TO_PASS when every test of ours in it is our
    PASS_TO_PASS; FAIL_TO_PASS when one is our FAIL_TO_PASS and none fails with the fix.
    (class, why) for the first test that says otherwise."""
    gold = evidence.gold or {}
    if label == "PASS_TO_PASS":
        off = sorted(tests - evidence.ours["PASS_TO_PASS"])
    elif tests & evidence.ours["FAIL_TO_PASS"]:
        broken = sorted(t for t in tests if gold.get(t) in FAILING)
        if broken:
            return WE_MISSED, f"{group}: {broken[0]} {gold[broken[0]]} with the fix here"
        return AGREES, ""
    else:
        off = sorted(tests)
    if not off:
        return AGREES, ""
    if set(off) <= evidence.flaky:
        return FLAKY_HERE, f"{group}: {off[0]} flaky here"
    missed, seen = _missed(label, off[0], evidence)
    count = f"{len(off)} of its {len(tests)} tests not our {label}"
    return (WE_MISSED if missed else NOT_RUN_HERE), f"{group}: {count} ({off[0]}: {seen})"


def _missed(label: str, test_id: str, evidence: _Evidence) -> tuple[bool, str]:
    """A test they list, not ours and not flaky: (True, what we saw) when it ran here in the states
    its label needs, else (False, why it did not run)."""
    other = "PASS_TO_PASS" if label == "FAIL_TO_PASS" else "FAIL_TO_PASS"
    if test_id in evidence.ours[other]:
        return True, f"our {other}"
    if evidence.base is None:
        return False, "no main run at base here" if evidence.any_runs else "no test run here"
    base = evidence.base.get(test_id)
    if base is None or base == "SKIPPED":
        return False, "skipped at base here" if base else "not in our run at base"
    if label == "FAIL_TO_PASS" and base == "PASSED":
        return True, "passes with the bug here"
    if label == "PASS_TO_PASS" and base != "PASSED":
        fixed = (evidence.gold or {}).get(test_id)
        if fixed is not None and fixed != "PASSED":  # broken here either way: our environment
            return True, f"{base} with the bug and {fixed} without it here"
        return True, f"{base} with the bug here"
    if evidence.gold is None:
        if not evidence.has_task:  # rejected at base: no run with the fix to read
            return False, "no run with the fix here"
        # the mutant path keeps no gold run per bug: the task's lists are the verdict
        if label == "FAIL_TO_PASS":
            return True, f"{base} with the bug here; not our FAIL_TO_PASS"
        return True, f"{base} with the bug here; not our PASS_TO_PASS"
    gold = evidence.gold.get(test_id)
    if gold is None or gold == "SKIPPED":
        return False, "skipped at gold here" if gold else "not in our run at gold"
    if gold != "PASSED":
        return True, f"{gold} with the fix here"
    return True, f"{base} with the bug, {gold} with the fix here"


def _lists_from_runs(
    base: TestRun | None, gold: TestRun | None, flaky: set[str]
) -> dict[str, set[str]]:
    """A rejected candidate's lists, read per test from its main runs as the rule reads them."""
    if base is None or gold is None or not base.suite_ran or not gold.suite_ran:
        return {"FAIL_TO_PASS": set(), "PASS_TO_PASS": set()}
    before, after = base.statuses(), gold.statuses()
    shared = (set(before) & set(after)) - flaky
    return {
        "FAIL_TO_PASS": {t for t in shared if before[t] in FAILING and after[t] == "PASSED"},
        "PASS_TO_PASS": {t for t in shared if before[t] == "PASSED" and after[t] == "PASSED"},
    }


def _main(runs: Iterable[TestRun], state: str) -> TestRun | None:
    return next((r for r in runs if r.state == state and r.attempt == 0), None)


def _counts_phrase(classes: LabelClasses) -> str:
    parts = [f"{len(classes.of(c))} {PHRASES[c]}" for c in CLASSES if classes.of(c)]
    return ", ".join(parts) if parts else "none"
