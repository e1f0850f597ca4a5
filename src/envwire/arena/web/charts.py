"""Inline SVG charts for the arena's pages: drawn on the server, no script, no CDN.

Pure functions from numbers to SVG text (every label escaped), in the dashboard's style: a
white plot, one colour per series, ticks with labels on both axes and light grid lines at the
value ticks. Values are drawn inside a margin of :data:`PAD` pixels, so a line at the end of
the range (a rating of 1.0, a return of 0) never lies on the plot's border.
"""

from __future__ import annotations

import html
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

__all__ = ["COLORS", "PAD", "bar_chart", "line_chart", "nice_ticks", "time_ticks", "timeline"]

#: Series colours, in order (the dashboard's).
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
#: Pixels between the plotted values' range and the plot's border.
PAD = 8

_AXIS, _GRID, _LABEL = "#999", "#eee", "#666"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.3g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values (steps of 1, 2 or 5 times a power of ten) from at or below
    ``low`` to at or above ``high``."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high < low:
        low, high = high, low
    if high == low:
        low, high = low - 1, high + 1
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    value = first
    while value < high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800, 1209600, 2592000)  # fmt: skip


def time_ticks(low: float, high: float, count: int = 6) -> tuple[list[float], str]:
    """Round times (Unix seconds) from at or below ``low`` to at or above ``high``, and the
    ``strftime`` format that labels them (UTC)."""
    span = max(high - low, 1.0)
    step = next((s for s in _TIME_STEPS if span / s <= count), _TIME_STEPS[-1])
    first = math.floor(low / step) * step
    ticks = [float(first + i * step) for i in range(math.ceil((high - first) / step) + 1)]
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%m-%d"
    if len(ticks) == 1:
        ticks.append(ticks[0] + step)
    return ticks, fmt


def _clock(fmt: str) -> Callable[[float], str]:
    return lambda t: time.strftime(fmt, time.gmtime(t))


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    css_id: str,
    title: str,
    x_label: str,
    y_label: str = "rating",
    x_axis: Literal["number", "time"] = "number",
    width: int = 640,
    height: int = 240,
) -> str:
    """A line chart of named series of (x, y) points, with ticks and a label on both axes and a
    legend. ``x_axis="time"``: x values are Unix times, labelled as UTC clock times or dates."""
    points = [p for _, pts in series for p in pts]
    if not points:
        return f'<p class="muted" id="{_e(css_id)}">No finished runs yet.</p>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    y_ticks = nice_ticks(min(ys), max(ys))
    x_label_of: Callable[[float], str]
    if x_axis == "time":
        x_ticks, fmt = time_ticks(min(xs), max(xs))
        x_label_of = _clock(fmt)
    else:
        x_ticks = nice_ticks(min(xs), max(xs), 6)
        x_label_of = _num
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    left, right, top, bottom = 66, width - 28, 10, height - 42

    def px(x: float) -> float:
        return left + PAD + (x - x0) / (x1 - x0) * (right - left - 2 * PAD)

    def py(y: float) -> float:
        return bottom - PAD - (y - y0) / (y1 - y0) * (bottom - top - 2 * PAD)

    parts = [
        f'<svg id="{_e(css_id)}" class="chart" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
    ]
    for y in y_ticks:
        parts.append(
            f'<line class="grid" x1="{left}" y1="{py(y):.1f}" x2="{right}" y2="{py(y):.1f}" '
            f'stroke="{_GRID}"/><text class="tick" x="{left - 5}" y="{py(y) + 4:.1f}" '
            f'font-size="11" fill="{_LABEL}" text-anchor="end">{_e(_num(y))}</text>'
        )
    for x in x_ticks:
        parts.append(
            f'<line x1="{px(x):.1f}" y1="{bottom}" x2="{px(x):.1f}" y2="{bottom + 4}" '
            f'stroke="{_AXIS}"/><text class="tick" x="{px(x):.1f}" y="{bottom + 16}" '
            f'font-size="11" fill="{_LABEL}" text-anchor="middle">{_e(x_label_of(x))}</text>'
        )
    parts.append(
        f'<path class="axis" fill="none" stroke="{_AXIS}" '
        f'd="M{left},{top}V{bottom}H{right}"/>'
        f'<text x="{(left + right) / 2:.0f}" y="{height - 6}" font-size="11" fill="{_LABEL}" '
        f'text-anchor="middle">{_e(x_label)}</text>'
        f'<text class="y-label" x="12" y="{(top + bottom) / 2:.0f}" font-size="11" '
        f'fill="{_LABEL}" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top + bottom) / 2:.0f})">{_e(y_label)}</text>'
    )
    legend = []
    for i, (name, pts) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        if len({round(px(x), 1) for x, _ in pts}) == 1:  # one point, or runs that finished
            x, y = pts[-1]  # in one request (one time): a dot at the last rating
            parts.append(f'<circle class="series" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" '
                         f'fill="{color}"><title>{_e(name)}</title></circle>')  # fmt: skip
        else:
            parts.append(f'<polyline class="series" fill="none" stroke="{color}" '
                         f'stroke-width="2" points="{coords}"><title>{_e(name)}</title>'
                         "</polyline>")  # fmt: skip
        legend.append(f'<span style="color:{color}">&#9632; {_e(name)}</span>')
    parts.append("</svg>")
    return "".join(parts) + f'<div class="legend muted">{" &nbsp; ".join(legend)}</div>'


