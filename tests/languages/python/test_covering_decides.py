"""A kept bug's covering tests decide its FAIL_TO_PASS, and the audit keeps them honest.

One test-built repository with: a function only a subprocess runs (coverage must see it there),
a test that runs the module from its source text (a blind spot coverage cannot see, for a covered
function and for one no other test runs), a test that reads what a function run only at import
left (no test runs its lines, yet one sees its bug), and a test that passes in whole-suite runs
but fails when rerun by name after its first run (a flake the union confirmation at clean must
keep out of FAIL_TO_PASS, where one full clean run more would not have seen it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import built_profile, write_params
from repo_factory import COUNTER, RepoBuilder, pyproject
from trajforge.generators.languages.python.profile import JUNIT_PATH
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import ValidateParams, load_params
from trajforge.verifiers.languages.python.mutants import validate_mutations
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.validation.candidate import TestTree
from trajforge.verifiers.validation.mutants import AuditBook, mutation_of

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

CORE = """\
def inc(x):
    return x + 1


def scale(x):
    return x * 2


def sign(x):
    if x < 0:
        return -1
    return 1


def unused(x):
    return x - 1


def _table():
    return {"a": 1}


TABLE = _table()  # the function runs at import only; tests read what it left
"""

WORKER = """\
import sys

from probe.core import scale

if __name__ == "__main__":
    print(scale(int(sys.argv[1])))
"""

TESTS = """\
import subprocess
import sys

from probe.core import TABLE, inc, sign


def test_table():
    assert TABLE["a"] == 1


def test_inc():
    assert inc(1) == 2


def test_sign():
    assert sign(-3) == -1


