"""The TCP listener of the front ends that read their sockets themselves (gym-socket, HTTP):
a thread while a connection has work, none while it waits for its client.

Accepted connections pass :class:`~envwire.server.security.admission.Admission` first
(connection caps per front end and per client address, a bounded number of connections in their
handshake, a deadline for the handshake, counted from when the server starts reading the
connection), then TLS when the server has a certificate, then go to the front end's connection
object. That object is served in steps on the server's :class:`~envwire.server.threads.ThreadPool`:
:meth:`Served.serve` reads and answers what the client sent for as long as its requests keep
coming, then returns the time until which the connection may wait silent; it waits in the
:class:`~envwire.server.parking.Parking`, holding no thread, until its client sends again (the
next step) or that time passes (:meth:`Served.expire`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from envwire.errors import EnvwireError
from envwire.server.parking import Parking
from envwire.server.ratelog import refusals
from envwire.server.security.addresses import address_of
from envwire.server.security.admission import Admission, ConnectionLimits, Ticket
from envwire.server.threads import ThreadPool
from envwire.sockets import Stream
from envwire.sockets.tls import TlsSocket

__all__ = ["BACKLOG", "HOT_WINDOW", "PARK_CHECK", "Served", "ThreadedListener"]

log = logging.getLogger("envwire.listener")

#: Connections the kernel queues before they are accepted (it caps this at net.core.somaxconn,
#: 4096 on recent Linux; raise that for bursts larger still): a burst of thousands of connects
#: waits there, and in the admission's queue, not refused.
BACKLOG = 65535

#: Seconds a connection that has just been answered keeps its thread, waiting for its client's
#: next request, before it parks: a client that steps as fast as it can never parks.
HOT_WINDOW = 0.05


#: The longest a connection waits parked before the listener looks at it again: one dropped
#: meanwhile by another thread (a reaper, a keepalive check) is let go within that time.
PARK_CHECK = 30.0


class Served(Protocol):
    """A front end's object serving one admitted connection, in steps.

    ``serve`` and ``expire`` return when the connection may next be woken: a
    ``time.monotonic()`` time to wait silent until (``math.inf``: no limit), or None when the
    connection is over (closed).
    """

    #: The connection's admission ticket (ended when the listener forgets the connection).
    ticket: Ticket

    @property
    def over(self) -> bool:
        """True once the connection is over (closed, or dropped by another thread)."""
        ...

    def fileno(self) -> int:
        """The socket to wait on."""
        ...

    def serve(self) -> float | None:
        """In a pool thread: read and answer what the client sent, while it keeps sending."""
        ...

    def expire(self) -> float | None:
        """In a pool thread: the time ``serve`` returned has passed without a word."""
        ...

    def abort(self) -> None:
        """Drop the connection now (any thread; idempotent)."""
        ...


C = TypeVar("C", bound=Served)


def _waiting(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes (or an end of stream, or an error) to read now."""
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # closed meanwhile
        return False


class _Slot(Generic[C]):
    """What the parking holds for one connection: its steps, and what follows each."""

    __slots__ = ("conn", "graced", "listener", "sock", "ticket", "tls", "until")

    def __init__(self, listener: ThreadedListener[C], ticket: Ticket) -> None:
        self.listener = listener
        self.ticket = ticket
        self.sock: Stream = ticket.sock
        self.tls: TlsSocket | None = None
        self.conn: C | None = None
        self.until = math.inf  # the time the connection itself may wait until
        self.graced = False  # bytes found waiting at an expiry were served once

    def fileno(self) -> int:
        return self.sock.fileno()

    def resume(self) -> None:
        self.listener.unparked(self)
        if self.conn is None:
            self._open()
        else:
            self._next(self.conn.serve)

    def expire(self) -> None:
        self.listener.unparked(self)
        if not self.graced and (self.conn is None or time.monotonic() >= self.until):
            # Bytes that came while the expiry waited for a thread are served, once: in a
            # burst the server, not the client, may be what was late.
            self.graced = True
            if _waiting(self.ticket.sock):
                self.resume()
                return
        if self.conn is None:  # silent in the TLS handshake past the ticket's deadline
            log.debug("TLS handshake with %s did not finish in time", self.ticket.peer)
            self._end()
        elif time.monotonic() >= self.until:
            self._next(self.conn.expire)
        elif self.conn.over:  # dropped by another thread while parked
            self._next(lambda: None)
        else:
            self._park(self.until)

    def _open(self) -> None:
        """TLS first (as far as the bytes that came allow), then the front end's connection."""
        listener = self.listener
        if listener.stopping:
            self._end()
            return
        if listener.tls is not None:
            if self.tls is None:
                self.tls = TlsSocket(self.ticket.sock, listener.tls, server_side=True)
            try:
                done = self.tls.handshake_step(HOT_WINDOW)
            except (OSError, ssl.SSLError) as exc:
                log.debug("TLS handshake with %s failed: %s", self.ticket.peer, exc)
                self._end()
                return
            if not done:
                listener.parking.park(self, self.ticket.deadline)
                return
            self.sock = self.tls
        self.conn = listener.connection(self.sock, self.ticket.peer, self.ticket)
        listener.track(self.conn)
        self._next(self.conn.serve)

    def _next(self, step: Callable[[], float | None]) -> None:
        assert self.conn is not None
        conn = self.conn
        try:
            until = step()
        except Exception:
            log.exception("connection %s failed", self.ticket.peer)
            until = None
        if until is None or self.listener.stopping:
            conn.abort()
            self.listener.forget(conn)
            return
        self._park(until)

    def _park(self, until: float) -> None:
        self.until = until
        self.listener.parked(self)
        self.listener.parking.park(self, min(until, time.monotonic() + PARK_CHECK))

    def _end(self) -> None:
        self.ticket.sock.close()
        self.ticket.end()


