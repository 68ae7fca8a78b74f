"""The run report: one self-contained HTML page a person reads before training on the data.

It shows where yield was lost (the funnel and the rejection reasons of every stage), what was kept
(tasks per repo, origin and language, difficulty, patch sizes) and how agents did on it (trajectory
outcomes). The page loads nothing: charts are inline SVG, styles inline, and a Content Security
Policy forbids every fetch and script, so it opens offline and data can never inject code. It
holds no timestamp, so the same stage outputs give the same bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from html import escape

from trajforge.pipelines.report import data as data
from trajforge.pipelines.report.svg_charts import (
    AMBER,
    BLUE,
    GREY,
    RED,
    TEAL,
    Bar,
    FunnelRow,
    column_chart,
    funnel_chart,
    hbar_chart,
    number,
    percent,
)
from trajforge.schemas.errors import UserError
from trajforge.schemas.label_check import CLASSES as LABEL_CLASSES
from trajforge.schemas.label_check import PHRASES as LABEL_PHRASES
from trajforge.schemas.storage import is_local, write_bytes_atomic

TOP_REPOS = 20
TOP_ORIGINS = 12
TOP_REASONS = 15
TOP_EXIT_STATUSES = 12
TOP_LABEL_ROWS = 50  # tasks whose labels differ, listed one per row
LABEL_TESTS_SHOWN = 3  # per row: the first tests we missed or did not run, with what we saw
VERDICT_COLORS = {"confirmed": TEAL, "differs": AMBER, "rejected": RED}
OUTCOME_COLORS = {"resolved": TEAL, "unresolved": RED, "not verified": GREY}

CSS = """
:root { --ink:#1f2733; --muted:#667085; --line:#e4e8ef; --bg:#f5f7fa; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans","DejaVu Sans",
  sans-serif; }
main { max-width:1180px; margin:0 auto; padding:28px 24px 48px; }
header h1 { margin:0; font-size:26px; }
header p { margin:4px 0 20px; color:var(--muted); }
h2 { font-size:18px; margin:32px 0 12px; }
h3 { font-size:14px; margin:0 0 10px; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(170px,1fr)); gap:12px; }
.card, .panel { background:var(--card); border:1px solid var(--line); border-radius:10px; }
.card { padding:14px 16px; }
.card .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:24px; font-weight:650; margin-top:2px; overflow-wrap:anywhere; }
.card .v.long { font-size:16px; padding-top:6px; }
.card .s { color:var(--muted); font-size:12px; }
.panel { padding:16px 18px; margin-bottom:14px; overflow-x:auto; }
.grid2 { display:grid; grid-template-columns:repeat(auto-fit,minmax(520px,1fr)); gap:14px; }
.grid2 .panel { margin-bottom:0; }
.grid2 + .panel { margin-top:14px; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; }
td.n, th.n { text-align:right; white-space:nowrap; }
tr.missing td { color:var(--muted); }
#release { margin-top:14px; }
table.facts th { width:200px; text-transform:none; font-size:13px; }
.path { color:var(--muted); font-size:12px; overflow-wrap:anywhere; }
.nodata { color:var(--muted); font-style:italic; margin:4px 0; }
.note { color:var(--muted); font-size:12px; margin:8px 0 0; }
svg.chart { display:block; max-width:100%; height:auto; }
svg.chart text { font-family:inherit; font-size:12px; fill:var(--ink); }
svg.chart text.value, svg.chart text.tick, svg.chart text.legend { fill:#3d4757; }
svg.chart text.strong { font-weight:600; }
svg.chart text.tick { font-size:11px; }
svg.chart text.axis-title { fill:var(--muted); }
svg.chart line.axis { stroke:#aab3c2; }
svg.chart g.bar:hover rect { opacity:.8; }
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def write_report(stage_dirs: Mapping[str, str], output_html: str, title: str) -> str:
    """Render the report for stage outputs (name -> directory, in pipeline order) atomically.

    ``output_html`` may be a new file or an earlier HTML page (a report), never a directory or
    a file of another kind: those are refused before anything is read."""
    check_report_output(output_html)
    run = data.load_run(stage_dirs)
    for path, why in run.unreadable.items():
        print(f"report: left out {path}: {why}", file=sys.stderr)
    page = render(run, title)
    write_bytes_atomic(output_html, page.encode("utf-8"))
    return output_html


def check_report_output(path: str) -> None:
    """One line for an ``--output`` the report must not overwrite."""
    if not is_local(path) or not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UserError(f"report: --output {path} is a directory; pass a file such as report.html")
    try:
        with open(path, "rb") as handle:
            head = handle.read(64).lstrip().lower()
    except OSError as exc:
        raise UserError(
            f"report: cannot read --output {path} ({exc.strerror}); pass a new file"
        ) from None
    if not head.startswith((b"<!doctype html", b"<html")):
        raise UserError(
            f"report: --output {path} exists and is not an HTML report; pass a new file (or "
            "remove it yourself)"
        )


def render(run: data.RunData, title: str) -> str:
    sections = [
        _header(run, title),
        _funnel(run),
        _rejections(run),
        _tasks(run),
        _labels(run),
        _trajectories(run),
    ]
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(sections)}</main></body></html>\n"
    )


