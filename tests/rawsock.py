"""Reading a protocol's bytes by hand, for tests that speak to a server over a raw socket."""

from __future__ import annotations

import socket

__all__ = ["closed_by_server", "exact"]


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


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection within ``within`` seconds (reading what comes)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True
