"""Per-address limiters: caps that hold under threads, bounded memory, retry-after."""

from __future__ import annotations

import threading

import pytest

from envwire.errors import CapacityError
from envwire.server.security.addresses import AddressLimiter, address_of


def test_total_and_per_address_caps() -> None:
    limiter = AddressLimiter(total=3, per_address=2, what="streams")
    limiter.acquire("10.0.0.1")
    limiter.acquire("10.0.0.1")
    with pytest.raises(CapacityError, match=r"client 10\.0\.0\.1 holds 2 streams"):
        limiter.acquire("10.0.0.1")
    limiter.acquire("10.0.0.2")
    with pytest.raises(CapacityError, match=r"at capacity \(3 streams\)"):
        limiter.acquire("10.0.0.3")
    limiter.release("10.0.0.1")
    limiter.acquire("10.0.0.3")
    assert limiter.held() == 3 and limiter.held("10.0.0.1") == 1
    limiter.release("never-held")  # ignored
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.3"):
        limiter.release(address)
    assert limiter.held() == 0 and limiter._held == {}


def test_caps_hold_under_concurrency() -> None:
    limiter = AddressLimiter(total=None, per_address=10, what="sessions")
    granted: list[int] = []

    def grab() -> None:
        try:
            limiter.acquire("a")
            granted.append(1)
        except CapacityError:
            pass

    threads = [threading.Thread(target=grab) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 10 == limiter.held("a")


def test_error_message_never_echoes_an_unbounded_address() -> None:
    limiter = AddressLimiter(total=None, per_address=0, what="x")
    with pytest.raises(CapacityError) as info:
        limiter.acquire("z" * 10_000)
    assert len(str(info.value)) < 200


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        (("127.0.0.1", 5000), "127.0.0.1"),
        (("::1", 5000, 0, 0), "::1"),
        ("ipv4:10.1.2.3:4567", "10.1.2.3"),
        ("ipv6:[::1]:4567", "::1"),
        ("ipv6:%5B::1%5D:4567", "::1"),
        ("unix:/tmp/sock", "unix:/tmp/sock"),
    ],
)
def test_address_of(peer: object, address: str) -> None:
    assert address_of(peer) == address