def _header(run: data.RunData, title: str) -> str:
    ran = [s for s in run.stages if s.ran]
    tasks = run.tasks.height if run.tasks is not None else None
    cards = [
        *_cost_card(run, tasks),
        _card("Stages run", f"{len(ran)} of {len(run.stages)}", ", ".join(s.name for s in ran)),
        _card("Run time", _duration(run.seconds) if ran else "\u2013", "sum of stage times"),
        _card(
            "Tasks kept",
            number(tasks) if tasks is not None else "\u2013",
            f"from {run.tasks_stage}" if run.tasks_stage else "no tasks table",
        ),
        _trajectory_card(run),
        *_disk_card(run),
    ]
    if run.version:
        version = run.version.get("version", next(iter(run.version.values())))
        cards.append(_card("Version", version, "version.json"))
    return (
        f"<header><h1>{escape(title)}</h1><p>trajforge run report</p></header>"
        f"<section class=cards id=summary>{''.join(cards)}</section>{_release(run.version)}"
    )


def _cost_card(run: data.RunData, tasks: int | None) -> list[str]:
    """The first figure: core-seconds per kept task over every stage, split by where they went."""
    spent = run.core_seconds
    if spent is None or not tasks or spent.total <= 0:
        return []
    per_hour = tasks * 3600 / spent.total
    sub = (
        f"{per_hour:,.1f} tasks per core-hour; build {spent.build:,.0f}, test {spent.test:,.0f}, "
        f"other {spent.other:,.0f} of {spent.total:,.0f} core-s"
    )
    return [_card("Core-s per task", f"{spent.total / tasks:,.1f}", sub)]


def _disk_card(run: data.RunData) -> list[str]:
    """Disk per task: the unique image bytes of the tasks' environments over the tasks."""
    stage = next((s for s in run.stages if "image MB per task" in s.disk), None)
    if stage is None:
        return []
    figures = stage.disk
    sub = (
        f"{number(int(figures.get('environment images', 0)))} images, "
        f"{figures.get('image MB (unique layers)', 0):,.0f} MB of unique layers ({stage.name})"
    )
    if "build s per image" in figures:
        sub += f", {figures['build s per image']:,.1f} s per image built"
    return [_card("Disk per task", f"{figures['image MB per task']:,.1f} MB", sub)]


def _release(version: dict[str, str]) -> str:
    """Everything version.json says (the export writes it), as a small key/value table."""
    if not version:
        return ""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in version.items())
    return f"<section class=panel id=release><table class=facts>{rows}</table></section>"


def _trajectory_card(run: data.RunData) -> str:
    if run.trajectories is None:
        return _card("Trajectories", "\u2013", "no trajectories table")
    outcome = dict(data.outcomes(run.trajectories))
    total = run.trajectories.height
    return _card(
        "Trajectories",
        number(total),
        f"{percent(outcome.get('resolved', 0), total)} resolved, from {run.trajectories_stage}",
    )


