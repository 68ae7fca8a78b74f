"""The run report: real stage outputs in, one offline HTML page out, checked in a real browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image  # Pillow comes with apache-beam
from trajforge.pipelines.report.html import write_report
from trajforge.pipelines.report.svg_charts import TEAL
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message, Trajectory

pytestmark = pytest.mark.browser

EVIL = "<script>alert(1)</script>"
EVIL_REASON = '"><img src=x onerror=alert(2)>'


def _patch(lines: int) -> str:
    body = "".join(f"-old {i}\n+new {i}\n" for i in range(lines // 2))
    return f"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n{body}"


def _task(i: int, repo: str, origin: str, difficulty: float | None, lines: int) -> TaskInstance:
    return TaskInstance(
        f"{repo.replace('/', '__')}-{i}", repo, "abc", _patch(lines), "", "", "", "2024-01-01",
        ("t::a",), (), "abc", "img", "pytest", origin, "p1", f"c{i}", "/src", (), difficulty,
    )  # fmt: skip


def _trajectory(i: int, resolved: bool | None, exit_status: str) -> Trajectory:
    return Trajectory(
        f"t{i}", f"task-{i}", "m", (Message("user", "fix it"),), "[]", "", exit_status, resolved,
        None,
    )  # fmt: skip


def _stage(
    root: Path, name: str, summary: dict | None, tables: dict[str, tuple[list, object]]
) -> str:
    out = root / name
    out.mkdir(parents=True)
    for table, (records, schema) in tables.items():
        write_records(str(out / table / "part-00000-of-00001.parquet"), records, schema)
    if summary is not None:
        (out / "summary.json").write_text(json.dumps({"stage": name, **summary}))
    return str(out)


def build_run(root: Path, repo: str = "acme/widgets", reason: str = "no_test_change") -> dict:
    """A run of five stages, one of them missing; the export has no summary, only tables."""
    rejections = [Rejection(f"c{i}", "mine", reason, "d") for i in range(3)]
    tasks = [
        _task(i, repo if i % 3 else "pypi/toolz", ("commit", "release", "bug/swap_args")[i % 3],
              None if i == 0 else (i % 10) / 10 + 0.05, 2 + 7 * i)
        for i in range(24)
    ]  # fmt: skip
    trajectories = [
        _trajectory(i, (True, False, None)[i % 3], ("submitted", "step_limit")[i % 2])
        for i in range(9)
    ]
    stages = {
        "mine": _stage(
            root,
            "mine",
            {
                "inputs": 120,
                "kept": 48,
                "rejected": {reason: 50, "too_large": 22},
                "seconds": 3.4,
                "core_s": "10 (3 s x 3 cores): build 0, test 0, other 10",
            },
            {"rejections": (rejections, Rejection.ARROW_SCHEMA)},
        ),
        "validate": _stage(
            root,
            "validate",
            {
                "inputs": 48,
                "kept": 24,
                "rejected": {"no_fail_to_pass": 24},
                "seconds": 95.0,
                "core_s": "190 (95 s x 2 cores): build 60, test 100, other 30",
                "environment images": 3,
                "image MB (unique layers)": 520.4,
                "image MB per task": 21.7,
            },
            {"tasks": (tasks, TaskInstance.ARROW_SCHEMA)},
        ),
        "describe": str(root / "never-ran"),
        "rollout": _stage(
            root,
            "rollout",
            {"inputs": 24, "kept": 9, "rejected": {}, "seconds": 12.0},
            {"trajectories": (trajectories, Trajectory.ARROW_SCHEMA)},
        ),
        "export": _stage(root, "export", None, {}),
    }
    export = Path(stages["export"])
    write_records(
        str(export / "tasks" / "train" / "part-0.parquet"), tasks[:20], TaskInstance.ARROW_SCHEMA
    )
    (export / "version.json").write_text(json.dumps({"version": "2026.11.22-ab12cd", "tasks": 20}))
    (export / "README.md").write_text("---\nlicense: apache-2.0\n---\n# card\n")
    return stages


def chromium(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Debian's chromium, headless; the test fails (not skips) when setup has not installed it."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is not installed; run `make setup` (apt-get install -y chromium)")
    profile = tmp_path / "chromium-profile"
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_report_renders_in_a_real_browser(tmp_path):
    stages = build_run(tmp_path / "data")
    html_path = tmp_path / "report.html"
    assert write_report(stages, str(html_path), "Run <42>") == str(html_path)
    page = html_path.read_text()

    # Self-contained: nothing is fetched, no script runs.
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<script""", page, re.IGNORECASE)
    assert "Run &lt;42&gt;" in page

    shot = tmp_path / "report.png"
    size = "--window-size=1280,2000"
    chromium(f"--screenshot={shot}", size, html_path.as_uri(), tmp_path=tmp_path)
    assert shot.stat().st_size > 20_000
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000)
    colors = image.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50, "the screenshot is nearly a single colour"
    teal = tuple(int(TEAL[i : i + 2], 16) for i in (1, 3, 5))
    assert sum(n for n, c in colors if c == teal) > 500, "the funnel's kept bars did not render"

    dom = chromium("--dump-dom", html_path.as_uri(), tmp_path=tmp_path).stdout
    assert dom.count("<svg") >= 8  # funnel, 2 rejection charts, 4 task charts, 2 trajectory charts
    for text in (
        "48 of 120 kept (40.0%)",  # mine, from its summary.json
        "24 of 48 kept (50.0%)",  # validate
        "20 of 20 kept (100.0%)",  # export: no summary, counted from its tables
        "no_test_change",
        "2026.11.22-ab12cd",
        "1 task(s) without a difficulty score.",
        "1m 50s",  # run time: 3.4 + 95 + 12 seconds
        "21.7 MB",  # disk per task, from validate's summary
        "3 images, 520 MB of unique layers (validate)",
    ):
        assert text in dom, text
    # the first figure: what a task cost, over every stage that says (mine 10 + validate 190)
    cost = "360.0 tasks per core-hour; build 60, test 100, other 40 of 200 core-s"
    assert re.search(r"Core-s per task.*?10\.0.*?" + re.escape(cost), dom, re.DOTALL)
    assert dom.index("Core-s per task") < dom.index("Stages run")
    assert re.search(r">acme/widgets</text>.*?>13</text>", dom, re.DOTALL)  # export's 20 tasks
    assert re.search(r">resolved</text>.*?>3  \(33\.3%\)</text>", dom, re.DOTALL)
    assert "not run" in dom  # describe has no output


