"""JavaScript/TypeScript through every stage a task passes: `inject` -> `validate` -> `evaluate`.

Three test-built projects, each a runner and a package manager the other JS tests do not take
through all three stages (npm + jest is tests/languages/javascript/test_js_validate.py's):

- a TypeScript project tested by vitest, installed by pnpm (no lock file);
- a project with no dependencies tested by node's built-in runner (`node --test`), npm;
- a yarn berry monorepo (its lock file made by yarn 4) whose one tested package runs mocha,
  installed at the root;
- a project tested by ava (one run per file), installed by yarn classic;
- a project tested by node-tap 16, npm.

One real CLI run of each stage over all five: inject's operators write the bugs, validate
proves them (one image per project, from the npm registry), and evaluate grades every task's
gold patch (resolved) and an empty one (not), under the grader's supervisor.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from repo_factory import RepoBuilder
from test_js_environments import TS_PACKAGE
from test_js_monorepo import YARN, berry_lock
from trajforge.schemas.js_commands import package_dir

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TS_SOURCE = """\
export function area(w: number, h: number): number {
  return w * h;
}

export function perimeter(w: number, h: number): number {
  return 2 * (w + h);
}

export function isSquare(w: number, h: number): boolean {
  return w > 0 && w === h;
}
"""
TS_TESTS = """\
import { describe, expect, it } from 'vitest';
import { area, isSquare, perimeter } from '../src/shapes';

describe('shapes', () => {
  it('area', () => { expect(area(2, 3)).toBe(6); });
  it('perimeter', () => { expect(perimeter(2, 3)).toBe(10); });
  describe('squares', () => {
    it('a square', () => { expect(isSquare(2, 2)).toBe(true); });
    it('not a square', () => { expect(isSquare(2, 3)).toBe(false); });
    it('no empty square', () => { expect(isSquare(0, 0)).toBe(false); });
  });
});
"""
NODE_PACKAGE = {"name": "words", "version": "1.0.0", "scripts": {"test": "node --test"}}
NODE_SOURCE = """\
function shout(word) {
  return word.toUpperCase() + '!';
}

function initials(name) {
  return name.split(' ').filter((part) => part.length > 0).map((part) => part[0]).join('');
}

function repeat(word, times) {
  let out = '';
  for (let i = 0; i < times; i += 1) out += word;
  return out;
}

module.exports = { shout, initials, repeat };
"""
NODE_TESTS = """\
const { describe, it } = require('node:test');
const assert = require('node:assert');
const { shout, initials, repeat } = require('../lib/words');

describe('words', () => {
  it('shouts', () => { assert.strictEqual(shout('hi'), 'HI!'); });
  it('takes initials', () => { assert.strictEqual(initials('Ada  Lovelace'), 'AL'); });
  describe('repeat', () => {
    it('twice', () => { assert.strictEqual(repeat('ab', 2), 'abab'); });
    it('never', () => { assert.strictEqual(repeat('ab', 0), ''); });
  });
});
"""
MONO_ROOT = {
    "name": "mono",
    "private": True,
    "packageManager": f"yarn@{YARN}",
    "workspaces": ["packages/*"],
    "scripts": {"test": "yarn workspaces foreach -A run test"},
}
MONO_CORE = {
    "name": "core",
    "version": "1.0.0",
    "scripts": {"test": "mocha test/"},
    "devDependencies": {"mocha": "10.4.0"},
}
CORE_SOURCE = """\
function clamp(value, low, high) {
  if (value < low) return low;
  if (value > high) return high;
  return value;
}

function total(values) {
  let sum = 0;
  for (const value of values) sum += value;
  return sum;
}

module.exports = { clamp, total };
"""
CORE_TESTS = """\
const assert = require('assert');
const { clamp, total } = require('../lib/core');

describe('core', () => {
  it('clamps low', () => { assert.strictEqual(clamp(-5, 0, 10), 0); });
  it('clamps high', () => { assert.strictEqual(clamp(15, 0, 10), 10); });
  it('keeps the middle', () => { assert.strictEqual(clamp(5, 0, 10), 5); });
  it('totals', () => { assert.strictEqual(total([1, 2, 3]), 6); });
});
"""
AVA_PACKAGE = {
    "name": "money",
    "version": "1.0.0",
    "packageManager": "yarn@1.22.22",
    "scripts": {"test": "ava"},
    "devDependencies": {"ava": "5.3.1"},
}
AVA_SOURCE = """\
function cents(amount) {
  return Math.round(amount * 100);
}

function format(amount) {
  if (amount < 0) return '-' + format(-amount);
  return '$' + amount.toFixed(2);
}

module.exports = { cents, format };
"""
AVA_TESTS = """\
const test = require('ava');
const { cents, format } = require('../lib/money');

test('cents', (t) => { t.is(cents(1.25), 125); });
test('formats', (t) => { t.is(format(3), '$3.00'); });
test('formats a debt', (t) => { t.is(format(-2.5), '-$2.50'); });
"""
TAP_PACKAGE = {
    "name": "ranges",
    "version": "1.0.0",
    "scripts": {"test": "tap"},
    "devDependencies": {"tap": "16.3.10"},
}
TAP_SOURCE = """\
function span(values) {
  let low = Infinity;
  let high = -Infinity;
  for (const value of values) {
    if (value < low) low = value;
    if (value > high) high = value;
  }
  return high - low;
}

function within(value, low, high) {
  return value >= low && value <= high;
}

module.exports = { span, within };
"""
TAP_TESTS = """\
const t = require('tap');
const { span, within } = require('../lib/ranges');