def test_worker():
    out = subprocess.run(
        [sys.executable, "-m", "probe.worker", "10"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "20"
"""

BLIND = """\
from pathlib import Path

import probe


def test_inc_from_text():
    text = (Path(probe.__file__).parent / "core.py").read_text()
    space = {}
    exec(compile(text, "<core as text>", "exec"), space)
    assert space["inc"](1) == 2
    assert space["unused"](1) == 0  # no test runs it where coverage sees
"""

FLAKY = """\
import sys

from probe.core import sign
from tests.counter import bump


def test_sign_flaky():
    runs = bump()
    named = any("test_sign_flaky" in arg for arg in sys.argv)
    assert sign(-3) == -1 and (runs == 1 or not named)
"""

T = "tests/test_core.py::"
BLIND_ID = "tests/test_blind.py::test_inc_from_text"
FLAKY_ID = "tests/test_flaky.py::test_sign_flaky"
BUGS = {
    "sign": CORE.replace("if x < 0:", "if x > 0:"),
    "worker": CORE.replace("return x * 2", "return x * 3"),
    "inc": CORE.replace("return x + 1", "return x + 2"),
    "unused": CORE.replace("return x - 1", "return x - 2"),
    "table": CORE.replace('return {"a": 1}', 'return {"a": 2}'),
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Candidate]]:
    path = tmp_path_factory.mktemp("covering") / "probe"
    builder = RepoBuilder(path)
    files = {
        "pyproject.toml": pyproject().replace('"calc"', '"probe"'),
        "probe/__init__.py": "",
        "probe/core.py": CORE,
        "probe/worker.py": WORKER,
        "tests/__init__.py": "",
        "tests/counter.py": COUNTER,
        "tests/test_core.py": TESTS,
        "tests/test_blind.py": BLIND,
        "tests/test_flaky.py": FLAKY,
    }
    base = builder.commit("probe", files)
    candidates = {}
    for name, text in BUGS.items():
        builder.git("checkout", "-q", "-b", f"bug-{name}", base)
        bugged = builder.commit(f"bug {name}", {"probe/core.py": text})
        candidates[name] = Candidate(
            candidate_id=f"bug-{name}",
            repo="probe",
            source=str(path),
            base_commit=base,
            patch=_diff(path, bugged, base),
            test_patch="",
            origin="bug/hand_written",
            created_at="2026-01-01T00:00:00Z",
            bug_patch=_diff(path, base, bugged),
        )
        builder.git("checkout", "-q", base)
    return path, candidates


def _diff(repo: Path, before: str, after: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-renames", before, after],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_covering_tests_decide_and_the_audit_catches_a_blind_spot(
    tmp_path: Path, probe: tuple[Path, dict[str, Candidate]]
):
    path, bugs = probe
    params = load_params(str(write_params(tmp_path / "p.yaml", tmp_path / "cache")))
    repo = open_source(str(path), SourceOptions(cache_dir=str(tmp_path / "cache")))
    commit = bugs["sign"].base_commit
    vparams = ValidateParams(test_timeout_s=60, audit_share=0.0)  # only each profile's first
    sandbox = make_sandbox(params, quiet=True)
    try:
        profile = built_profile(sandbox, repo, commit, params, tmp_path / "logs")
        assert profile.test_cmd.startswith("python -m pytest"), profile.test_cmd
        clean = TestTree.at(repo.path, commit, [])

        def validate(names: list[str], share: float = 0.0):
            mutations = [mutation_of(repo.path, bugs[n], clean.tree_id) for n in names]
            book = AuditBook(share, vparams.audit_seed)  # a new run's
            batch = validate_mutations(
                sandbox, profile, clean, mutations, vparams, JUNIT_PATH, None, 1, audit=book
            )
            return batch, dict(zip(names, batch.results, strict=True))

        first, found = validate(["sign", "worker"])
        second, again = validate(["inc", "worker"])
        unrun, skipped = validate(["unused"])
        audited, caught = validate(["unused"], share=1.0)
        _, early = validate(["table"])
    finally:
        sandbox.close()

    # The profile's first kept bug is audited; its covering tests gave the full run's answer.
    sign = found["sign"].task
    assert sign is not None, found["sign"].rejection
    assert sign.provenance["audit"] == "agreed" and sign.provenance["mutant_runs"] == "audit"
    # The flake failed twice on the bug and again when rerun at clean: kept out, as flaky.
    assert (f"{T}test_sign",) == sign.FAIL_TO_PASS
    assert FLAKY_ID in sign.flaky_tests and FLAKY_ID not in sign.PASS_TO_PASS
    assert first.audit_agreed == 1 and first.audit_disagreed == 0
    # The union confirmation replaced the second full clean run: it ran only the candidates.
    confirm = first.clean_runs[-1]
    assert set(confirm.selection) == {f"{T}test_sign", f"{T}test_worker", FLAKY_ID}

    # A module line only a subprocess runs is covered: its covering test decided alone.
    worker = found["worker"].task
    assert worker is not None, found["worker"].rejection
    assert worker.provenance["mutant_runs"] == "covering"
    assert worker.provenance["covering_tests"] == "1"
    assert (f"{T}test_worker",) == worker.FAIL_TO_PASS
    assert set(worker.PASS_TO_PASS) == {
        f"{T}test_inc", f"{T}test_sign", f"{T}test_table", BLIND_ID
    }  # fmt: skip
    assert "audit" not in worker.provenance
    stopped = found["worker"].runs[0]
    assert {t.test_id for t in stopped.tests} == {f"{T}test_worker"}  # nothing else ran
    assert "rerun in the same process" in found["worker"].runs[1].log  # confirmed in-process

    # The blind spot: the full run finds the test coverage cannot see; its answer is taken, the
    # disagreement counted, and the profile runs full from then on.
    inc = again["inc"].task
    assert inc is not None, again["inc"].rejection
    assert inc.provenance["audit"] == "disagreed"
    assert (BLIND_ID, f"{T}test_inc") == inc.FAIL_TO_PASS
    assert second.audit_agreed == 0 and second.audit_disagreed == 1
    switched = again["worker"].task
    assert switched is not None, again["worker"].rejection
    assert switched.provenance["mutant_runs"] == "full"
    assert (f"{T}test_worker",) == switched.FAIL_TO_PASS
    assert len(again["worker"].runs[0].tests) == len(second.baseline[0].tests)  # the whole suite

    # No passing test executes the bug's lines where coverage sees: rejected without a run...
    blind = skipped["unused"]
    assert blind.task is None and blind.rejection.reason == "not_covered"
    assert blind.runs == () and "not run" in blind.rejection.detail
    assert unrun.audit_agreed == unrun.audit_disagreed == 0
    # ...unless drawn for the audit: the whole suite runs, and the test coverage could not see
    # fails, so it is a disagreement (the profile runs full from then on) and the task is kept.
    kept = caught["unused"].task
    assert kept is not None, caught["unused"].rejection
    assert kept.FAIL_TO_PASS == (BLIND_ID,) and kept.provenance["audit"] == "disagreed"
    assert audited.audit_disagreed == 1

    # A function only a module body calls runs at import, before any test: coverage measured it
    # there, so the whole suite decides, and the test reading what it left is FAIL_TO_PASS.
    table = early["table"].task
    assert table is not None, early["table"].rejection
    assert (f"{T}test_table",) == table.FAIL_TO_PASS
    assert table.provenance["mutant_runs"] == "full"
