"""One budget for the bytes that all connections hold in receive buffers.

A connection's buffer holds what arrived and is not parsed yet: at most one packet or message
in progress, whose size its front end caps. Those caps bound one connection; the budget bounds
all of them together, so that many connections each sending a large packet slowly cannot
exhaust the server's memory. Every connection may buffer ``allowance`` bytes (one receive)
without drawing on the budget, so small requests never wait for or fail on it.
"""

from __future__ import annotations

import threading
from typing import Final

__all__ = ["DEFAULT_MAX_BUFFERED", "BufferBudget", "Hold"]

#: Bytes all connections together may buffer beyond their allowances (``max_buffered``).
DEFAULT_MAX_BUFFERED: Final = 256 * 1024 * 1024
#: Bytes each connection may buffer without drawing on the budget.
DEFAULT_ALLOWANCE: Final = 256 * 1024


class BufferBudget:
    """Counts the bytes connections buffer beyond their allowance, up to ``limit``.

    Args:
        limit: bytes all connections may buffer beyond their allowances; None = no limit.
        allowance: bytes each connection may buffer without drawing on the budget.
    """

    def __init__(self, limit: int | None, *, allowance: int = DEFAULT_ALLOWANCE) -> None:
        self.limit = limit
        self.allowance = allowance
        self.used = 0
        self._lock = threading.Lock()

    def hold(self) -> Hold:
        """A new connection's share (nothing charged yet)."""
        return Hold(self)

    def _change(self, delta: int) -> bool:
        with self._lock:
            if delta > 0 and self.limit is not None and self.used + delta > self.limit:
                return False
            self.used += delta
            return True


class Hold:
    """What one connection draws from a :class:`BufferBudget`."""

    __slots__ = ("budget", "charged")

    def __init__(self, budget: BufferBudget) -> None:
        self.budget = budget
        self.charged = 0

    def update(self, size: int) -> bool:
        """The connection now buffers ``size`` bytes; False (nothing changes) when the budget
        cannot cover them: the caller then refuses the connection's request."""
        charge = size - self.budget.allowance
        if charge <= 0:
            if self.charged:
                self.budget._change(-self.charged)
                self.charged = 0
            return True
        if not self.budget._change(charge - self.charged):
            return False
        self.charged = charge
        return True

    def release(self) -> None:
        """The connection is gone: return everything it drew (idempotent)."""
        self.update(0)
