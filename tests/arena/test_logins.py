"""Failed-login limits of the arena."""

from __future__ import annotations

import time

import pytest

from envwire.arena.logins import FailureLimiter, LoginLimits
from envwire.errors import RateLimitedError
from envwire.protocols.http.status import status_of


def test_failures_within_the_window() -> None:
    limiter = FailureLimiter(limit=3, window=0.3)
    assert limiter.retry_after("agent", "1.2.3.4") == 0
    for _ in range(3):
        limiter.fail("agent", "1.2.3.4")
    wait = limiter.retry_after("agent")
    assert 0 < wait <= 0.3
    assert limiter.retry_after("someone else") == 0
    time.sleep(wait + 0.01)
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
