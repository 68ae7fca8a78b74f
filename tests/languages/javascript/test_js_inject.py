"""inject on a test-built JS + TypeScript project: the snapshot's language is read from its
commit, bugs go only into library sources (never tests, node_modules, dist/, bundles or tool
configuration), and every candidate's bug_patch applies with git while its patch gives back the
clean files byte for byte (a BOM, CRLF line ends and a file without a final newline included).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that
from repo_factory import RepoBuilder
from trajforge.generators.bugs.injector import inject_snapshot, is_library_source
from trajforge.generators.languages.javascript.mutations import JS_OPERATORS
from trajforge.generators.languages.registry import language_named
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.stages.inject import InjectBugs
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.errors import SourceError
from trajforge.schemas.params import InjectParams, Params
from trajforge.schemas.rejection import Rejection

STATS_JS = """\ufeff'use strict';
// mean and clamp — déjà testés
function mean(xs) {
  if (!xs || xs.length === 0) {
    return 0;
  }
  let total = 0;
  for (let i = 0; i < xs.length; i++) {
    total += xs[i];
  }
  return total / xs.length;
}

function clamp(x, lo, hi) {
  if (x < lo) return lo;
  if (x > hi) return hi;
  return x;
}

module.exports = { mean, clamp };
"""

# CRLF line ends and no newline at the end of the file
RANGE_TS = (
    "export interface Range { lo: number; hi: number }\r\n"
    "\r\n"
    "export function inside(r: Range, x: number): boolean {\r\n"
    "  if (r.lo > r.hi) {\r\n"
    "    throw new Error('empty range');\r\n"
    "  }\r\n"
    "  return r.lo <= x && x < r.hi;\r\n"
    "}\r\n"
    "\r\n"
    "export function widen(r: Range, by: number): Range {\r\n"
    "  const lo = by > 0 ? r.lo - by : r.lo;\r\n"
    "  return { lo, hi: r.hi + by };\r\n"
    "}"
)

TEST_JS = """const { mean, clamp } = require('../src/stats');
test('mean', () => { if (mean([1, 3]) !== 2) throw new Error('mean'); });
test('clamp', () => { if (clamp(5, 0, 3) !== 3) throw new Error('clamp'); });
"""
SPEC_TS = "import { inside } from './range';\nit('in', () => { inside({ lo: 0, hi: 2 }, 1); });\n"
# Complex enough to be drawn, if anything were drawn from them
DECOY = "function f(a, b) {\n  if (a > b) { return a - b; }\n  return a + b;\n}\n"

PACKAGE = {"name": "statslib", "version": "1.0.0", "scripts": {"test": "jest"}}
LIBRARY = {"src/stats.js", "src/range.ts"}

JS = language_named("javascript")


@pytest.fixture(scope="module")
def js_repo(tmp_path_factory) -> tuple[Path, str]:
    repo = RepoBuilder(tmp_path_factory.mktemp("jsinject") / "statslib")
    sha = repo.commit(
        "statslib",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "tsconfig.json": '{ "compilerOptions": { "strict": true } }\n',
            "src/stats.js": STATS_JS,
            "src/range.ts": RANGE_TS,
            "src/range.spec.ts": SPEC_TS,
            "test/stats.test.js": TEST_JS,
            "__tests__/decoy.js": DECOY,
            "node_modules/left-pad/index.js": DECOY,
            "dist/stats.js": DECOY,
            "lib/stats.min.js": DECOY,
            "jest.config.js": "module.exports = " + DECOY.replace("function f", "function cfg"),
            "src/types.d.ts": "export declare function mean(xs: number[]): number;\n",
            ".eslintrc.js": DECOY,
        },
    )
    return repo.path, sha


def _inject(path: Path, **knobs) -> tuple[list[Candidate], list[Rejection]]:
    repo = open_source(str(path), SourceOptions(cache_dir=str(path.parent / "cache")))
    params = InjectParams(**{"max_candidates": 12, "seed": 3, "min_complexity": 1, **knobs})
    result = inject_snapshot(repo, params, Params().mine.skip_globs)
    assert result.language == "javascript"
    return result.candidates, result.rejections


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True
    ).stdout


def test_js_bugs_apply_and_undo_byte_exactly_with_git(js_repo, tmp_path):
    path, sha = js_repo
    candidates, _ = _inject(path)
    assert len(candidates) == 12
    assert len({c.candidate_id for c in candidates}) == 12  # no two bugs alike
    assert {c.base_commit for c in candidates} == {sha}
    assert all(c.origin.removeprefix("bug/") in JS_OPERATORS for c in candidates)
    assert len({c.origin for c in candidates}) >= 4  # the draw goes round the operators
    touched = {f for c in candidates for f in parse_patch(c.bug_patch).files}
    assert touched == LIBRARY  # both languages' files, and nothing else
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(path), str(work)], check=True)
    clean = {name: (work / name).read_bytes() for name in LIBRARY}
    for c in candidates:
        assert c.test_patch == "" and c.patch and c.patch != c.bug_patch
        _git(work, "apply", "--check", "-", stdin=c.bug_patch.encode())
        _git(work, "apply", "-", stdin=c.bug_patch.encode())
        assert _git(work, "status", "--porcelain"), c.origin  # the bug changed a file
        _git(work, "apply", "-", stdin=c.patch.encode())
        assert {name: (work / name).read_bytes() for name in LIBRARY} == clean, c.origin
        assert _git(work, "status", "--porcelain") == b""
    assert _inject(path)[0] == candidates  # the seed alone decides


def test_only_library_sources_are_mutated():
    for path in LIBRARY | {"src/a.jsx", "lib/b.mjs", "packages/x/src/c.cts"}:
        assert is_library_source(path, [], JS), path
    for path in (
        "src/range.spec.ts", "test/stats.test.js", "__tests__/decoy.js", "node_modules/a/i.js",
        "dist/stats.js", "lib/stats.min.js", "jest.config.js", "src/types.d.ts",
        ".eslintrc.js", "Gruntfile.js", "docs/conf.js", "src/stats.py", "README.md",
    ):  # fmt: skip
        assert not is_library_source(path, [], JS), path
    assert is_library_source("pkg/core.py", []) and not is_library_source("src/stats.js", [])


def test_the_operators_allow_list_applies_per_language(js_repo):
    path, _ = js_repo
    candidates, _ = _inject(path, operators=["flip_comparison", "remove_except_handler"])
    assert candidates and {c.origin for c in candidates} == {"bug/flip_comparison"}
    with pytest.raises(SourceError) as caught:
        _inject(path, operators=["remove_except_handler"])  # Python's only
    assert caught.value.reason == "no_operator_for_language"
    assert "remove_except_handler" in str(caught.value) and "\n" not in str(caught.value)


def test_the_stage_counts_js_snapshots_and_rejects_model_bugs_in_one_line(js_repo, tmp_path):
    path, _ = js_repo
    params = Params(cache_dir=str(tmp_path / "cache")).check()
    params.inject.max_candidates, params.inject.min_complexity = 4, 1

    def four(candidates: list[Candidate]) -> None:
        assert len(candidates) == 4 and all(c.bug_patch for c in candidates)

    with BeamPipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create([str(path)]) | InjectBugs(params)
        assert_that(out["candidates"], four, label="candidates")
    llm = Params(cache_dir=str(tmp_path / "cache2")).check()
    llm.inject.mode = "llm"
    llm.llm.base_url, llm.llm.model = "http://127.0.0.1:9/v1", "none"  # never called for JS

    def python_only(rejections: list[Rejection]) -> None:
        assert [r.reason for r in rejections] == ["llm_bugs_python_only"], rejections
        assert "inject.mode procedural" in rejections[0].detail

    with BeamPipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create([str(path)]) | InjectBugs(llm)
        assert_that(out["rejections"], python_only, label="rejections")
