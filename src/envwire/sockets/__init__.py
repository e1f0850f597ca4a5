"""Socket settings and TLS shared by the blocking transports, server side and client side
(TLS in :mod:`envwire.sockets.tls`; HTTP/1.1 in :mod:`envwire.sockets.http` and WebSocket in
:mod:`envwire.sockets.websocket`, over one blocking socket each)."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable
from typing import Final, Protocol, TypeVar

from envwire.errors import InvalidArgumentError

__all__ = [
    "MAX_BUSY_POLL_US",
    "RECV_SIZE",
    "Stream",
    "busy_poll",
    "busy_poll_seconds",
    "close_stream",
    "configure_stream",
    "receive_timeout",
    "send_buffers",
]

_T = TypeVar("_T")

#: Bytes one ``recv`` asks for. ``sock.recv(n)`` allocates ``n`` bytes first and shrinks them to
#: what arrived; glibc serves an allocation of 128 KiB or more with ``mmap`` and its shrunk
#: remainder with ``munmap``, page faults between: a 7-byte recv(256 KiB) took 28-30 µs here,
#: recv(64 KiB) 4.8. Larger messages take a few more reads.
RECV_SIZE: Final = 64 * 1024

#: The longest busy-poll window (microseconds) a client or server may ask for.
MAX_BUSY_POLL_US = 10_000
#: The most buffers one gathered write takes (Linux's IOV_MAX is 1024): longer lists, a burst
#: of small pipelined replies, are joined instead.
_MAX_GATHER = 64


class Stream(Protocol):
    """A connected blocking byte stream, as the transports use one: a ``socket.socket``, or
    a :class:`~envwire.sockets.tls.TlsSocket` standing in for one."""

    def recv(self, size: int, flags: int = 0, /) -> bytes:
        """Up to ``size`` bytes; b"" at the end of the stream."""
        ...

    def recv_into(self, buffer: bytearray | memoryview, nbytes: int = 0, flags: int = 0, /) -> int:
        """Bytes received into ``buffer``: how many (0 at the end of the stream)."""
        ...

    def send(self, data: bytes | bytearray | memoryview, flags: int = 0, /) -> int:
        """Send some of ``data``: how many bytes went."""
        ...

    def sendall(self, data: bytes | bytearray | memoryview, /) -> None:
        """Send all of ``data``."""
        ...

    def settimeout(self, timeout: float | None, /) -> None:
        """Python's own timeout of blocking calls (None: wait forever)."""
        ...

    def setsockopt(self, level: int, option: int, value: int | bytes, /) -> None:
        """Set a socket option."""
        ...

    def shutdown(self, how: int, /) -> None:
        """Shut one or both directions down."""
        ...

    def close(self) -> None:
        """Close the stream."""
        ...

    def fileno(self) -> int:
        """The file descriptor (for ``poll``)."""
        ...


def configure_stream(sock: Stream, timeout: float | None) -> None:
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


def receive_timeout(sock: Stream, timeout: float | None) -> None:
    """Change the kernel-side timeout of receives alone (one system call; sends keep theirs):
    a receive that times out raises ``BlockingIOError``. None means wait forever."""
    seconds = 0.0 if timeout is None else max(timeout, 0.001)
    value = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)


def send_buffers(sock: Stream, buffers: list[bytes | memoryview]) -> None:
    """Send ``buffers`` in order, as ``sendall`` of their concatenation would.

    On a plain socket a list of several is written by ``sendmsg``, gathered by the kernel
    from where each buffer lies, so that a large observation (an array's own memory) is not
    copied into a joined message first; the buffers are read only until this returns. TLS
    streams (no ``sendmsg``) and lists longer than one gather takes are joined and sent with
    ``sendall``.

    Raises:
        OSError: as ``sendall`` (``BlockingIOError`` when the send timeout passes).
    """
    if len(buffers) == 1:
        sock.sendall(buffers[0])
        return
    if not isinstance(sock, socket.socket) or len(buffers) > _MAX_GATHER:
        sock.sendall(b"".join(buffers))
        return
    sent = sock.sendmsg(buffers)
    size = 0
    for buffer in buffers:
        size += buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)
    if sent == size:
        return
    views = [memoryview(b).cast("B") for b in buffers]
    # A partial write (the send buffer filled up): drop what went, resume from the first
    # byte that did not.
    while views:
        while views and sent >= len(views[0]):
            sent -= len(views.pop(0))
        if not views:
            return
        views[0] = views[0][sent:]
        sent = sock.sendmsg(views)


def close_stream(sock: Stream) -> None:
    """Shut both directions down, which wakes a thread blocked in ``recv`` on it (closing
    alone does not), then close the socket. Never raises."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def busy_poll_seconds(microseconds: object) -> float:
    """A busy-poll window given in microseconds (0 = off), checked, in seconds.

    Raises:
        InvalidArgumentError: not a number from 0 to :data:`MAX_BUSY_POLL_US`.
    """
    if (
        isinstance(microseconds, bool)
        or not isinstance(microseconds, int | float)
        or not 0 <= microseconds <= MAX_BUSY_POLL_US
    ):
        raise InvalidArgumentError(
            f"busy_poll_us must be a number of microseconds from 0 (off) to {MAX_BUSY_POLL_US}, "
            f"got {microseconds!r}"
        )
    return microseconds / 1e6


def busy_poll(receive: Callable[[int], _T], seconds: float) -> _T | None:
    """``receive(MSG_DONTWAIT)`` (a ``recv`` or ``recv_into`` of a plain socket) tried again and
    again, without sleeping, for up to ``seconds``: what it returned, or None if nothing came
    (the caller then waits as usual).

    A thread that sleeps in ``recv`` is woken by the kernel when the bytes come, and that wake-up
    (a CPU leaving its idle state, on a VM an exit to the hypervisor) costs a good part of a
    loopback round trip. Polling keeps the CPU busy instead: lower latency, paid for in CPU time
    (up to ``seconds`` per call, while nothing arrives).
    """
    deadline = time.perf_counter() + seconds
    while True:
        try:
            return receive(socket.MSG_DONTWAIT)
        except BlockingIOError:
            if time.perf_counter() >= deadline:
                return None
