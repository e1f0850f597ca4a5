"""Socket settings and TLS shared by the blocking transports, server side and client side
(TLS in :mod:`envwire.sockets.tls`)."""

from __future__ import annotations

import socket
import struct

__all__ = ["configure_stream"]


def configure_stream(sock: socket.socket, timeout: float | None) -> None:
    """Blocking mode with kernel-side timeouts, no Nagle delay.

    Python's own socket timeouts poll() before every recv and send: one more system call per
    message. ``SO_RCVTIMEO``/``SO_SNDTIMEO`` make the kernel enforce the timeout instead; a
    timed-out call raises ``BlockingIOError`` (an ``OSError``). None means wait forever.
    """
    sock.settimeout(None)
    seconds = 0.0 if timeout is None else max(timeout, 0.001)
    value = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
