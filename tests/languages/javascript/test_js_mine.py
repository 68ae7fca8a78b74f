"""mine on a test-built npm project: a commit's diff is split by JS/TS conventions, generated
files (an npm-made lock file, a minified bundle, a vendored node_modules) never enter a patch,
and the Python rules stay as they were for a Python repository.

The lock files are npm's own (``npm install --package-lock-only``; the project has no
dependencies, so npm needs no registry), the repository real git, the stage Beam's.
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
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.languages.javascript.test_files import is_js_generated
from trajforge.generators.mining.commits import has_tests, mine_commit
from trajforge.generators.mining.diff_split import is_test_path
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.stages.mine import MineRepos
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.params import MineParams, Params
from trajforge.schemas.rejection import Rejection

SUM_BUGGY = "function sum(xs) {\n  let t = 0;\n  for (const x of xs) t -= x;\n  return t;\n}\n"
SUM_FIXED = SUM_BUGGY.replace("t -= x", "t += x")
SUM_JS = "module.exports = { sum };\n"
SUM_TEST = (
    "const { sum } = require('../src/sum');\n"
    "test('adds', () => { expect(sum([1, 2])).toBe(3); });\n"
)
RANGE_TS = (
    "export function inside(lo: number, hi: number, x: number): boolean {\n  return lo < x;\n}\n"
)
RANGE_SPEC = (
    "import { inside } from './range';\n"
    "it('checks the upper bound', () => { expect(inside(0, 2, 5)).toBe(false); });\n"
)


def npm_lock(work: Path, package: dict, version: int) -> str:
    """package-lock.json for ``package`` as npm writes it (lockfileVersion ``version``)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "package.json").write_text(json.dumps(package))
    subprocess.run(
        ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund",
         "--offline", f"--lockfile-version={version}"],
        cwd=work, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return (work / "package-lock.json").read_text()


@pytest.fixture(scope="module")
def npm_repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("jsmine")
    package = {"name": "sumlib", "version": "1.0.0", "scripts": {"test": "jest"}}
    repo = RepoBuilder(root / "sumlib")
    shas = {}
    shas["initial"] = repo.commit(
        "initial",
        {
            "package.json": json.dumps(package, indent=2) + "\n",
            "package-lock.json": npm_lock(root / "lock2", package, 2),
            "src/sum.js": SUM_BUGGY + SUM_JS,
            "test/smoke.test.js": "test('loads', () => { require('../src/sum'); });\n",
        },
    )
    shas["fix"] = repo.commit(
        "Fix sum: it subtracted",
        {
            "src/sum.js": SUM_FIXED + SUM_JS,
            "src/__tests__/sum.test.js": SUM_TEST,
            "package-lock.json": npm_lock(root / "lock3", package, 3),  # npm re-locked it
            "dist/sum.min.js": "function sum(n){let t=0;for(const o of n)t+=o;return t}\n",
            "node_modules/left-pad/index.js": "module.exports = (s) => ' ' + s;\n",
        },
    )
    shas["ts"] = repo.commit(
        "inside: check the upper bound",
        {
            "src/range.ts": RANGE_TS.replace("lo < x", "lo < x && x < hi"),
            "src/range.spec.ts": RANGE_SPEC,
        },
    )
    shas["lock_and_tests"] = repo.commit(
        "relock, one more test",
        {
            "package-lock.json": npm_lock(root / "lock2b", package, 2),
            "test/more.spec.js": "it('adds none', () => {});\n",
        },
    )
    return repo.path, shas


def _mine(path: Path, sha: str) -> Candidate | Rejection:
    repo = open_source(str(path), SourceOptions(cache_dir=str(path.parent / "cache")))
    return mine_commit(repo, sha, MineParams())


def _files(patch: str) -> set[str]:
    return set(parse_patch(patch).files)


