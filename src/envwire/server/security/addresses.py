"""Per-client-address bounds: what one address may hold at once.

:class:`AddressLimiter` counts what each client address holds (connections, streams,
sessions) against a total and a per-address cap. It is thread-safe and keeps memory bounded
whatever the clients send (the arena's failed-login limits are in :mod:`envwire.arena.logins`).
"""

from __future__ import annotations

import threading
from typing import Literal
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

    def acquire(self, address: str, cap: int | Literal["address"] | None = "address") -> None:
        """Take one slot for ``address``, held to ``per_address`` (or to ``cap`` when it is
        given: a token's own cap, None for none).

        Raises:
            CapacityError: the total or the address's cap is reached (the message says which,
                and never echoes more than the address).
        """
        limit = self.per_address if cap == "address" else cap
        with self._lock:
            if self.total is not None and self._count >= self.total:
                raise CapacityError(
                    f"server is at capacity ({self.total} {self.what}); try again later"
                )
            held = self._held.get(address, 0)
            if limit is not None and held >= limit:
                who = "client" if address.startswith("token ") else "address"
                raise CapacityError(
                    f"client {address[:64]} holds {held} {self.what}, the most one {who} may "
                    "hold here; close some first"
                )
            self._held[address] = held + 1
            self._count += 1

    def rekey(self, old: str, new: str, cap: int | None) -> None:
        """Count one slot of ``old`` against ``new`` instead (the total is unchanged), ``new``
        held to ``cap`` instead of ``per_address``: a connection that shows a token is counted
        by its token, not its address.

        Raises:
            CapacityError: ``new`` holds ``cap`` already (nothing changes).
        """
        with self._lock:
            held = self._held.get(new, 0)
            if cap is not None and held >= cap:
                raise CapacityError(
                    f"{new[:64]} holds {held} {self.what}, the most one client may hold here; "
                    "close some first"
                )
            before = self._held.get(old, 0)
            if before <= 0:
                return
            if before == 1:
                del self._held[old]
            else:
                self._held[old] = before - 1
            self._held[new] = held + 1

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
