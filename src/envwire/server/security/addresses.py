"""Per-client-address bounds: what one address may hold at once.

:class:`AddressLimiter` counts what each client address holds (connections, streams,
sessions) against a total and a per-address cap. It is thread-safe and keeps memory bounded
whatever the clients send (the arena's failed-login limits are in :mod:`envwire.arena.logins`).
"""

from __future__ import annotations

import threading
from urllib.parse import unquote

from envwire.errors import CapacityError

__all__ = ["AddressLimiter", "address_of"]


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