def test_a_js_fix_with_its_test_is_one_candidate_split_by_js_conventions(npm_repo):
    path, shas = npm_repo
    assert language_at(str(path), shas["initial"]).name == "javascript"
    candidate = _mine(path, shas["fix"])
    assert isinstance(candidate, Candidate), candidate
    assert candidate.base_commit == shas["initial"] and candidate.origin == "commit"
    assert _files(candidate.patch) == {"src/sum.js"}
    assert _files(candidate.test_patch) == {"src/__tests__/sum.test.js"}
    # npm's lock file, the bundle and the vendored module: skipped, named, in no patch
    skipped = {"package-lock.json", "dist/sum.min.js", "node_modules/left-pad/index.js"}
    assert set(candidate.meta.skipped_files) == skipped
    assert not any(name in candidate.patch + candidate.test_patch for name in skipped)
    assert candidate.meta.files_changed == 2


def test_a_typescript_change_with_a_spec_is_a_candidate(npm_repo):
    path, shas = npm_repo
    candidate = _mine(path, shas["ts"])
    assert isinstance(candidate, Candidate), candidate
    assert _files(candidate.patch) == {"src/range.ts"}
    assert _files(candidate.test_patch) == {"src/range.spec.ts"}
    assert not is_test_path("src/range.spec.ts")  # Python's rule would have called it a fix


def test_a_lock_file_is_not_a_source_change(npm_repo):
    path, shas = npm_repo
    result = _mine(path, shas["lock_and_tests"])
    assert isinstance(result, Rejection) and result.reason == "no_source_change", result
    assert _mine(path, shas["initial"]).reason == "root_commit"


@pytest.mark.parametrize(
    ("path", "generated"),
    [
        ("package-lock.json", True),
        ("packages/a/pnpm-lock.yaml", True),
        ("dist/index.js", True),
        ("lib/jquery.min.js", True),
        ("src/node_modules/x/index.js", True),
        ("src/index.js.map", True),
        ("src/distance.js", False),
        ("src/index.ts", False),
        ("package.json", False),
    ],
)
def test_generated_js_paths(path, generated):
    assert is_js_generated(path) is generated


def test_the_mine_stage_lists_and_mines_a_js_repository(npm_repo, tmp_path):
    """The stage lists the JS repository's commits (it has tests by JS's conventions), keeps
    the two fixes and says why for the rest."""
    path, shas = npm_repo
    repo = open_source(str(path), SourceOptions(cache_dir=str(tmp_path / "c")))
    assert has_tests(repo)
    params = Params(cache_dir=str(tmp_path / "cache")).check()

    def the_two_fixes(candidates: list[Candidate]) -> None:
        assert sorted(c.meta.commit for c in candidates) == sorted([shas["fix"], shas["ts"]])

    def why_not(rejections: list[Rejection]) -> None:
        got = {r.input.rsplit("@", 1)[1]: r.reason for r in rejections}
        assert got == {
            shas["initial"][:12]: "root_commit",
            shas["lock_and_tests"][:12]: "no_source_change",
        }, got

    with BeamPipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create([str(path)]) | MineRepos(params)
        assert_that(out["candidates"], the_two_fixes, label="candidates")
        assert_that(out["rejections"], why_not, label="rejections")


def test_a_bad_package_json_is_one_rejection_not_a_crash(tmp_path):
    repo = RepoBuilder(tmp_path / "broken")
    repo.commit("init", {"package.json": "{ not json", "src/a.js": "x;\n"})
    sha = repo.commit("fix", {"src/a.js": "y;\n", "src/a.test.js": "test('a', () => {});\n"})
    params = Params(cache_dir=str(tmp_path / "cache")).check()

    def one_line(rejections: list[Rejection]) -> None:
        assert [r.reason for r in rejections] == ["bad_package_json"], rejections
        assert "package.json does not parse" in rejections[0].detail

    assert sha
    with BeamPipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create([str(repo.path)]) | MineRepos(params)
        assert_that(out["rejections"], one_line, label="rejections")
