"""Failed-login limits of the arena."""

from __future__ import annotations

import pytest

from envwire.arena.logins import FailureLimiter, LoginLimits
from envwire.errors import RateLimitedError
from envwire.protocols.http.status import status_of


class Clock:
    """A clock the test moves by hand: the window's edges are exact, whatever the load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_within_the_window() -> None:
    clock = Clock()
    limiter = FailureLimiter(limit=3, window=60.0, clock=clock)
    assert limiter.retry_after("agent", "1.2.3.4") == 0
    for _ in range(3):
        limiter.fail("agent", "1.2.3.4")
        clock.now += 1.0
    assert limiter.retry_after("agent") == 57.0  # until the oldest failure leaves the window
    assert limiter.retry_after("someone else") == 0
    clock.now += 56.5
    assert limiter.retry_after("agent") == 0.5
    clock.now += 0.5
    assert limiter.retry_after("agent", "1.2.3.4") == 0
    limiter.fail("agent")
    limiter.forgive("agent")
    assert "agent" not in limiter._failures


def test_failure_table_is_bounded() -> None:
    limiter = FailureLimiter(limit=2, window=60, max_keys=100)
    for n in range(1000):
        limiter.fail(f"invented-{n}")
    assert len(limiter._failures) == 100
    assert all(len(times) <= 2 for times in limiter._failures.values())


def test_login_limits_per_agent_and_per_address() -> None:
    limits = LoginLimits(failures=2, failures_per_address=3, window=60)
    limits.check("env", "alice", "10.0.0.1")
    limits.failed("env", "alice", "10.0.0.1")
    limits.failed("env", "alice", "10.0.0.1")
    with pytest.raises(RateLimitedError) as info:
        limits.check("env", "alice", "10.0.0.2")  # the agent waits, from any address
    assert 0 < info.value.retry_after <= 60 and status_of(info.value) == 429
    limits.check("env", "bob", "10.0.0.2")
    limits.failed("env", "bob", "10.0.0.1")  # the address's third failure
    with pytest.raises(RateLimitedError):
        limits.check("env", "carol", "10.0.0.1")  # every agent waits from that address
    limits.succeeded("env", "alice")
    limits.check("env", "alice", "10.0.0.2")


def test_huge_agent_names_are_kept_as_digests_and_still_limited() -> None:
    import tracemalloc

    limits = LoginLimits(failures=2, failures_per_address=1000, window=60)
    huge = "a" * (15 * 1024 * 1024)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(8):
            limits.failed("env", f"{n}{huge}", "10.0.0.1")
        limits.failed("env", f"0{huge}", "10.0.0.1")  # the same agent's second failure
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1024 * 1024, f"{grown} bytes retained"
    with pytest.raises(RateLimitedError) as info:
        limits.check("env", f"0{huge}", "10.0.0.2")
    assert len(str(info.value)) < 200  # the name is echoed cut
    limits.check("env", f"1{huge}", "10.0.0.2")  # one failure: not yet
