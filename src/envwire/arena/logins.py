"""Failed arena logins: how many an agent and a client address may have before they wait.

A client guessing passwords gets at most ``failures`` wrong answers per agent, and
``failures_per_address`` per client address, within ``window`` seconds; after that the act
endpoint answers 429 with ``Retry-After`` until the oldest failure leaves the window, whether the
next password is right or not. A right password forgives the agent's failures (not the
address's). Server settings: ``arena_login_failures`` (default 10),
``arena_login_failures_per_address`` (default 30), ``arena_login_window`` (default 60 s).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from envwire.errors import RateLimitedError

__all__ = ["FailureLimiter", "LoginLimits"]


#: Characters of an env and agent name kept as they are in a key; longer ones are hashed.
_MAX_KEY = 128


def _agent_key(env: str, agent: str) -> object:
    """The failure table's key of an agent: the names, or a 16-byte digest of them when they
    are long (the names are the client's: the table must not hold megabytes per key)."""
    if len(env) + len(agent) <= _MAX_KEY:
        return (env, agent)
    return hashlib.blake2b(f"{env}\0{agent}".encode(), digest_size=16).digest()


class FailureLimiter:
    """At most ``limit`` failures per key within ``window`` seconds.

    Keys are whatever the caller counts by (an agent, a client address). The table holds at most
    ``max_keys`` keys: the least recently failing are forgotten first, so a client inventing
    names cannot grow it without end. ``clock`` tells the time in seconds (tests pass their own).
    """

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self.clock = clock
        self._failures: OrderedDict[object, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, *keys: object) -> float:
        """Seconds until every key may try again (0: they may now)."""
        now = self.clock()
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
        now = self.clock()
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


class LoginLimits:
    """The arena's failed-login limits (see the module docstring)."""

    def __init__(
        self, failures: int = 10, failures_per_address: int = 30, window: float = 60.0
    ) -> None:
        self.agents = FailureLimiter(failures, window)
        self.addresses = FailureLimiter(failures_per_address, window)

    def check(self, env: str, agent: str, address: str) -> None:
        """Raise before a password is even looked at when the agent or address must wait.

        Raises:
            RateLimitedError: with ``retry_after`` set.
        """
        wait = max(
            self.agents.retry_after(_agent_key(env, agent)),
            self.addresses.retry_after(address) if address else 0.0,
        )
        if wait > 0:
            error = RateLimitedError(
                f"too many failed logins for agent {agent[:64]!r} or from this address; "
                f"retry in {wait:.0f} s"
            )
            error.retry_after = wait
            raise error

    def failed(self, env: str, agent: str, address: str) -> None:
        """Count one failed login."""
        self.agents.fail(_agent_key(env, agent))
        if address:
            self.addresses.fail(address)

    def succeeded(self, env: str, agent: str) -> None:
        """Forget the agent's failures."""
        self.agents.forgive(_agent_key(env, agent))
