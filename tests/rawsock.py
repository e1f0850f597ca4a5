"""Reading a protocol's bytes by hand, for tests that speak to a server over a raw socket."""

from __future__ import annotations

import socket

__all__ = ["exact"]


def exact(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock``.

    Raises:
        ConnectionError: the peer closed the connection first (saying after how many bytes).
    """
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data