def _funnel(run: data.RunData) -> str:
    rows = [FunnelRow(s.name, s.inputs or 0, s.kept or 0) for s in run.stages if s.inputs]
    chart = (
        funnel_chart(rows, label="Yield funnel: inputs and kept per stage")
        if rows
        else _nodata(
            "no stage had any inputs" if any(s.ran for s in run.stages) else "no stage has run yet"
        )
    )
    return (
        "<section id=funnel><h2>Yield per stage</h2>"
        f"<div class=panel>{chart}</div><div class=panel>{_stage_table(run.stages)}</div></section>"
    )


def _stage_table(stages: Sequence[data.StageInfo]) -> str:
    head = (
        "<tr><th>Stage</th><th class=n>Inputs</th><th class=n>Kept</th><th class=n>Rejected</th>"
        "<th class=n>Yield</th><th class=n>Time</th><th>Note</th><th>Output</th></tr>"
    )
    rows = []
    for s in stages:
        rejected = sum(s.rejected.values())
        cells = [
            escape(s.name),
            _num(s.inputs),
            _num(s.kept),
            number(rejected) if s.ran else "\u2013",
            percent(s.kept, s.inputs) if s.inputs and s.kept is not None else "\u2013",
            _duration(s.seconds) if s.seconds is not None else "\u2013",
            escape(s.note),
            f"<span class=path>{escape(s.path)}</span>",
        ]
        tds = "".join(f"<td{' class=n' if 0 < i < 6 else ''}>{c}</td>" for i, c in enumerate(cells))
        rows.append(f"<tr{'' if s.ran else ' class=missing'}>{tds}</tr>")
    return f"<table class=stages>{head}{''.join(rows)}</table>"


def _rejections(run: data.RunData) -> str:
    panels = []
    for s in run.stages:
        if not s.rejected:
            continue
        total = sum(s.rejected.values())
        chart = _top_bars(
            list(s.rejected.items()),
            TOP_REASONS,
            AMBER,
            f"Rejection reasons in {s.name}",
            ("reasons", "rejections"),
            share_of=total,
        )
        panels.append(
            f"<div class=panel><h3>{escape(s.name)}: {number(total)} rejected</h3>{chart}</div>"
        )
    clean = [s.name for s in run.stages if s.ran and not s.rejected]
    note = f"<p class=note>Nothing rejected in: {escape(', '.join(clean))}.</p>" if clean else ""
    body = (
        f"<div class=grid2>{''.join(panels)}</div>" if panels else _nodata("no rejections recorded")
    )
    return f"<section id=rejections><h2>Rejection reasons</h2>{body}{note}</section>"


def _tasks(run: data.RunData) -> str:
    frame = run.tasks
    if frame is None or frame.height == 0:
        why = (
            "no stage wrote a tasks table"
            if frame is None
            else f"the tasks table of {run.tasks_stage} is empty"
        )
        return f"<section id=tasks><h2>Kept tasks</h2>{_nodata(why)}</section>"
    difficulty, unscored = data.difficulty_bins(frame)
    panels = [
        _panel(
            "Tasks per repo",
            _top_bars(
                data.counts(frame, "repo"), TOP_REPOS, BLUE, "Tasks per repo", ("repos", "tasks")
            ),
        ),
        _panel(
            "Tasks per origin",
            _top_bars(
                data.counts(frame, "origin"),
                TOP_ORIGINS,
                TEAL,
                "Tasks per origin",
                ("origins", "tasks"),
            ),
        ),
        _panel(
            "Tasks per language",
            _top_bars(
                data.languages(frame),
                TOP_ORIGINS,
                BLUE,
                "Tasks per language",
                ("languages", "tasks"),
            ),
        ),
        _panel(
            "Difficulty",
            _columns(difficulty, "difficulty score", BLUE),
            f"{number(unscored)} task(s) without a difficulty score." if unscored else "",
        ),
        _panel(
            "Patch size",
            _columns(data.patch_size_bins(frame), "changed lines in the gold patch", TEAL),
        ),
    ]
    return (
        "<section id=tasks><h2>Kept tasks</h2>"
        f"<p class=note>{number(frame.height)} tasks from the {escape(run.tasks_stage)} stage.</p>"
        f"<div class=grid2>{''.join(panels)}</div></section>"
    )


