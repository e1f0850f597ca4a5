"""Giving memory back: a connection that held a large message asks for a trim when it lets
the memory go, and the trims of a burst are one a second."""

from __future__ import annotations

import ctypes
import time

import pytest

from envwire.sockets import memory
from envwire.sockets.buffers import BufferBudget
from envwire.testing import wait_until

needs_glibc = pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "malloc_trim"), reason="the C library has no malloc_trim"
)


@needs_glibc
def test_a_large_message_done_with_is_given_back() -> None:
    budget = BufferBudget(1 << 30)
    small, large = budget.hold(), budget.hold()
    before = memory.trims()
    assert small.update(1000) and large.update(budget.allowance + 10_000_000)
    assert not small.drew and large.drew  # only a hold beyond its allowance asks
    assert large.update(0)  # the message is parsed: the budget is repaid, a trim follows
    assert wait_until(lambda: memory.trims() > before, timeout=10)
    large.release()  # and again once the connection is gone
    assert wait_until(lambda: memory.trims() > before + 1, timeout=10)


@needs_glibc
def test_a_burst_of_requests_is_one_trim_a_second() -> None:
    before = memory.trims()
    began = time.monotonic()
    while time.monotonic() - began < memory.TRIM_DELAY * 2.5:
        memory.give_back()
        time.sleep(0.001)
    assert memory.trims() - before <= 3  # about 2,000 requests


def test_quiet_periods_trim_again_until_a_request_comes() -> None:
    """After a request's trim, one more after each quiet period (what is freed later), counted
    from the request's trim; a request meanwhile is trimmed for, and the quiet periods start
    over from its trim."""
    calls: list[float] = []
    trimmer = memory._Trimmer(lambda pad: calls.append(time.monotonic()) or 1, 0.05, (0.2, 0.6))
    began = time.monotonic()
    trimmer.request()
    assert wait_until(lambda: len(calls) == 3, timeout=10)
    time.sleep(0.3)
    assert len(calls) == 3  # nothing more once the quiet periods are over
    assert calls[0] - began >= 0.05
    assert calls[1] - calls[0] >= 0.2 and calls[2] - calls[0] >= 0.6
    trimmer.request()
    assert wait_until(lambda: len(calls) == 4, timeout=10)
    trimmer.request()  # within the first quiet period: its own trim, then the periods again
    assert wait_until(lambda: len(calls) == 7, timeout=10)
    assert calls[5] - calls[4] >= 0.2 and calls[6] - calls[4] >= 0.6
    assert trimmer.count == 7
