"""What the pages read of the past: the rating after each finished run, as the arena rated,
also when a chart shows only the last runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from envwire.arena import history
from envwire.arena.admin import ArenaAdmin
from envwire.arena.core import Arena
from envwire.arena.store import Store
from envwire.envs.nim import strong_move
from envwire.runtime import make_worker
from tests.arena.test_core import Agent, answer


def test_rolling_ratings_average_the_last_window() -> None:
    assert history.rolling_ratings([1, 0, 0, 1], 2, 0.5) == [1.0, 0.5, 0.0, 0.5]
    # earlier outcomes count as the ones before
    assert history.rolling_ratings([0, 1], 3, 0.5, before=[1, 1, 1, 0]) == [
        pytest.approx(1 / 3), pytest.approx(1 / 3),
    ]  # fmt: skip


def test_a_chart_of_the_last_runs_averages_over_the_runs_before_them(tmp_path: Path) -> None:
    """The bug: a chart of an agent's last N runs began its average afresh at the first one
    shown, so its line did not end at the agent's rating."""
    store = Store(tmp_path / "arena.sqlite3")
    admin = ArenaAdmin(store)
    admin.create_env("nim", "envwire/Nim-v0", {"rating_runs": 6, "kwargs": {"opponent": "random"}})
    arena = Arena(store, worker_factory=make_worker)
    player = Agent(arena, admin.add_agent("nim", "alice"))
    rng = random.Random(0)

    def choose(left: int) -> int:  # strong two times in three
        return (strong_move(left) or 1) if rng.random() < 0.66 else rng.randint(1, min(3, left))

    try:
        reply = player.act()
        values: list[float] = []
        # 30 runs at least, and on until the last 10 hold both wins and losses (the random
        # opponent is not seeded: a streak of 10 wins is not rare), so that where the
        # window starts matters to the average
        while len(values) < 30 or (len(set(values[-10:])) < 2 and len(values) < 300):
            reply = player.act(answer(reply, choose))
            values = [row.value for row in history.outcomes(store, "nim", "alice")]
        expected = history.rolling_ratings(values, 6, 0.0)
        points = history.rating_points(store, "nim", "alice", rating_runs=6, initial=0.0,
                                       shown=5)  # fmt: skip
        assert [r for _, r in points] == pytest.approx(expected[-5:])
        alice = store.agent("nim", "alice")
        assert alice is not None and points[-1][1] == pytest.approx(alice.rating)
        assert len(set(values[-10:])) == 2  # the window's start matters: wins and losses
    finally:
        arena.close()
