"""Log lines that a client can provoke, rate-limited so that no client can flood the log."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitedLog"]


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
