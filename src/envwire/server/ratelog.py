"""Log lines that a client can provoke, rate-limited so that no client can flood the log."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitedLog", "RefusalLog", "refusals"]


class RateLimitedLog:
    """Writes at most ``burst`` lines per ``period`` seconds to ``logger`` at ``level``.

    A token bucket: ``burst`` lines may come at once, then one per ``period / burst`` seconds.
    Lines beyond that are dropped and counted; the next line that gets through says how many
    were dropped. Thread-safe.

    Args:
        logger: where the lines go.
        level: their level (INFO: refusals and protocol errors are the peer's doing).
        burst: lines allowed at once.
        period: seconds in which ``burst`` lines are allowed on average.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        level: int = logging.INFO,
        burst: int = 20,
        period: float = 10.0,
    ) -> None:
        self.logger = logger
        self.level = level
        self.burst = burst
        self.rate = burst / period
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._dropped = 0
        self._lock = threading.Lock()

    def __call__(self, message: str, *args: object) -> bool:
        """Log ``message % args`` if the budget allows; returns whether it was logged."""
        if not self.logger.isEnabledFor(self.level):
            return False
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens < 1.0:
                self._dropped += 1
                return False
            self._tokens -= 1.0
            dropped, self._dropped = self._dropped, 0
        if dropped:
            message += f" ({dropped} similar lines were dropped)"
        self.logger.log(self.level, message, *args)
        return True


class RefusalLog:
    """Logs refused connections at WARNING, one line per client address and front end per
    ``period``.

    The first refusal of an address on a front end is logged at once; further refusals of that
    address there within ``period`` seconds are counted, and its next line says how many there
    were. A client that retries in a loop (one without the token, say) thus costs a line a
    minute, while each new address is seen at once. The table of addresses is bounded
    (``max_addresses``: entries past their period are forgotten, at most once a second, and
    while every entry is recent a new address is not logged), and lines across all addresses
    are rate-limited by a :class:`RateLimitedLog` (``burst`` lines per ``period``).
    Thread-safe.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        level: int = logging.WARNING,
        period: float = 60.0,
        max_addresses: int = 4096,
        burst: int = 20,
    ) -> None:
        self.logger = logger
        self.level = level
        self.period = period
        self.max_addresses = max_addresses
        self._lines = RateLimitedLog(logger, level=level, burst=burst, period=period)
        #: (front end, address) -> (when its last line was written, refusals not logged since)
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}
        self._pruned = 0.0
        self._lock = threading.Lock()

    def __call__(self, front_end: str, address: str, reason: str) -> bool:
        """A connection of ``front_end`` from ``address`` was refused for ``reason``; returns
        whether a line was written."""
        if not self.logger.isEnabledFor(self.level):
            return False
        with self._lock:
            now = time.monotonic()
            key = (front_end, address)
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.period:
                self._seen[key] = (seen[0], seen[1] + 1)
                return False
            if seen is None and len(self._seen) >= self.max_addresses:
                if now - self._pruned >= 1.0:
                    self._pruned = now
                    cutoff = now - self.period
                    self._seen = {k: v for k, v in self._seen.items() if v[0] >= cutoff}
                if len(self._seen) >= self.max_addresses:
                    return False
            self._seen[key] = (now, 0)
        more = seen[1] if seen is not None else 0
        message = "%s: refused a connection from %s: %s"
        if more:
            message += f" (and {more} more from this address since its last line)"
        return self._lines(message, front_end, address, reason)


#: The server's log of refused connections, shared by every front end of the process (one
#: bound on the lines and the addresses kept).
refusals = RefusalLog(logging.getLogger("envwire.refused"))
