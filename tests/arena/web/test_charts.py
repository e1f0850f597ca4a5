"""The pages' SVG charts: round ticks on both axes, values kept off the plot's border, a run's
reward bars under their action numbers."""

from __future__ import annotations

import re
import time

import pytest

from envwire.arena.web import charts


def _numbers(svg: str, pattern: str) -> list[float]:
    return [float(v) for v in re.findall(pattern, svg)]


def _ticks(svg: str) -> list[str]:
    return re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.0, 1.0, [0.0, 0.25, 0.5, 0.75, 1.0]),
        (0.35, 0.9, [0.2, 0.4, 0.6, 0.8, 1.0]),
        (-3.0, 12.0, [-5.0, 0.0, 5.0, 10.0, 15.0]),
        (1.0, 1.0, [0.0, 0.5, 1.0, 1.5, 2.0]),
    ],
)
def test_nice_ticks_cover_the_values_with_round_steps(
    low: float, high: float, expected: list[float]
) -> None:
    assert charts.nice_ticks(low, high) == pytest.approx(expected)


def test_time_ticks_are_round_clock_times() -> None:
    start = time.mktime((2025, 3, 1, 9, 58, 0, 0, 0, 0)) - time.timezone  # UTC
    ticks, fmt = charts.time_ticks(start, start + 3 * 3600)
    assert fmt == "%H:%M"
    assert [time.strftime(fmt, time.gmtime(t)) for t in ticks] == [
        "09:30", "10:00", "10:30", "11:00", "11:30", "12:00", "12:30", "13:00",
    ]  # fmt: skip
    ticks, fmt = charts.time_ticks(start, start + 40)
    assert fmt == "%H:%M:%S" and ticks[1] - ticks[0] == 10


def test_a_rating_of_one_is_drawn_inside_the_plot() -> None:
    """The bug: a line at the top of the range lay on the plot's frame and could not be seen."""
    svg = charts.line_chart(
        [("alice", [(1.0, 1.0), (2.0, 1.0)]), ("bob", [(1.0, 0.0), (2.0, 0.5)])],
        css_id="r", title="t", x_label="runs",
    )  # fmt: skip
    top, bottom = 10, 240 - 42
    alice = re.search(r'stroke="#1f77b4" stroke-width="2" points="([^"]+)"', svg)
    bob = re.search(r'stroke="#d62728" stroke-width="2" points="([^"]+)"', svg)
    assert alice and bob
    alice_y = {float(p.split(",")[1]) for p in alice.group(1).split()}
    bob_y = [float(p.split(",")[1]) for p in bob.group(1).split()]
    assert alice_y == {top + charts.PAD} and bob_y[0] == bottom - charts.PAD
    assert _ticks(svg)[:5] == ["0", "0.25", "0.5", "0.75", "1"]  # the value axis


def test_a_time_axis_is_labelled_with_clock_times() -> None:
    start = time.mktime((2025, 3, 1, 10, 0, 0, 0, 0, 0)) - time.timezone
    svg = charts.line_chart(
        [("a", [(start, 0.5), (start + 1800, 0.7)])], css_id="r", title="t",
        x_label="time (UTC)", x_axis="time",
    )  # fmt: skip
    assert [t for t in _ticks(svg) if ":" in t] == ["10:00", "10:05", "10:10", "10:15", "10:20",
                                                   "10:25", "10:30"]  # fmt: skip


def test_a_reward_bar_stands_under_its_action_number() -> None:
    svg = charts.timeline([0.0, 1.0, -0.5], [[], ["info"], [], ["error"]], css_id="t")
    labels = re.findall(r'<text class="tick" x="([\d.]+)"[^>]*>(\d+)</text>', svg)
    under = {int(n): float(x) for x, n in labels}
    assert sorted(under) == [0, 1, 2, 3]  # every action, and the one the run waits for
    bars = re.findall(r'<rect class="step" x="([\d.]+)"[^>]*width="([\d.]+)"', svg)
    centres = [float(x) + float(w) / 2 for x, w in bars]
    assert centres == pytest.approx([under[0], under[1], under[2]], abs=0.1)
    dots = _numbers(svg, r'<circle class="message" cx="([\d.]+)"')
    assert dots == pytest.approx([under[1], under[3]], abs=0.1)
    line = re.search(r'<polyline class="series"[^>]*points="([^"]+)"', svg)
    assert line is not None
    xs = [float(p.split(",")[0]) for p in line.group(1).split()]
    assert xs[1:] == pytest.approx([under[0], under[1], under[2]], abs=0.1)  # the return after it


def test_runs_that_finished_at_one_time_are_a_dot_not_an_invisible_line() -> None:
    """Runs finished by one request share its time: their line would have no length."""
    svg = charts.line_chart(
        [("alice", [(5.0, 1.0), (9.0, 1.0)]), ("bob", [(7.0, 0.5), (7.0, 0.0)])],
        css_id="r", title="t", x_label="time (UTC)", x_axis="time",
    )  # fmt: skip
    assert svg.count('<polyline class="series"') == 1
    dot = re.search(r'<circle class="series" cx="[\d.]+" cy="([\d.]+)"[^>]*fill="#d62728"', svg)
    assert dot is not None and float(dot.group(1)) == 240 - 42 - charts.PAD  # bob's last: 0