class ThreadedListener(Generic[C]):
    """A TCP listener whose connections are served in steps on a shared thread pool.

    Subclasses set ``host``, ``port`` and ``thread_name``, and implement :meth:`connection`,
    which wraps a socket (a :class:`~envwire.sockets.tls.TlsSocket` under TLS) in a
    :class:`Served` object of type ``C``, and :meth:`refusal`, the bytes that tell a refused
    client why. The connection object calls ``ticket.passed()`` once its handshake is done.

    Args:
        limits: the connection bounds (default: :class:`ConnectionLimits`'s).
        tls: the server's TLS context, or None for plain TCP.
        threads: the pool that serves connections (a pool of the listener's own by default).
        parking: where connections wait (one of the listener's own by default).
    """

    host: str
    port: int
    #: The front end's name in logs.
    name = "listener"
    thread_name = "envwire-conn"

    def __init__(
        self,
        limits: ConnectionLimits | None = None,
        tls: ssl.SSLContext | None = None,
        *,
        threads: ThreadPool | None = None,
        parking: Parking | None = None,
    ) -> None:
        self._listener: socket.socket | None = None
        self._adopted: socket.socket | None = None
        self._connections: set[C] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.tls = tls
        self.threads = threads or ThreadPool(1024, name=self.thread_name)
        self.parking = parking or Parking(self.threads)
        self._own_parking = parking is None
        self.admission = Admission(
            limits or ConnectionLimits(), self._start, self._refuse, self._evict
        )
        #: Parked connections, oldest first (the candidates for eviction).
        self._parked: dict[_Slot[C], None] = {}

    def connection(self, sock: Stream, peer: object, ticket: Ticket) -> C:
        """The object serving one admitted socket; ``peer`` is its address as ``accept``
        gave it."""
        raise NotImplementedError

    def refusal(self, error: EnvwireError) -> bytes:
        """What a refused connection is sent before it is closed (the protocol's error)."""
        return b""

    @property
    def stopping(self) -> bool:
        """Whether the listener is shutting down."""
        return self._stopping.is_set()

    def adopt(self, sock: socket.socket) -> None:
        """Accept on ``sock``, a socket already listening (one the server's supervisor bound
        for all its workers, or a Unix socket), instead of binding one."""
        self._adopted = sock

    def listen(self, backlog: int) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), then start accepting."""
        listener = self._adopted
        if listener is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(backlog)
        self._listener = listener
        if listener.family != socket.AF_UNIX:
            self.port = listener.getsockname()[1]
        self.parking.start()
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
        """A connection may begin its handshake now (its deadline set): a thread serves it."""
        self.threads.submit(_Slot(self, ticket).resume)

    def _refuse(self, sock: socket.socket, error: EnvwireError) -> None:
        """Tell a refused client why without waiting on it (TLS clients just see the close)."""
        with contextlib.suppress(OSError):  # a client already gone is not logged
            refusals(self.name, address_of(sock.getpeername()), str(error))
        try:
            data = self.refusal(error) if self.tls is None else b""
            if data:
                sock.send(data, socket.MSG_DONTWAIT)
        except OSError:
            pass
        finally:
            sock.close()

    def parked(self, slot: _Slot[C]) -> None:
        """``slot``'s connection waits for its client (the parking holds it)."""
        with self._lock:
            self._parked[slot] = None

    def unparked(self, slot: _Slot[C]) -> None:
        """``slot``'s connection has a thread again (or is expired)."""
        with self._lock:
            self._parked.pop(slot, None)

    def evictable(self, conn: C) -> bool:
        """Whether an idle ``conn`` may be dropped to make room for a new connection (none by
        default; a front end with tokens: those that showed none)."""
        return False

    def _evict(self) -> bool:
        """Drop the longest-idle evictable connection (the accept loop, when full)."""
        with self._lock:
            victim = next(
                (s for s in self._parked if s.conn is not None and self.evictable(s.conn)), None
            )
            if victim is None:
                return False
            del self._parked[victim]
        assert victim.conn is not None
        log.info("%s: an idle connection without a token, closed to make room", victim.ticket.peer)
        victim.conn.abort()
        self.forget(victim.conn)
        return True

    def revoke(self, still_valid: Callable[[str], bool]) -> int:
        """Close every connection whose client showed a token no longer accepted
        (``still_valid(principal)`` is False); how many were closed."""
        with self._lock:
            gone = [c for c in self._connections if not still_valid(c.ticket.principal)]
        for conn in gone:
            log.info("%s: its token was revoked; connection closed", conn.ticket.peer)
            conn.abort()
            self.forget(conn)
        return len(gone)

    def track(self, conn: C) -> None:
        """Count ``conn`` among the open connections (until :meth:`forget`)."""
        with self._lock:
            self._connections.add(conn)

    def forget(self, conn: C) -> None:
        """A connection ended: stop tracking it and free its slot (idempotent)."""
        with self._lock:
            self._connections.discard(conn)
        conn.ticket.end()

    def connection_count(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._connections)

    def stop_listening(self) -> list[C]:
        """Stop accepting; the connections still open, for the caller to drop."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        for ticket in self.admission.stop():
            ticket.sock.close()
            ticket.end()
        if self._own_parking:
            self.parking.stop()
        with self._lock:
            return list(self._connections)