t.test('span', async (t) => { t.equal(span([3, 9, 4]), 6); });
t.test('within', async (t) => {
  t.ok(within(5, 1, 10));
  t.notOk(within(11, 1, 10));
  t.ok(within(1, 1, 10));
});
"""
DOCS = "# notes\n"  # every project has a file no test reads
PARAMS = """\
cache_dir: {cache}
inject:
  repos: [{repos}]
  max_candidates: 4
  min_complexity: 1
  combos: 0
  seed: 7
validate:
  test_timeout_s: 180
  workers: 2
  gold_runs: 0
"""
RUNNERS = {"shapes": "vitest", "words": "node", "mono": "mocha", "money": "ava", "ranges": "tap"}


@pytest.fixture(scope="module")
def stages(tmp_path_factory, docker_engine):
    """(work, tasks by id): inject and validate run once over the five projects."""
    root = tmp_path_factory.mktemp("jsstages")
    shapes = RepoBuilder(root / "shapes")
    shapes.commit(
        "shapes in TypeScript with vitest, pnpm",
        {
            "package.json": json.dumps(TS_PACKAGE, indent=2) + "\n",
            "tsconfig.json": '{"compilerOptions": {"strict": true, "module": "esnext"}}\n',
            "src/shapes.ts": TS_SOURCE,
            "test/shapes.test.ts": TS_TESTS,
            "NOTES.md": DOCS,
        },
    )
    words = RepoBuilder(root / "words")
    words.commit(
        "words with node's test runner",
        {
            "package.json": json.dumps(NODE_PACKAGE, indent=2) + "\n",
            "lib/words.js": NODE_SOURCE,
            "test/words.test.js": NODE_TESTS,
            "NOTES.md": DOCS,
        },
    )
    mono_files = {
        "package.json": json.dumps(MONO_ROOT, indent=2) + "\n",
        ".yarnrc.yml": "nodeLinker: pnp\nenableGlobalCache: true\n",
        "packages/core/package.json": json.dumps(MONO_CORE, indent=2) + "\n",
        "packages/core/lib/core.js": CORE_SOURCE,
        "packages/core/test/core.test.js": CORE_TESTS,
        "packages/docs/package.json": json.dumps({"name": "docs", "version": "1.0.0"}) + "\n",
        "NOTES.md": DOCS,
    }
    mono_files["yarn.lock"] = berry_lock(mono_files)
    mono = RepoBuilder(root / "mono")
    mono.commit("a yarn berry workspace whose core package runs mocha", mono_files)
    money = RepoBuilder(root / "money")
    money.commit(
        "money with ava, yarn classic",
        {
            "package.json": json.dumps(AVA_PACKAGE, indent=2) + "\n",
            "lib/money.js": AVA_SOURCE,
            "test/money.test.js": AVA_TESTS,
            "NOTES.md": DOCS,
        },
    )
    ranges = RepoBuilder(root / "ranges")
    ranges.commit(
        "ranges with node-tap",
        {
            "package.json": json.dumps(TAP_PACKAGE, indent=2) + "\n",
            "lib/ranges.js": TAP_SOURCE,
            "test/ranges.test.js": TAP_TESTS,
            "NOTES.md": DOCS,
        },
    )
    work = root / "work"
    work.mkdir()
    repos = ", ".join(str(r.path) for r in (shapes, words, mono, money, ranges))
    (work / "params.yaml").write_text(PARAMS.format(cache=work / "cache", repos=repos))
    injected = run_cli("inject", "--output", "inject", cwd=work)
    assert injected.returncode == 0, injected.stderr[-3000:]
    validated = run_cli("validate", "--input", "inject", "--output", "validate", cwd=work)
    assert validated.returncode == 0, validated.stderr[-3000:]
    frame = pl.read_parquet(work / "validate" / "tasks" / "*.parquet")
    return work, {row["instance_id"]: row for row in frame.to_dicts()}


def _evaluate(work: Path, name: str, tasks: dict[str, dict], patch_of) -> dict:
    predictions = work / f"{name}.jsonl"
    rows = [
        {"instance_id": i, "model_name_or_path": name, "model_patch": patch_of(row)}
        for i, row in tasks.items()
    ]
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_cli(
        "evaluate", "--tasks", "validate", "--predictions", str(predictions),
        "--output", f"eval-{name}", "--workers", "2", cwd=work,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((work / f"eval-{name}" / f"{name}.evaluate.json").read_text())


def test_every_project_gives_tasks_of_its_runner(stages):
    _, tasks = stages
    by_repo: dict[str, list[dict]] = {}
    for row in tasks.values():
        by_repo.setdefault(row["repo"].removeprefix("local/"), []).append(row)
    assert set(by_repo) == set(RUNNERS), sorted(by_repo)
    for repo, rows in by_repo.items():
        assert {(r["language"], r["test_runner"]) for r in rows} == {("javascript", RUNNERS[repo])}
        for row in rows:
            assert row["FAIL_TO_PASS"] and row["bug_patch"] and row["test_patch"] == ""
    for row in by_repo["mono"]:  # the tested package's suite, ids from the repository's root
        assert package_dir(row["test_cmd"]) == "packages/core"
        assert all(t.startswith("packages/core/test/") for t in row["FAIL_TO_PASS"])
    assert all(
        t.startswith("test/shapes.test.ts > shapes") for t in by_repo["shapes"][0]["FAIL_TO_PASS"]
    )


def test_gold_resolves_and_empty_does_not_for_every_runner(stages):
    work, tasks = stages
    gold = _evaluate(work, "gold", tasks, lambda row: row["patch"])
    assert sorted(gold["resolved_ids"]) == sorted(tasks), gold
    assert gold["error_ids"] == [] and gold["unresolved_ids"] == []
    empty = _evaluate(work, "empty", tasks, lambda row: "")
    assert empty["resolved_ids"] == [] and sorted(empty["empty_patch_ids"]) == sorted(tasks)
