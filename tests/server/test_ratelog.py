"""The log of refused connections: one line per address and front end per period."""

from __future__ import annotations

import logging

import pytest

from envwire.server.ratelog import RefusalLog


def test_one_line_per_address_and_front_end_per_period(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger = logging.getLogger("envwire.test-refusals")
    now = [1000.0]
    monkeypatch.setattr("envwire.server.ratelog.time.monotonic", lambda: now[0])
    log = RefusalLog(logger, period=60.0)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        written = [log("gym-socket", "10.0.0.1", "no token") for _ in range(50)]
        assert written == [True] + [False] * 49
        assert log("gym-socket", "10.0.0.2", "no token")  # another address: at once
        assert log("http", "10.0.0.1", "no token")  # the same address on another port
        now[0] += 61
        assert log("gym-socket", "10.0.0.1", "no token")
    assert [r.getMessage() for r in caplog.records] == [
        "gym-socket: refused a connection from 10.0.0.1: no token",
        "gym-socket: refused a connection from 10.0.0.2: no token",
        "http: refused a connection from 10.0.0.1: no token",
        "gym-socket: refused a connection from 10.0.0.1: no token "
        "(and 49 more from this address since its last line)",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_the_table_of_addresses_and_the_lines_are_bounded(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger = logging.getLogger("envwire.test-refusals-bounded")
    now = [1000.0]
    monkeypatch.setattr("envwire.server.ratelog.time.monotonic", lambda: now[0])
    log = RefusalLog(logger, period=60.0, max_addresses=100, burst=10)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for i in range(10_000):  # one connection each from ten thousand addresses
            log("http", f"10.0.{i // 256}.{i % 256}", "no token")
        assert len(caplog.records) == 10  # the burst across all addresses
        assert len(log._seen) == 100
        now[0] += 61  # past the period: old entries make room again
        assert log("http", "192.0.2.1", "no token")
    assert len(log._seen) == 1
