"""The TCP listener of the blocking front ends: a thread per admitted connection.

Accepted connections pass :class:`~envwire.server.security.admission.Admission` first
(connection caps per front end and per client address, a bounded number of connections in
their handshake, a deadline for the handshake), then TLS when the server has a certificate,
then go to the front end's connection object in a thread of their own.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from typing import Generic, Protocol, TypeVar

from envwire.errors import EnvwireError
from envwire.server.security.addresses import address_of
from envwire.server.security.admission import Admission, ConnectionLimits, Ticket
from envwire.sockets import Stream
from envwire.sockets.tls import TlsSocket

__all__ = ["Served", "ThreadedListener"]

log = logging.getLogger("envwire.listener")


class Served(Protocol):
    """A front end's object serving one admitted connection."""

    #: The connection's admission ticket (ended when the listener forgets the connection).
    ticket: Ticket

    def run(self) -> None:
        """Serve the connection until it ends (the body of its thread)."""
        ...


C = TypeVar("C", bound=Served)


class ThreadedListener(Generic[C]):
    """A TCP listener with a thread per admitted connection (the blocking front ends' base).

    Subclasses set ``host``, ``port`` and ``thread_name``, and implement :meth:`connection`,
    which wraps a socket (a :class:`~envwire.sockets.tls.TlsSocket` under TLS) in a
    :class:`Served` object of type ``C`` (its ``run()`` is the thread's body), and
    :meth:`refusal`, the bytes that tell a refused client why. The connection object calls
    ``ticket.passed()`` once its handshake is done, and :meth:`forget` when it ends.

    Args:
        limits: the connection bounds (default: :class:`ConnectionLimits`'s).
        tls: the server's TLS context, or None for plain TCP.
    """

    host: str
    port: int
    thread_name = "envwire-conn"

    def __init__(
        self, limits: ConnectionLimits | None = None, tls: ssl.SSLContext | None = None
    ) -> None:
        self._listener: socket.socket | None = None
        self._connections: set[C] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.tls = tls
        self.admission = Admission(limits or ConnectionLimits(), self._start, self._refuse)

    def connection(self, sock: Stream, peer: object, ticket: Ticket) -> C:
        """The object serving one admitted socket; ``peer`` is its address as ``accept``
        gave it."""
        raise NotImplementedError

    def refusal(self, error: EnvwireError) -> bytes:
        """What a refused connection is sent before it is closed (the protocol's error)."""
        return b""

    def listen(self, backlog: int) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), then start accepting."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(backlog)
        self._listener = listener
        self.port = listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name=self.thread_name, daemon=True).start()
        return self.host, self.port

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            self.admission.admit(sock, peer, address_of(peer))
            # The loop's locals would keep the last socket alive until the next accept.
            del sock

    def _start(self, ticket: Ticket) -> None:
        name = f"{self.thread_name}-{ticket.peer}"
        threading.Thread(target=self._serve, args=(ticket,), name=name, daemon=True).start()

    def _serve(self, ticket: Ticket) -> None:
        """A connection's thread: TLS (within the handshake deadline), then the front end."""
        sock: Stream = ticket.sock
        if self._stopping.is_set():
            sock.close()
            ticket.end()
            return
        if self.tls is not None:
            try:
                secure = TlsSocket(ticket.sock, self.tls, server_side=True)
                secure.handshake(ticket.remaining())
            except (OSError, ssl.SSLError) as exc:
                log.debug("TLS handshake with %s failed: %s", ticket.peer, exc)
                ticket.sock.close()
                ticket.end()
                return
            sock = secure
        conn = self.connection(sock, ticket.peer, ticket)
        conn.ticket = ticket
        with self._lock:
            self._connections.add(conn)
        try:
            conn.run()
        finally:
            self.forget(conn)

    def _refuse(self, sock: socket.socket, error: EnvwireError) -> None:
        """Tell a refused client why without waiting on it (TLS clients just see the close)."""
        try:
            data = self.refusal(error) if self.tls is None else b""
            if data:
                sock.send(data, socket.MSG_DONTWAIT)
        except OSError:
            pass
        finally:
            sock.close()

    def forget(self, conn: C) -> None:
        """A connection ended: stop tracking it and free its slot (idempotent)."""
        with self._lock:
            self._connections.discard(conn)
        ticket = getattr(conn, "ticket", None)
        if ticket is not None:
            ticket.end()

    def stop_listening(self) -> list[C]:
        """Stop accepting; the connections still open, for the caller to drop."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        for ticket in self.admission.stop():
            ticket.sock.close()
            ticket.end()
        with self._lock:
            return list(self._connections)