def bar_chart(
    values: Sequence[float], *, css_id: str, title: str, width: int = 640, height: int = 180
) -> str:
    """The distribution of ``values``: a bar per distinct value when there are few, else ten
    equal bins; each bar labelled with its count."""
    if not values:
        return f'<p class="muted" id="{_e(css_id)}">No finished runs yet.</p>'
    distinct = sorted(set(values))
    if len(distinct) <= 12:
        counts = Counter(values)
        bars = [(_num(v), counts[v]) for v in distinct]
    else:
        low, high = distinct[0], distinct[-1]
        step = (high - low) / 10
        bins = [0] * 10
        for v in values:
            bins[min(int((v - low) / step), 9)] += 1
        bars = [(f"{_num(low + i * step)}..", n) for i, n in enumerate(bins)]
    most = max(n for _, n in bars)
    left, bottom, top = 10, height - 34, 16
    slot = min((width - 2 * left) / len(bars), 80.0)
    parts = [
        f'<svg id="{_e(css_id)}" class="chart" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>'
    ]
    for i, (label, n) in enumerate(bars):
        h = (bottom - top) * n / most
        x = left + i * slot
        parts.append(
            f'<rect class="bar" x="{x + 2:.1f}" y="{bottom - h:.1f}" width="{slot - 4:.1f}" '
            f'height="{h:.1f}" fill="{COLORS[0]}"><title>{_e(label)}: {n}</title></rect>'
            f'<text x="{x + slot / 2:.1f}" y="{bottom - h - 3:.1f}" font-size="11" '
            f'text-anchor="middle">{n}</text>'
            f'<text class="tick" x="{x + slot / 2:.1f}" y="{bottom + 14}" font-size="11" '
            f'fill="{_LABEL}" text-anchor="middle">{_e(label)}</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{bottom}" x2="{left + len(bars) * slot:.1f}" y2="{bottom}" '
        f'stroke="{_AXIS}"/>'
        f'<text x="{left}" y="{height - 4}" font-size="11" fill="{_LABEL}">outcome '
        "(bars: how many runs had it)</text>"
    )
    return "".join(parts) + "</svg>"


def timeline(
    rewards: Sequence[float], said: Sequence[Sequence[str]], *, css_id: str, width: int = 900
) -> str:
    """A run action by action: each action's reward as a bar under its action number, the
    return after each action as a line through the bars' centres (from 0 at the left edge),
    and a dot under an action the arena said something about (``said[i]``: the message types
    at action i; one more entry than ``rewards`` for the action the run waits for)."""
    height, left, right, top, bottom = 190, 52, width - 12, 10, 142
    totals, total = [], 0.0
    for r in rewards:
        total += r
        totals.append(total)
    ticks = nice_ticks(min([*totals, *rewards, 0.0]), max([*totals, *rewards, 0.0]), 4)
    lo, hi = ticks[0], ticks[-1]
    places = max(len(said), len(rewards) + 1)
    slot = (right - left) / places

    def px(i: int) -> float:  # the centre of action i's place
        return left + (i + 0.5) * slot

    def py(y: float) -> float:
        return bottom - PAD - (y - lo) / (hi - lo) * (bottom - top - 2 * PAD)

    parts = [
        f'<svg id="{_e(css_id)}" class="chart" width="{width}" height="{height}" role="img" '
        'aria-label="the run action by action">'
        "<title>the run action by action</title>",
    ]
    for y in ticks:
        parts.append(
            f'<line class="grid" x1="{left}" y1="{py(y):.1f}" x2="{right}" y2="{py(y):.1f}" '
            f'stroke="{_AXIS if y == 0 else _GRID}"/><text class="tick" x="{left - 5}" '
            f'y="{py(y) + 4:.1f}" font-size="11" fill="{_LABEL}" text-anchor="end">'
            f"{_e(_num(y))}</text>"
        )
    every = max(1, math.ceil(places / 20))
    for i in range(0, places, every):
        parts.append(
            f'<text class="tick" x="{px(i):.1f}" y="{bottom + 30}" font-size="11" '
            f'fill="{_LABEL}" text-anchor="middle">{i}</text>'
        )
    for i, r in enumerate(rewards):
        y, base = py(r), py(0)
        parts.append(
            f'<rect class="step" x="{px(i) - slot * 0.35:.1f}" y="{min(y, base):.1f}" '
            f'width="{slot * 0.7:.1f}" height="{max(abs(base - y), 1.0):.1f}" fill="#9ecae1">'
            f"<title>action {i}: reward {_num(r)}</title></rect>"
        )
    coords = [f"{left:.1f},{py(0):.1f}"] + [
        f"{px(i):.1f},{py(t):.1f}" for i, t in enumerate(totals)
    ]
    if not totals:  # no action accepted yet: a flat line over the waiting action
        coords.append(f"{px(0):.1f},{py(0):.1f}")
    parts.append(f'<polyline class="series" fill="none" stroke="{COLORS[1]}" stroke-width="2" '
                 f'points="{" ".join(coords)}"><title>return after each action</title>'
                 "</polyline>")  # fmt: skip
    for i, kinds in enumerate(said):
        if kinds:
            color = "#a00" if "error" in kinds else "#a60" if "warning" in kinds else "#555"
            parts.append(
                f'<circle class="message" cx="{px(i):.1f}" cy="{bottom + 10}" r="4" '
                f'fill="{color}"><title>action {i}: {_e(", ".join(kinds))}</title></circle>'
            )
    note = "action number (bars: its reward; line: the return after it; dots: messages)"
    parts.append(
        f'<text x="{(left + right) / 2:.0f}" y="{height - 6}" font-size="11" fill="{_LABEL}" '
        f'text-anchor="middle">{note}</text>'
    )
    return "".join(parts) + "</svg>"
