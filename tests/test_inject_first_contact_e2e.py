"""Inject's first contact measures coverage itself: an application-shaped repository (several
modules, a thin suite that runs a small part of them) gets its bugs where the tests look from its
very first ``inject``, so ``validate`` keeps tasks and ``not_covered`` is no majority; the same
first inject with guidance off lands most bugs where nothing runs. Real git, real Docker, real
coverage (pipelines/stages/inject_coverage.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import RepoBuilder
from trajforge.schemas.coverage_sites import NAMESPACE, recall
from trajforge.schemas.storage import ContentCache

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

BUGS = 10

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shop"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["shop"]
"""

PRICING = '''\
"""Prices: the only module the suite runs."""


def discounted(price, percent):
    if percent <= 0:
        return price
    if percent >= 100:
        return 0
    return round(price * (100 - percent) / 100, 2)


def with_tax(price, rate):
    if rate < 0:
        raise ValueError("negative tax rate")
    total = price
    for _ in range(1):
        total = total + price * rate
    return round(total, 2)
'''

INVENTORY = '''\
"""Stock levels: no test runs this module."""


def restock(levels, item, count):
    if count <= 0:
        raise ValueError("restock needs a positive count")
    levels[item] = levels.get(item, 0) + count
    return levels[item]


def reserve(levels, item, count):
    have = levels.get(item, 0)
    if have < count:
        return False
    levels[item] = have - count
    return True


def low_stock(levels, threshold):
    low = []
    for item, have in sorted(levels.items()):
        if have <= threshold and have >= 0:
            low.append(item)
    return low
'''

ORDERS = '''\
"""Orders: no test runs this module."""


def order_total(lines):
    total = 0
    for quantity, price in lines:
        if quantity > 0 and price >= 0:
            total += quantity * price
    return total


def split_shipments(lines, per_box):
    boxes = []
    box = []
    for line in lines:
        box.append(line)
        if len(box) == per_box:
            boxes.append(box)
            box = []
    if box:
        boxes.append(box)
    return boxes


def status(paid, shipped, cancelled):
    if cancelled:
        return "cancelled"
    if shipped and paid:
        return "done"
    if paid:
        return "paid"
    return "open"
'''

REPORTS = '''\
"""Reports: no test runs this module."""


def top_items(counts, n):
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if n <= 0:
        return []
    return [name for name, _ in ranked[:n]]


def format_rows(rows, width):
    out = []
    for name, value in rows:
        if len(name) > width:
            name = name[: width - 1] + "~"
        out.append(name.ljust(width) + str(value))
    return out


def summary(counts):
    if not counts:
        return "empty"
    total = 0
    for value in counts.values():
        total += value
    return f"{len(counts)} items, {total} units"
'''

CLI = '''\
"""The command line: no test runs this module."""


def parse_flags(argv):
    flags = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv):
            flags[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            i += 1
    return flags


def exit_code(errors, warnings, strict):
    if errors > 0:
        return 2
    if warnings > 0 and strict:
        return 1
    return 0
'''

TESTS = """\
from shop.pricing import discounted, with_tax


def test_discount_none():
    assert discounted(10.0, 0) == 10.0


def test_discount_half():
    assert discounted(10.0, 50) == 5.0


def test_discount_all():
    assert discounted(10.0, 100) == 0


def test_tax():
    assert with_tax(10.0, 0.2) == 12.0
"""


def _build_shop(path: Path) -> str:
    """The package and its thin suite in one commit; returns the commit's git tree."""
    builder = RepoBuilder(path)
    builder.commit(
        "shop",
        {
            "pyproject.toml": PYPROJECT,
            "shop/__init__.py": "",
            "shop/pricing.py": PRICING,
            "shop/inventory.py": INVENTORY,
            "shop/orders.py": ORDERS,
            "shop/reports.py": REPORTS,
            "shop/cli.py": CLI,
            "tests/test_pricing.py": TESTS,
        },
    )
    return builder.git("rev-parse", "HEAD^{tree}").strip()