def _labels(run: data.RunData) -> str:
    """The label check of imported rows: verdicts, tests per class, and the tasks that differ.
    Absent when no row was imported (most runs)."""
    frame = run.labels
    if frame is None or frame.height == 0:
        return ""
    total, tally = frame.height, data.label_verdicts(frame)
    verdicts = [
        Bar(verdict, n, VERDICT_COLORS[verdict], f"  ({percent(n, total)})") for verdict, n in tally
    ]
    confirmed = dict(tally).get("confirmed", 0)
    return (
        "<section id=labels><h2>Dataset labels</h2>"
        f"<p class=note>{number(confirmed)} of {number(total)} imported tasks confirmed: their "
        f"FAIL_TO_PASS and PASS_TO_PASS against ours, from the {escape(run.labels_stage)} stage."
        "</p><div class=grid2>"
        + _panel("Verdicts", hbar_chart(verdicts, label="Label check verdicts"))
        + _panel("Tests by class", _label_class_table(data.label_class_counts(frame)))
        + "</div>"
        + _panel("Tasks whose labels differ", _label_rows(data.label_differences(frame)))
        + "</section>"
    )


def _label_class_table(classes: dict[str, dict[str, int]]) -> str:
    labels = list(classes)
    head = "".join(f"<th class=n>{escape(x)}</th>" for x in labels)
    rows = []
    for name in LABEL_CLASSES:
        cells = "".join(f"<td class=n>{number(classes[x][name])}</td>" for x in labels)
        rows.append(f"<tr><td>{escape(LABEL_PHRASES[name])}</td>{cells}</tr>")
    return f"<table class=stages><tr><th>Class</th>{head}</tr>{''.join(rows)}</table>"


def _label_rows(frame) -> str:
    if frame.height == 0:
        return "<p class=note>Every imported task's labels agree with ours.</p>"
    head = "<tr><th>Instance</th><th>Dataset</th><th>Verdict</th><th>Detail</th></tr>"
    rows = []
    for row in frame.head(TOP_LABEL_ROWS).iter_rows(named=True):
        rows.append(
            f"<tr><td>{escape(str(row.get('instance_id') or row.get('candidate_id') or ''))}</td>"
            f"<td>{escape(str(row.get('dataset') or ''))}</td>"
            f"<td>{escape(str(row.get('verdict') or ''))}</td>"
            f"<td>{escape(str(row.get('detail') or ''))}{_label_examples(row)}</td></tr>"
        )
    more = frame.height - TOP_LABEL_ROWS
    note = f"<p class=note>+ {number(more)} more task(s).</p>" if more > 0 else ""
    return f"<table class=stages>{head}{''.join(rows)}</table>{note}"


def _label_examples(row: dict) -> str:
    """The first tests of a row we missed or could not run, each with what we saw here."""
    lines = []
    for label in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        classes = row.get(label) or {}
        why = _as_map(classes.get("why"))
        for name in ("we_missed", "not_run_here", "flaky_here"):
            for test in classes.get(name) or []:
                seen = why.get(test) or LABEL_PHRASES[name]
                lines.append(f"{label} {test}: {seen}")
    shown = lines[:LABEL_TESTS_SHOWN]
    if not shown:
        return ""
    extra = f" (+ {len(lines) - len(shown)} more)" if len(lines) > len(shown) else ""
    items = "".join(f"<br><span class=path>{escape(line)}</span>" for line in shown)
    return items + (f"<span class=path>{escape(extra)}</span>" if extra else "")


