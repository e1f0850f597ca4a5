"""Giving memory back: a connection that held a large message asks for a trim when it lets
the memory go, a trim returns the pages that free() kept, and the trims of a burst are one a
second."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
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


#: A process that frees 62.5 MiB in the middle of its main heap (blocks below the mmap
#: threshold, a block after them kept: nothing freed reaches the heap's top, which ``free``
#: trims by itself), and prints its resident size before and after a trim (or a wait as long).
_FREED_IN_THE_HEAP = textwrap.dedent(
    """
    import sys, time
    from envwire.sockets import memory
    from envwire.testing import wait_until

    def rss():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmRSS:"))

    blocks = [bytearray(100 * 1024) for _ in range(640)]
    guard = bytearray(100 * 1024)
    del blocks
    freed, before = rss(), memory.trims()
    if sys.argv[1] == "trim":
        memory.give_back()
        assert wait_until(lambda: memory.trims() > before, timeout=30)
    else:
        time.sleep(memory.TRIM_DELAY * 1.5)
    print(freed, rss())
    """
)


def _freed_and_after(mode: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _FREED_IN_THE_HEAP, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    freed, after = map(int, done.stdout.split())
    return freed, after


@needs_glibc
def test_a_trim_gives_the_pages_freed_inside_the_heap_back_to_the_system() -> None:
    """What free() keeps (freed blocks below the heap's top stay resident) and the trim that
    give_back() asks for returns: measured in a fresh process, without a trim and with one."""
    MiB = 1024 * 1024
    freed, after = _freed_and_after("wait")
    assert after > freed - 16 * MiB, "the pages went back without a trim: nothing to measure"
    freed, after = _freed_and_after("trim")
    assert freed - after > 48 * MiB, f"the trim gave back {(freed - after) / MiB:.0f} MiB"


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
