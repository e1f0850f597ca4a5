"""Counts the workers of one server share: a capacity and per-address bounds that hold for
every worker together (two workers' views of one file, here in one process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envwire.errors import CapacityError
from envwire.server.tally import SESSIONS, SharedAddressLimiter, Tally, make_tally_file


def test_each_worker_writes_its_slot_and_reads_the_others(tmp_path: Path) -> None:
    path = str(tmp_path / "tally")
    make_tally_file(path, 3)
    views = [Tally(path, i, 3) for i in range(3)]
    views[0].set(SESSIONS, 4)
    views[2].set(SESSIONS, 5)
    assert views[1].others(SESSIONS) == 9
    assert views[0].others(SESSIONS) == 5
    views[1].clear(2)  # the supervisor, when worker 2 died
    assert views[0].others(SESSIONS) == 0
    for view in views:
        view.close()


def test_shared_address_limits_count_every_worker(tmp_path: Path) -> None:
    path = str(tmp_path / "http-sessions")
    one, two = (
        SharedAddressLimiter(5, 3, "sessions", path=path, index=i, count=2) for i in range(2)
    )
    one.acquire("10.0.0.1")
    one.acquire("10.0.0.1")
    two.acquire("10.0.0.1")
    with pytest.raises(CapacityError, match=r"10\.0\.0\.1 holds 3 sessions"):
        two.acquire("10.0.0.1")
    with pytest.raises(CapacityError, match=r"10\.0\.0\.1 holds 3 sessions"):
        one.acquire("10.0.0.1")
    two.acquire("10.0.0.2")
    two.acquire("10.0.0.2")
    with pytest.raises(CapacityError, match="at capacity \\(5 sessions\\)"):
        one.acquire("10.0.0.3")  # five held in all, over both workers
    one.release("10.0.0.1")
    one.acquire("10.0.0.3")
    one.release("10.0.0.9")  # never held: ignored, nothing goes below zero
    assert one.held() + two.held() == 5
