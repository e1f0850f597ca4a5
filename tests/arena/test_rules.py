"""Scheduling and rating rules, as pure functions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from envwire.arena.rules import RunSlot, best_rating, rating, request_limit, schedule


def test_request_limit() -> None:
    assert request_limit(5, True) == 5
    assert request_limit(64, False) == 1


def test_new_runs_fill_up_to_the_limit() -> None:
    assert schedule([], 5).new_runs == 5
    plan = schedule([RunSlot(3, False), RunSlot(1, False)], 5)
    assert plan.send == (1, 3)
    assert plan.new_runs == 3


def test_unanswered_runs_come_first_and_block_new_runs() -> None:
    plan = schedule([RunSlot(1, False), RunSlot(2, True), RunSlot(3, False)], 5)
    assert plan.send == (2, 1, 3)
    assert plan.new_runs == 0


def test_limit_one_resends_the_unanswered_run() -> None:
    plan = schedule([RunSlot(1, False), RunSlot(7, True)], 1)
    assert plan == schedule([RunSlot(7, True), RunSlot(1, False)], 1)
    assert plan.send == (7,)
    assert plan.new_runs == 0


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), unique_by=lambda t: t[0]),
       st.integers(1, 10))  # fmt: skip
def test_schedule_properties(slots: list[tuple[int, bool]], limit: int) -> None:
    active = [RunSlot(i, o) for i, o in slots]
    plan = schedule(active, limit)
    waiting = sorted(i for i, o in slots if o)
    assert len(plan.send) + plan.new_runs <= limit
    assert list(plan.send[: len(waiting)]) == waiting[:limit]
    if waiting:
        assert plan.new_runs == 0
    else:
        assert len(plan.send) + plan.new_runs == limit or plan.new_runs == 0
    assert len(set(plan.send)) == len(plan.send)


def test_ratings() -> None:
    assert rating([], 0.5) == 0.5
    assert rating([1, 0, 1, 1], 0.0) == 0.75
    assert best_rating(None, 0.2, "max") == 0.2
    assert best_rating(0.5, 0.2, "max") == 0.5
    assert best_rating(0.5, 0.2, "min") == 0.2
