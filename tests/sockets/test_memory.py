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
