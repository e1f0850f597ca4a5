"""One budget for the bytes that all connections hold in receive buffers.

A connection's buffer holds what arrived and is not parsed yet: at most one packet or message
in progress, whose size its front end caps. Those caps bound one connection; the budget bounds
all of them together, so that many connections each sending a large packet slowly cannot
exhaust the server's memory. Every connection may buffer ``allowance`` bytes (one receive)
without drawing on the budget, so small requests never wait for or fail on it. When a
connection that drew on the budget lets those bytes go (its message is parsed, or it closes),
the allocator is asked to give the memory back to the system (:mod:`.memory`).
"""

from __future__ import annotations

import threading
from typing import Final

from envwire.sockets.memory import give_back

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

    __slots__ = ("budget", "charged", "drew")

    def __init__(self, budget: BufferBudget) -> None:
        self.budget = budget
        self.charged = 0
        self.drew = False  # it held a large message at some time

    def update(self, size: int) -> bool:
        """The connection now buffers ``size`` bytes; False (nothing changes) when the budget
        cannot cover them: the caller then refuses the connection's request."""
        charge = size - self.budget.allowance
        if charge <= 0:
            if self.charged:
                self.budget._change(-self.charged)
                self.charged = 0
                give_back()  # a large message is done with: its pages may go back
            return True
        if not self.budget._change(charge - self.charged):
            return False
        self.charged, self.drew = charge, True
        return True

    def release(self) -> None:
        """The connection is gone: return everything it drew (idempotent); if it ever held a
        large message, what was built for it (its replies among them) is gone too, and the
        allocator is asked again to give the memory back."""
        self.update(0)
        if self.drew:
            self.drew = False
            give_back()
