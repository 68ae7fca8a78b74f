"""Coverage-guided site choice without containers: the covered lines as validate writes them,
read back by inject (the end-to-end run with real coverage is test_coverage_guided_e2e.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from coverage_repo import CORE, COVERED, PATH, build_halfway_repo
from trajforge.generators.bugs.injector import inject_snapshot
from trajforge.generators.languages.python.mutations import function_targets
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.coverage_sites import (
    NAMESPACE,
    CoveredLines,
    covered_key,
    covered_lines,
    recall,
    remember,
)
from trajforge.schemas.params import InjectParams
from trajforge.schemas.storage import ContentCache


@pytest.fixture(scope="module")
def halfway(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("sites") / "halfway"
    build_halfway_repo(path)
    tree = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD^{tree}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return path, tree


def _body_lines(names: tuple[str, ...], with_def: bool = False) -> frozenset[int]:
    """The lines a run of ``names`` executes (the def lines: what an import alone runs)."""
    lines: set[int] = set()
    for target in function_targets(PATH, CORE):
        if target.qualname in names:
            lines.update(range(target.start_line + (0 if with_def else 1), target.end_line + 1))
    return frozenset(lines)


def _inject(path: Path, tree: str, covered: CoveredLines | None, guided: bool = True):
    repo = open_source(str(path), SourceOptions(cache_dir=str(path.parent / "cache")))
    params = InjectParams(max_candidates=12, seed=4, coverage_guided=guided)
    return inject_snapshot(repo, params, [], covered_at=lambda c, t: covered if t == tree else None)


def _functions(result) -> set[str]:
    """Each bug's function, from its description ("flip `<` to `>=` in f line 12")."""
    return {re.findall(r" in ([\w.]+) line \d+", c.meta.message)[-1] for c in result.candidates}


def test_guided_sites_are_only_in_functions_the_passing_tests_run(halfway):
    path, tree = halfway
    guided = _inject(path, tree, CoveredLines(tree, {PATH: _body_lines(COVERED)}))
    unguided = _inject(path, tree, None, guided=False)
    assert guided.guided is True and unguided.guided is None
    assert len(guided.candidates) == len(unguided.candidates) == 12
    assert _functions(guided) <= set(COVERED), _functions(guided)
    # the same seed without guidance spends bugs on functions no test runs
    assert _functions(unguided) - set(COVERED), _functions(unguided)


def test_an_edit_on_a_line_no_test_runs_is_left_out_even_in_a_called_function(halfway):
    path, tree = halfway
    branch = CORE.splitlines().index("        return hi") + 1  # a branch the tests were to skip
    covered = _body_lines(COVERED) - {branch}
    result = _inject(path, tree, CoveredLines(tree, {PATH: covered}))
    assert result.guided is True and result.candidates
    for candidate in result.candidates:
        first = int(re.findall(r" line (\d+)$", candidate.meta.message)[0])
        assert first in covered and first != branch, candidate.meta.message


def test_nothing_known_for_the_snapshot_samples_as_before_and_says_so(halfway):
    path, tree = halfway
    unknown = _inject(path, tree, None)
    off = _inject(path, tree, None, guided=False)
    assert unknown.guided is False  # the sites_unguided count
    assert [c.bug_patch for c in unknown.candidates] == [c.bug_patch for c in off.candidates]


def test_def_lines_alone_are_not_a_call(halfway):
    """An import runs every def line: a function whose only covered line is its def is not run,
    so nothing is guided there, and sampling falls back rather than injecting nothing."""
    path, tree = halfway
    names = tuple(t.qualname for t in function_targets(PATH, CORE))
    defs_only = _body_lines(names, with_def=True) - _body_lines(names)
    result = _inject(path, tree, CoveredLines(tree, {PATH: defs_only}))
    assert result.guided is False
    assert len(result.candidates) == 12


def test_covered_lines_are_the_union_over_passing_tests_only():
    by_file = {"a.py": {3: (0,), 4: (1,), 5: (0, 1)}, "b.py": {9: (1,)}}
    found = covered_lines("t1", by_file, ["test_ok", "test_fails"], passing=["test_ok"])
    assert found.files == {"a.py": frozenset({3, 5})}
    assert found.runs_any("a.py", 4, 5) and not found.runs_any("a.py", 4, 4)
    assert not found.runs_any("b.py", 1, 100)


def test_a_hostile_cache_entry_is_no_guidance(tmp_path):
    cache = ContentCache(str(tmp_path), NAMESPACE)
    remember(cache, CoveredLines("tree-a", {"x.py": frozenset({1, 2})}))
    assert recall(cache, "tree-a") == CoveredLines("tree-a", {"x.py": frozenset({1, 2})})
    for bad in ({"files": "nope", "tree_id": "tree-b"}, {"tree_id": "tree-b"}, [1, 2]):
        cache.put(covered_key("tree-b"), bad)  # type: ignore[arg-type]
        assert recall(cache, "tree-b") is None
    cache.put(covered_key("tree-c"), CoveredLines("tree-a", {}).to_json())  # another tree's
    assert recall(cache, "tree-c") is None


def test_inject_counts_guided_and_unguided_snapshots(tmp_path, halfway):
    path, tree = halfway
    # what validate left is read back (inject_coverage.py's own measuring: the Docker tests)
    extra = "inject:\n  measure_coverage: false\n"
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", extra)

    def inject(out: str) -> tuple[dict, pl.DataFrame]:
        done = run_cli(
            "inject", "--repo", str(path), "--max-candidates", "8", "--seed", "4",
            "--params", str(params), "--output", str(tmp_path / out), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        summary = json.loads((tmp_path / out / "summary.json").read_text())
        return summary, pl.read_parquet(tmp_path / out / "candidates" / "*.parquet")

    before, _ = inject("first")
    assert before["sites_unguided"] == 1 and "sites_guided" not in before
    cache = ContentCache(str(tmp_path / "cache"), NAMESPACE)
    remember(cache, CoveredLines(tree, {PATH: _body_lines(COVERED)}))
    after, candidates = inject("second")
    assert after["sites_guided"] == 1 and "sites_unguided" not in after
    messages = candidates.select(pl.col("meta").struct.field("message"))["message"]
    assert all(any(f"in {name} " in m for name in COVERED) for m in messages), list(messages)


def test_first_contact_without_a_sandbox_samples_unguided_and_says_why(tmp_path, halfway):
    """inject measures a snapshot nothing is known of (inject_coverage.py); with no engine to
    run its suite in, the bugs are drawn unguided and the summary names why, one line."""
    path, _ = halfway
    gone = f"unix://{tmp_path}/no-docker.sock"
    extra = f"sandbox:\n  docker_host: {gone}\n"
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", extra)
    done = run_cli(
        "inject", "--repo", str(path), "--max-candidates", "4", "--seed", "4",
        "--params", str(params), "--output", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["sites_unguided"] == 1 and "coverage_measured" not in summary, summary
    counted = [k for k in summary if k.startswith("coverage_unmeasured_")]
    assert len(counted) == 1 and summary[counted[0]] == 1, summary
    line = summary["coverage_unmeasured"]
    assert line.startswith(f"local/halfway: {counted[0].removeprefix('coverage_unmeasured_')}: ")
    assert "\n" not in line and "Traceback" not in line
    assert summary["sites"].endswith(": coverage unknown, 4 bugs drawn"), summary
