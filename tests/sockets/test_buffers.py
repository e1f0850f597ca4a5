"""The shared receive-buffer budget and the rate-limited log."""

from __future__ import annotations

import logging
import threading

import pytest

from envwire.server.ratelog import RateLimitedLog
from envwire.sockets.buffers import BufferBudget


def test_allowance_is_free_and_the_rest_is_charged() -> None:
    budget = BufferBudget(1000, allowance=100)
    a, b = budget.hold(), budget.hold()
    assert a.update(100) and budget.used == 0
    assert a.update(700) and budget.used == 600
    assert b.update(500) and budget.used == 1000
    assert not b.update(501)  # over the limit: refused, nothing changes
    assert budget.used == 1000 and b.charged == 400
    assert a.update(50) and budget.used == 400
    assert b.update(501) and budget.used == 401
    a.release()
    b.release()
    b.release()
    assert budget.used == 0


def test_no_limit() -> None:
    budget = BufferBudget(None, allowance=0)
    hold = budget.hold()
    assert hold.update(10**12)
    hold.release()
    assert budget.used == 0


def test_concurrent_holds_never_exceed_the_limit() -> None:
    budget = BufferBudget(10_000, allowance=0)
    peak = []

    def work() -> None:
        hold = budget.hold()
        for size in range(0, 3_000, 7):
            hold.update(size)
            peak.append(budget.used)
        hold.release()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(peak) <= 10_000
    assert budget.used == 0


def test_rate_limited_log(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("envwire.test-ratelog")
    limited = RateLimitedLog(logger, burst=3, period=3600.0)
    with caplog.at_level(logging.INFO, logger=logger.name):
        results = [limited("refused %s", i) for i in range(10)]
    assert results == [True] * 3 + [False] * 7
    assert [r.getMessage() for r in caplog.records] == ["refused 0", "refused 1", "refused 2"]
    limited._tokens = 1.0  # as if time had passed
    with caplog.at_level(logging.INFO, logger=logger.name):
        assert limited("refused %s", 10)
    assert caplog.records[-1].getMessage() == "refused 10 (7 similar lines were dropped)"


def test_rate_limited_log_is_silent_below_its_level(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("envwire.test-ratelog-quiet")
    limited = RateLimitedLog(logger, burst=1)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        assert not limited("ignored")
    assert not caplog.records
