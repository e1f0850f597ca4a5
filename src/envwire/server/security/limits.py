"""Per-client-address bounds: what one address may hold at once, and how often it may fail.

:class:`AddressLimiter` counts what each client address holds (connections, streams,
sessions) against a total and a per-address cap; :class:`FailureLimiter` counts failed attempts
(logins) per key in a sliding window and says how long to wait once there were too many.
Both are thread-safe and keep memory bounded whatever the clients send.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from urllib.parse import unquote

from envwire.errors import CapacityError

__all__ = ["AddressLimiter", "FailureLimiter", "address_of"]


def address_of(peer: object) -> str:
    """The client address of a peer: a socket's ``(host, port, ...)`` tuple, or a gRPC peer
    string (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``; any other string as it is)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    text = str(peer)
    kind, _, rest = text.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        rest = unquote(rest)  # gRPC writes ipv6:%5B::1%5D:5678
        host = rest.rpartition(":")[0] if rest.startswith("[") else rest
        return host.strip("[]").partition("%")[0]
    return text


class AddressLimiter:
    """Counts what each address holds, against ``total`` and ``per_address`` (None = no cap).

    Args:
        what: what is counted, for error messages ("connections", "sessions").
    """

    def __init__(self, total: int | None, per_address: int | None, what: str) -> None:
        self.total = total
        self.per_address = per_address
        self.what = what
        self._held: dict[str, int] = {}
        self._count = 0
        self._lock = threading.Lock()

    def acquire(self, address: str) -> None:
        """Take one slot for ``address``.

        Raises:
            CapacityError: the total or the address's cap is reached (the message says which,
                and never echoes more than the address).
        """
        with self._lock:
            if self.total is not None and self._count >= self.total:
                raise CapacityError(
                    f"server is at capacity ({self.total} {self.what}); try again later"
                )
            held = self._held.get(address, 0)
            if self.per_address is not None and held >= self.per_address:
                raise CapacityError(
                    f"client {address[:64]} holds {held} {self.what}, the most one address may "
                    "hold here; close some first"
                )
            self._held[address] = held + 1
            self._count += 1

    def release(self, address: str) -> None:
        """Give back one slot of ``address`` (extra releases are ignored)."""
        with self._lock:
            held = self._held.get(address, 0)
            if held <= 0:
                return
            self._count -= 1
            if held == 1:
                del self._held[address]
            else:
                self._held[address] = held - 1

    def held(self, address: str | None = None) -> int:
        """Slots held by ``address``, or by everyone."""
        with self._lock:
            return self._count if address is None else self._held.get(address, 0)


class FailureLimiter:
    """At most ``limit`` failures per key within ``window`` seconds.

    Keys are whatever the caller counts by (an agent, a client address). The table holds at most
    ``max_keys`` keys: the least recently failing are forgotten first, so a client inventing
    names cannot grow it without end.
    """

    def __init__(self, limit: int, window: float, *, max_keys: int = 10_000) -> None:
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self._failures: OrderedDict[object, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, *keys: object) -> float:
        """Seconds until every key may try again (0: they may now)."""
        now = time.monotonic()
        wait = 0.0
        with self._lock:
            for key in keys:
                times = self._failures.get(key)
                if times is None:
                    continue
                while times and times[0] <= now - self.window:
                    times.popleft()
                if len(times) >= self.limit:
                    wait = max(wait, times[0] + self.window - now)
        return wait

    def fail(self, *keys: object) -> None:
        """Count one failure against each key."""
        now = time.monotonic()
        with self._lock:
            for key in keys:
                times = self._failures.pop(key, None)
                if times is None:
                    times = deque(maxlen=self.limit)
                times.append(now)
                self._failures[key] = times
            while len(self._failures) > self.max_keys:
                self._failures.popitem(last=False)

    def forgive(self, key: object) -> None:
        """Forget the failures of ``key`` (after a success)."""
        with self._lock:
            self._failures.pop(key, None)