def test_missing_stages_and_empty_tables_say_no_data(tmp_path):
    empty = _stage(
        tmp_path,
        "validate",
        {"inputs": 0, "kept": 0, "rejected": {}, "seconds": 0.1},
        {
            "tasks": ([], TaskInstance.ARROW_SCHEMA),
            "trajectories": ([], Trajectory.ARROW_SCHEMA),
            "rejections": ([], Rejection.ARROW_SCHEMA),
        },
    )
    stages = {"mine": str(tmp_path / "absent"), "validate": empty, "curate": str(tmp_path / "x")}
    page = Path(write_report(stages, str(tmp_path / "r.html"), "empty")).read_text()
    assert "No data: no stage had any inputs." in page
    assert "No data: no rejections recorded." in page
    assert "No data: the tasks table of validate is empty." in page
    assert "No data: the trajectories table of validate is empty." in page
    assert page.count("not run") == 2

    nothing = Path(write_report({}, str(tmp_path / "none.html"), "nothing")).read_text()
    assert "No data: no stage has run yet." in nothing
    assert "No data: no stage wrote a tasks table." in nothing
    assert "No data: no stage wrote a trajectories table." in nothing


def test_summary_less_stage_is_counted_from_its_tables(tmp_path):
    stage = _stage(
        tmp_path,
        "mine",
        None,
        {"rejections": ([Rejection("c", "mine", "too_large", "d")], Rejection.ARROW_SCHEMA)},
    )
    page = Path(write_report({"mine": stage}, str(tmp_path / "r.html"), "t")).read_text()
    assert "0 of 1 kept (0.0%)" in page
    assert "no summary.json: counted from tables" in page


def test_data_cannot_inject_markup(tmp_path):
    stages = build_run(tmp_path / "data", repo=EVIL, reason=EVIL_REASON)
    html_path = tmp_path / "report.html"
    write_report(stages, str(html_path), EVIL)
    page = html_path.read_text()
    assert EVIL not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page

    dom = chromium("--dump-dom", html_path.as_uri(), tmp_path=tmp_path).stdout
    assert "<script" not in dom and "<img" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text, in a bar label


def test_same_outputs_give_the_same_bytes(tmp_path):
    stages = build_run(tmp_path / "data")
    first = Path(write_report(stages, str(tmp_path / "a.html"), "t")).read_bytes()
    second = Path(write_report(stages, str(tmp_path / "b.html"), "t")).read_bytes()
    assert first == second
