"""TLS for the blocking transports: contexts, and a TLS stream that behaves like a socket.

:func:`server_context` loads a certificate and key; :func:`client_context` verifies servers
against the system's CAs or a given CA file. :class:`TlsSocket` runs TLS over a connected
blocking socket through memory BIOs instead of :class:`ssl.SSLSocket`, for two reasons:

- the front ends read a connection in one thread while other threads write to it (keepalive
  pings, watchdog replies); an ``SSLSocket`` may not be used from two threads at once, while
  here the TLS state is only touched under a lock and the blocking ``recv`` on the raw socket
  holds none;
- the transports set kernel-side timeouts (``SO_RCVTIMEO``) and non-blocking flags
  (``MSG_DONTWAIT``) on the raw socket, which ``SSLSocket`` cannot honour (its blocking read
  retries a timed-out ``recv`` for ever). Here a timed-out ``recv`` raises as it does on a plain
  socket.

So a :class:`TlsSocket` can stand in for the socket the transports already use: ``recv``,
``recv_into``, ``send``, ``sendall``, ``settimeout``, ``setsockopt``, ``shutdown``, ``close``,
``fileno``.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time

from envwire.errors import ConfigError

__all__ = ["TlsSocket", "client_context", "server_context"]

_RECORD = 16 * 1024 + 512  # one TLS record, with its overhead


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate chain in ``cert`` and its key in ``key``.

    Raises:
        ConfigError: a file cannot be read, or the key does not match the certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # No TLS 1.3 session tickets: they reach the client after its handshake, while it sends its
    # first request, and clients that read and write one ssl.SSLSocket from two threads (the
    # websockets sync client) then lose the connection now and then. Connections here are
    # long-lived, so resumption buys nothing.
    context.num_tickets = 0
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS certificate {cert} with key {key}: {exc}") from None
    return context


def client_context(ca: str | None = None) -> ssl.SSLContext:
    """A client context that verifies the server's certificate and name: against ``ca`` (a PEM
    file of CA certificates) when given, else against the system's CAs.

    Raises:
        ConfigError: ``ca`` cannot be read.
    """
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load CA certificates from {ca}: {exc}") from None


class TlsSocket:
    """A TLS connection over the connected socket ``raw`` (see the module docstring).

    Construct, then call :meth:`handshake`. One thread reads (:meth:`recv`); any thread may
    write (:meth:`send`, :meth:`sendall`) or end the connection (:meth:`shutdown`).

    Args:
        raw: a connected, blocking socket.
        context: a server or client context.
        server_side: which end this is.
        server_hostname: the name to verify (client side).
    """

    def __init__(
        self,
        raw: socket.socket,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
    ) -> None:
        self.raw = raw
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._in, self._out, server_side=server_side, server_hostname=server_hostname
        )
        self._lock = threading.Lock()  # the TLS state, and the order of records on the wire
        self._broken = False

    def handshake(self, timeout: float | None) -> None:
        """Run the TLS handshake, all of it within ``timeout`` seconds.

        Raises:
            ssl.SSLError: the peer's certificate or protocol was refused.
            TimeoutError: the handshake did not finish in time.
            ConnectionError: the peer closed the connection.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        previous = self.raw.gettimeout()
        try:
            self._handshake(deadline)
        finally:
            self.raw.settimeout(previous)

    def _handshake(self, deadline: float | None) -> None:
        while True:
            with self._lock:
                try:
                    self._tls.do_handshake()
                    done = True
                except ssl.SSLWantReadError:
                    done = False
                out = self._out.read()
            if out:
                self.raw.sendall(out)
            if done:
                return
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the TLS handshake did not finish in time")
                self.raw.settimeout(remaining)
            data = self.raw.recv(_RECORD)
            if not data:
                raise ConnectionError("the peer closed the connection during the TLS handshake")
            self._in.write(data)

    def handshake_step(self, wait: float) -> bool:
        """Go on with the TLS handshake as far as the peer's bytes allow, waiting at most
        ``wait`` seconds for each of them: True once it is done, False when the peer has not
        sent what comes next (call again when it has).

        Raises:
            ssl.SSLError: the peer's certificate or protocol was refused.
            ConnectionError: the peer closed the connection.
        """
        previous = self.raw.gettimeout()
        try:
            self._handshake(time.monotonic() + wait)
        except TimeoutError:
            return False
        finally:
            self.raw.settimeout(previous)
        return True

    def pending(self) -> bool:
        """Whether bytes already read from the socket wait to be decrypted (a reader must not
        wait on the socket for them)."""
        with self._lock:
            return self._tls.pending() > 0 or self._in.pending > 0

    def _decrypt(self, size: int) -> bytes | None:
        """Plaintext already received (b"" at the end of the stream), or None if none."""
        with self._lock:
            try:
                data: bytes | None = self._tls.read(size)
            except ssl.SSLWantReadError:
                data = b"" if self._in.eof else None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                data = b""
            out = self._out.read()  # TLS 1.3 may answer while reading (key updates)
            if out:
                self.raw.sendall(out)
        return data

    def recv(self, size: int, flags: int = 0) -> bytes:
        """Up to ``size`` bytes of plaintext; b"" at the end of the stream. Blocks, times out
        and honours ``MSG_DONTWAIT`` as the raw socket does.

        Raises:
            OSError: as the raw socket's ``recv`` does; ``ssl.SSLError`` for a broken record.
        """
        while True:
            data = self._decrypt(size)
            if data is not None:
                return data
            raw = self.raw.recv(max(size, _RECORD), flags)
            if raw:
                self._in.write(raw)
            else:
                self._in.write_eof()

    def recv_into(self, buffer: bytearray | memoryview, nbytes: int = 0, flags: int = 0) -> int:
        """:meth:`recv` into ``buffer``: the number of bytes written (0 at the end of the
        stream)."""
        view = memoryview(buffer)
        data = self.recv(nbytes or len(view), flags)
        view[: len(data)] = data
        return len(data)

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send all of ``data``.

        Raises:
            OSError: as the raw socket's ``sendall`` does.
        """
        with self._lock:
            if self._broken:
                raise BrokenPipeError("a previous send on this TLS connection failed")
            self._tls.write(data)
            try:
                self.raw.sendall(self._out.read())
            except OSError:
                self._broken = True
                raise

    def send(self, data: bytes | bytearray | memoryview, flags: int = 0) -> int:
        """Send ``data``: ``len(data)`` when all of it went out, 0 when not (with
        ``MSG_DONTWAIT`` and full buffers; the connection is then unusable for sending).

        Raises:
            OSError: as the raw socket's ``send`` does.
        """
        with self._lock:
            if self._broken:
                return 0
            self._tls.write(data)
            out = self._out.read()
            try:
                sent = self.raw.send(out, flags)
            except BlockingIOError:
                sent = 0
            if sent != len(out):  # half a record on the wire: nothing more can follow it
                self._broken = True
                return 0
        return len(data)

    def shutdown(self, how: int) -> None:
        """Send TLS's close_notify if no other thread is mid-send, then shut the raw socket
        down (never blocks, any thread)."""
        if self._lock.acquire(blocking=False):
            try:
                if not self._broken:
                    with contextlib.suppress(ssl.SSLError, ValueError):
                        self._tls.unwrap()
                    with contextlib.suppress(OSError):
                        self.raw.send(self._out.read(), socket.MSG_DONTWAIT)
            finally:
                self._lock.release()
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()

    def fileno(self) -> int:
        return self.raw.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self.raw.settimeout(timeout)

    def setsockopt(self, level: int, option: int, value: int | bytes) -> None:
        self.raw.setsockopt(level, option, value)

    def getpeername(self) -> object:
        """The raw socket's peer address (``(host, port)`` for IPv4, ...)."""
        return self.raw.getpeername()

    def version(self) -> str | None:
        """The negotiated TLS version (``TLSv1.3``)."""
        return self._tls.version()