def _as_map(value: object) -> dict[str, str]:
    """An Arrow map as polars gives it: a dict, or a list of key/value structs."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, list):
        return {str(p["key"]): str(p["value"]) for p in value if isinstance(p, dict) and "key" in p}
    return {}


def _trajectories(run: data.RunData) -> str:
    frame = run.trajectories
    if frame is None or frame.height == 0:
        why = (
            "no stage wrote a trajectories table"
            if frame is None
            else f"the trajectories table of {run.trajectories_stage} is empty"
        )
        return f"<section id=trajectories><h2>Trajectories</h2>{_nodata(why)}</section>"
    total = frame.height
    outcome_bars = [
        Bar(label, n, OUTCOME_COLORS[label], f"  ({percent(n, total)})")
        for label, n in data.outcomes(frame)
    ]
    status = _top_bars(
        data.counts(frame, "exit_status"),
        TOP_EXIT_STATUSES,
        BLUE,
        "Trajectories per exit status",
        ("exit statuses", "trajectories"),
        share_of=total,
    )
    soft, unscored = data.soft_reward_bins(frame)
    near = data.near_misses(frame)
    soft_note = " ".join(
        part
        for part in (
            f"{number(unscored)} unresolved run(s) without a soft reward." if unscored else "",
            f"{number(near)} unresolved run(s) kept for SFT as near misses." if near else "",
        )
        if part
    )
    return (
        "<section id=trajectories><h2>Trajectories</h2>"
        f"<p class=note>{number(total)} trajectories from the "
        f"{escape(run.trajectories_stage)} stage.</p><div class=grid2>"
        + _panel("Outcomes", hbar_chart(outcome_bars, label="Trajectory outcomes"))
        + _panel("Exit status", status)
        + _panel("Solve rate with and without guidance", _guidance_table(frame))
        + _panel(
            "Soft reward of unresolved runs",
            _columns(soft, "share of the gold patch's lines touched", AMBER),
            soft_note,
        )
        + "</div></section>"
    )


def _guidance_table(frame) -> str:
    """Runs, resolved and solve rate of unguided and guided runs (guided retries)."""
    figures = data.guidance_figures(frame)
    head = (
        "<tr><th>Prompt</th><th class=n>Runs</th><th class=n>Resolved</th>"
        "<th class=n>Solve rate</th></tr>"
    )
    rows = []
    for label in ("unguided", "guided"):
        runs = int(str(figures.get(f"{label} runs", 0)))
        solved = int(str(figures.get(f"{label} resolved", 0)))
        rate = percent(solved, runs) if runs else "\u2013"
        rows.append(
            f"<tr><td>{label}</td><td class=n>{number(runs)}</td>"
            f"<td class=n>{number(solved)}</td><td class=n>{rate}</td></tr>"
        )
    only = figures.get("tasks solved only with guidance")
    if only is not None:
        note = f"{number(int(str(only)))} task(s) solved only with guidance."
    else:
        note = "No guided retries in these runs (rollout.guided_attempts)."
    return f"<table class=stages>{head}{''.join(rows)}</table><p class=note>{escape(note)}</p>"


def _top_bars(
    pairs: list[tuple[str, int]],
    limit: int,
    color: str,
    label: str,
    nouns: tuple[str, str],
    share_of: int = 0,
) -> str:
    """The largest ``limit`` bars; the rest is one line under the chart, not a bar that would
    dwarf the others. ``nouns``: what the values and the counted rows are ("repos", "tasks")."""
    if not pairs:
        return _nodata("the column is missing")
    shown, more, rows = data.top(pairs, limit)
    bars = [Bar(k, n, color, f"  ({percent(n, share_of)})" if share_of else "") for k, n in shown]
    chart = hbar_chart(bars, label=label)
    if more:
        values, counted = nouns
        chart += f"<p class=note>+ {number(more)} more {values} ({number(rows)} {counted}).</p>"
    return chart


def _columns(pairs: list[tuple[str, int]], x_title: str, color: str) -> str:
    if not pairs:
        return _nodata(f"no {x_title}")
    return column_chart([Bar(k, n, color) for k, n in pairs], label=x_title, x_title=x_title)


def _panel(title: str, body: str, note: str = "") -> str:
    extra = f"<p class=note>{escape(note)}</p>" if note else ""
    return f"<div class=panel><h3>{escape(title)}</h3>{body}{extra}</div>"


def _card(key: str, value: str, sub: str) -> str:
    size = " long" if len(value) > 10 else ""
    return (
        f"<div class=card><div class=k>{escape(key)}</div>"
        f"<div class='v{size}'>{escape(value)}</div>"
        f"<div class=s>{escape(sub)}</div></div>"
    )


def _nodata(why: str) -> str:
    return f"<p class=nodata>No data: {escape(why)}.</p>"


def _num(value: int | None) -> str:
    return number(value) if value is not None else "\u2013"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"
