"""Inline SVG charts for the run report: no scripts, fonts or images, so the page opens offline.

Each function takes data that is already aggregated and returns one ``<svg>`` element as text.
Every label passes through ``html.escape``: repo names and rejection reasons come from the data.
Long labels are shortened on screen and kept whole in a ``<title>`` tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

CHAR_PX = 7.0  # average width of a 12px sans-serif glyph, to size label columns
ROW_PX = 26
BAR_PX = 18
MAX_LABEL_CHARS = 34

BLUE = "#3b6fd4"
TEAL = "#1f9e89"
AMBER = "#e0a030"
RED = "#d0504a"
GREY = "#c9d1de"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: str = BLUE
    note: str = ""  # printed after the value, e.g. a share


@dataclass(frozen=True)
class FunnelRow:
    stage: str
    inputs: int
    kept: int


def number(value: float) -> str:
    """Counts with thousands separators; other values with at most two decimals."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"


def percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def _short(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    """Cut the middle, not the end: long repo names share a prefix and differ at the end."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return label[:head] + "\u2026" + label[len(label) - (limit - 1 - head) :]


def _text(x: float, y: float, body: str, cls: str, anchor: str = "start") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}">{escape(body)}</text>'
    )


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>{"".join(body)}</svg>'
    )


def _label_width(labels: Sequence[str]) -> float:
    longest = max((len(_short(label)) for label in labels), default=4)
    return min(max(longest * CHAR_PX + 12, 60), MAX_LABEL_CHARS * CHAR_PX + 12)


def hbar_chart(bars: Sequence[Bar], *, label: str, width: int = 560) -> str:
    """Horizontal bars, one row per label, the value printed at the end of each bar."""
    label_w = _label_width([b.label for b in bars])
    value_w = max((len(number(b.value) + b.note) for b in bars), default=1) * CHAR_PX + 14
    plot_w = max(width - label_w - value_w, 40)
    top = max((b.value for b in bars), default=0) or 1
    height = len(bars) * ROW_PX + 8
    body: list[str] = []
    for i, bar in enumerate(bars):
        y = 4 + i * ROW_PX
        bar_w = max(plot_w * bar.value / top, 2 if bar.value else 0)
        text_y = y + BAR_PX / 2 + 4
        body.append(
            f'<g class="bar"><title>{escape(bar.label)}: {escape(number(bar.value))}</title>'
            + _text(label_w - 8, text_y, _short(bar.label), "label", "end")
            + f'<rect x="{label_w:.1f}" y="{y}" width="{bar_w:.1f}" height="{BAR_PX}" '
            f'rx="3" fill="{bar.color}"/>'
            + _text(label_w + bar_w + 6, text_y, number(bar.value) + bar.note, "value")
            + "</g>"
        )
    return _svg(width, height, label, body)


def funnel_chart(rows: Sequence[FunnelRow], *, label: str, width: int = 1100) -> str:
    """Per stage: its inputs as a pale bar and what it kept as a solid one on top, with yield."""
    label_w = _label_width([r.stage for r in rows])
    value_w = 250.0
    plot_w = width - label_w - value_w
    top = max((max(r.inputs, r.kept) for r in rows), default=0) or 1
    row_h = 34
    body: list[str] = []
    legend_y = 14
    for x, color, name in ((label_w, GREY, "inputs"), (label_w + 80, TEAL, "kept")):
        body.append(
            f'<rect x="{x:.1f}" y="{legend_y - 10}" width="12" height="12" fill="{color}"/>'
        )
        body.append(_text(x + 18, legend_y, name, "legend"))
    for i, row in enumerate(rows):
        y = 28 + i * row_h
        in_w = max(plot_w * row.inputs / top, 2 if row.inputs else 0)
        kept_w = max(plot_w * row.kept / top, 2 if row.kept else 0)
        text_y = y + 22 / 2 + 4
        summary = (
            f"{number(row.kept)} of {number(row.inputs)} kept ({percent(row.kept, row.inputs)})"
        )
        body.append(
            f'<g class="bar"><title>{escape(row.stage)}: {escape(summary)}</title>'
            + _text(label_w - 8, text_y, _short(row.stage), "label strong", "end")
            + f'<rect x="{label_w:.1f}" y="{y}" width="{in_w:.1f}" height="22" rx="3" '
            f'fill="{GREY}"/>'
            + f'<rect x="{label_w:.1f}" y="{y + 4}" width="{kept_w:.1f}" height="14" rx="2" '
            f'fill="{TEAL}"/>'
            + _text(label_w + max(in_w, kept_w) + 8, text_y, summary, "value")
            + "</g>"
        )
    return _svg(width, 28 + len(rows) * row_h + 4, label, body)


def column_chart(
    bars: Sequence[Bar], *, label: str, x_title: str, width: int = 560, height: int = 240
) -> str:
    """Vertical columns for a histogram: bin labels under the axis, counts above each column."""
    left, right, top_pad, bottom = 12, 12, 22, 48
    plot_w = width - left - right
    plot_h = height - top_pad - bottom
    top = max((b.value for b in bars), default=0) or 1
    slot = plot_w / max(len(bars), 1)
    col_w = max(slot * 0.72, 2)
    base_y = top_pad + plot_h
    body = [
        f'<line x1="{left}" y1="{base_y}" x2="{width - right}" y2="{base_y}" class="axis"/>',
        _text(width / 2, height - 6, x_title, "axis-title", "middle"),
    ]
    label_chars = max(int(slot / CHAR_PX * 1.15), 3)
    for i, bar in enumerate(bars):
        x = left + i * slot + (slot - col_w) / 2
        h = max(plot_h * bar.value / top, 1 if bar.value else 0)
        center = x + col_w / 2
        body.append(
            f'<g class="bar"><title>{escape(bar.label)}: {escape(number(bar.value))}</title>'
            f'<rect x="{x:.1f}" y="{base_y - h:.1f}" width="{col_w:.1f}" height="{h:.1f}" '
            f'rx="2" fill="{bar.color}"/>'
            + _text(center, base_y - h - 5, number(bar.value), "value", "middle")
            + _text(center, base_y + 16, _short(bar.label, label_chars), "tick", "middle")
            + "</g>"
        )
    return _svg(width, height, label, body)
