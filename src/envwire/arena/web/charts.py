"""Inline SVG charts for the arena's pages: drawn on the server, no script, no CDN.

Pure functions from numbers to SVG text (every label escaped), in the dashboard's style: a
white plot with a grey frame, one colour per series, the range written at the axis ends.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

__all__ = ["COLORS", "bar_chart", "line_chart", "rating_history", "timeline"]

#: Series colours, in order (the dashboard's).
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.3g}"


def rating_history(
    outcomes: Sequence[tuple[str, float, float]], rating_runs: int, initial: float = 0.0
) -> dict[str, list[tuple[float, float]]]:
    """Each agent's rating after each of its finished runs, as (end time, rating): the average
    outcome of its last ``rating_runs`` runs, as the arena rates (``outcomes``: (agent, end
    time, value), oldest first)."""
    window: dict[str, list[float]] = {}
    history: dict[str, list[tuple[float, float]]] = {}
    for agent, ended, value in outcomes:
        recent = window.setdefault(agent, [])
        recent.append(value)
        del recent[:-rating_runs]
        rating = sum(recent) / len(recent) if recent else initial
        history.setdefault(agent, []).append((ended, rating))
    return history


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    css_id: str,
    title: str,
    x_label: str,
    width: int = 640,
    height: int = 220,
) -> str:
    """A line chart of named series of (x, y) points, with a legend."""
    points = [p for _, pts in series for p in pts]
    if not points:
        return f'<p class="muted" id="{_e(css_id)}">No finished runs yet.</p>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    left, right, top, bottom = 48, width - 10, 10, height - 24

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (right - left)

    def py(y: float) -> float:
        return bottom - (y - y0) / (y1 - y0) * (bottom - top)

    parts = [
        f'<svg id="{_e(css_id)}" class="chart" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
        'fill="#fff" stroke="#ccc"/>',
        f'<text x="4" y="{top + 10}" font-size="11" fill="#666">{_num(y1)}</text>',
        f'<text x="4" y="{bottom}" font-size="11" fill="#666">{_num(y0)}</text>',
        f'<text x="{left}" y="{height - 6}" font-size="11" fill="#666">{_e(x_label)}</text>',
    ]
    legend = []
    for i, (name, pts) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        if len(pts) == 1:
            x, y = pts[0]
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
    equal bins."""
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
    left, bottom, top = 10, height - 34, 10
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
            f'<text x="{x + slot / 2:.1f}" y="{bottom - h - 2:.1f}" font-size="11" '
            f'text-anchor="middle">{n}</text>'
            f'<text x="{x + slot / 2:.1f}" y="{bottom + 14}" font-size="11" fill="#666" '
            f'text-anchor="middle">{_e(label)}</text>'
        )
    parts.append(f'<text x="{left}" y="{height - 4}" font-size="11" fill="#666">outcome</text>')
    return "".join(parts) + "</svg>"


def timeline(
    rewards: Sequence[float], said: Sequence[Sequence[str]], *, css_id: str, width: int = 900
) -> str:
    """A run step by step: the return so far as a line, each step's reward as a bar, and a
    mark where the arena said something (``said[i]``: the message types at action i)."""
    height, left, top, bottom = 160, 48, 10, 130
    totals, total = [0.0], 0.0
    for r in rewards:
        total += r
        totals.append(total)
    lo, hi = min(*totals, *rewards, 0.0), max(*totals, *rewards, 0.0)
    if hi == lo:
        hi = lo + 1
    slot = (width - left - 10) / max(len(totals), 2)

    def py(y: float) -> float:
        return bottom - (y - lo) / (hi - lo) * (bottom - top)

    parts = [
        f'<svg id="{_e(css_id)}" class="chart" width="{width}" height="{height}" role="img" '
        'aria-label="the run step by step">'
        "<title>the run step by step</title>",
        f'<line x1="{left}" y1="{py(0):.1f}" x2="{width - 10}" y2="{py(0):.1f}" stroke="#ccc"/>',
        f'<text x="4" y="{top + 10}" font-size="11" fill="#666">{_num(hi)}</text>',
        f'<text x="4" y="{bottom}" font-size="11" fill="#666">{_num(lo)}</text>',
    ]
    for i, r in enumerate(rewards):
        x = left + (i + 1) * slot
        y, base = py(r), py(0)
        parts.append(
            f'<rect class="step" x="{x - slot * 0.35:.1f}" y="{min(y, base):.1f}" '
            f'width="{slot * 0.7:.1f}" height="{abs(base - y):.1f}" fill="#9ecae1">'
            f"<title>action {i}: reward {_num(r)}</title></rect>"
        )
    coords = " ".join(f"{left + i * slot:.1f},{py(t):.1f}" for i, t in enumerate(totals))
    if len(totals) == 1:  # no action accepted yet: a point, not a line
        coords += f" {left + slot:.1f},{py(0):.1f}"
    parts.append(f'<polyline class="series" fill="none" stroke="{COLORS[1]}" stroke-width="2" '
                 f'points="{coords}"><title>return so far</title></polyline>')  # fmt: skip
    for i, kinds in enumerate(said):
        if kinds:
            color = "#a00" if "error" in kinds else "#a60" if "warning" in kinds else "#555"
            parts.append(
                f'<circle class="message" cx="{left + i * slot:.1f}" cy="{bottom + 12}" r="4" '
                f'fill="{color}"><title>action {i}: {_e(", ".join(kinds))}</title></circle>'
            )
    note = "action number (bars: reward; line: return so far; dots: messages)"
    parts.append(f'<text x="{left}" y="{height - 4}" font-size="11" fill="#666">{note}</text>')
    return "".join(parts) + "</svg>"