def _first_round(tmp_path: Path, repo: Path, name: str, guided: bool) -> tuple[dict, dict, dict]:
    """The repository's first inject and its validate: (inject summary, validate summary,
    outcomes: bugs drawn, kept and each of validate's rejection reasons, counted)."""
    extra = f"inject:\n  combos: 0\n  coverage_guided: {str(guided).lower()}\n"
    params = write_params(tmp_path / f"{name}.yaml", tmp_path / "cache", extra)
    inject = run_cli(
        "inject", "--repo", str(repo), "--max-candidates", str(BUGS), "--seed", "3",
        "--params", str(params), "--output", str(tmp_path / f"{name}-inject"), cwd=tmp_path,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    validate = run_cli(
        "validate", "--input", str(tmp_path / f"{name}-inject"),
        "--output", str(tmp_path / f"{name}-val"), "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    out = tmp_path / f"{name}-val"
    rejections = pl.read_parquet(out / "rejections" / "*.parquet")
    outcomes = dict(rejections.group_by("reason").len().iter_rows())
    outcomes["kept"] = pl.read_parquet(out / "tasks" / "*.parquet").height
    drawn = pl.read_parquet(tmp_path / f"{name}-inject" / "candidates" / "*.parquet").height
    outcomes["drawn"] = drawn
    inject_summary, validate_summary = (
        json.loads((tmp_path / f"{name}-{stage}" / "summary.json").read_text())
        for stage in ("inject", "val")
    )
    return inject_summary, validate_summary, outcomes


def test_first_inject_measures_coverage_and_keeps_tasks(tmp_path: Path):
    repo = tmp_path / "shop"
    tree = _build_shop(repo)

    # guided, first contact: nothing cached, so inject makes validate's clean run itself
    guided, guided_val, found = _first_round(tmp_path, repo, "guided", guided=True)
    assert guided["coverage_measured"] == 1, guided
    assert guided["sites_guided"] == 1
    executed, total, drawn = guided["sites_executed"], guided["sites_total"], found["drawn"]
    assert 0 < executed < total / 2, (executed, total)  # a thin suite: most sites never run
    assert guided["sites"] == f"local/shop: {executed}/{total} sites executed, {drawn} bugs drawn"
    covered = recall(ContentCache(str(tmp_path / "cache"), NAMESPACE), tree)  # for validate
    assert covered is not None, "inject left no covered lines for validate and later injects"
    assert {p for p in covered.files if p.startswith("shop/")} == {"shop/pricing.py"}
    assert drawn >= 5 and found["kept"] >= 1, found
    assert 2 * found.get("not_covered", 0) < drawn, found
    assert guided_val["injected_kept"] == f"local/shop {found['kept']} of {drawn} kept"
    # validate reused inject's environment and clean run: no build, and its only run of the
    # clean snapshot is the confirmation of FAIL_TO_PASS candidates (a selection)
    assert "images_built" not in guided_val and guided["images_built"] == 1
    runs = pl.read_parquet(tmp_path / "guided-val" / "runs" / "*.parquet")
    clean = runs.filter(pl.col("candidate_id").str.starts_with("snapshot-"))
    assert all(len(selection) > 0 for selection in clean["selection"]), clean

    # the same first inject, guidance off: most bugs land where no test runs
    blind, _, lost = _first_round(tmp_path, repo, "blind", guided=False)
    assert "coverage_measured" not in blind and "sites_guided" not in blind, blind
    assert blind["sites"] == f"local/shop: coverage unknown, {lost['drawn']} bugs drawn"
    assert 2 * lost.get("not_covered", 0) > lost["drawn"], lost
    assert lost.get("not_covered", 0) > found.get("not_covered", 0)
    print(f"first inject + validate: guided {found}; unguided {lost}")  # the report's figures
