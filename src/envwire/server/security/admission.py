"""Which accepted connections get a thread, and when (the threaded front ends' gate).

A connection that has not finished its handshake (a gym-socket handshake, an HTTP client's
first request, a TLS handshake) belongs to a stranger: it may never send anything. So:

- a connection past ``max_connections`` (or past ``per_address`` for its client address) is
  refused at once, with the protocol's capacity error and without a thread;
- at most ``max_pending`` connections (``pending_per_address`` per address) are in their
  handshake at once, each in its own thread; the others wait, without a thread, in arrival
  order, until a slot frees;
- the handshake has a deadline, counted from when the server starts reading the connection:
  ``handshake_timeout`` seconds for all of it, however slowly its bytes come; a connection waits
  for a slot in arrival order for at most ``queue_timeout`` seconds, then gets the protocol's
  capacity answer.

A burst of honest clients from one address therefore waits a little instead of being turned
away, while clients that never finish hold at most ``max_pending`` threads for at most
``handshake_timeout`` seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from envwire.errors import CapacityError, EnvwireError
from envwire.server.security.addresses import AddressLimiter

__all__ = ["Admission", "ConnectionLimits", "Ticket"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds of one threaded front end (None = no bound); see the module docstring."""

    max_connections: int | None = 1024
    per_address: int | None = 512
    max_pending: int | None = 64
    pending_per_address: int | None = 16
    handshake_timeout: float = 10.0
    queue_timeout: float = 60.0
    #: Connections of one token, once shown (None: as many as the front end holds).
    per_token: int | None = None


class Ticket:
    """One admitted connection: its socket, client address and handshake deadline.

    ``peer`` is the address ``accept`` gave (``(host, port)`` for IPv4), kept for logs.
    """

    def __init__(
        self, admission: Admission, sock: socket.socket, peer: object, address: str
    ) -> None:
        self.sock = sock
        self.peer = peer
        self.address = address
        #: While the connection waits for a slot, when it stops waiting; once it is read, when
        #: its handshake must be done (set when reading starts).
        self.deadline = time.monotonic() + admission.limits.queue_timeout
        #: What the connection is counted by: its client address, then the token it showed.
        self.principal = address
        self.pending = False  # holds a pending slot
        self.ended = False
        self._admission = admission

    def remaining(self) -> float:
        """Seconds left before the handshake deadline (0 when it has passed)."""
        return max(self.deadline - time.monotonic(), 0.0)

    def passed(self) -> None:
        """The handshake is done: give the pending slot to the next waiting connection."""
        self._admission.handshake_done(self)

    def authenticated(self, principal: str) -> None:
        """The client showed an accepted token (``principal`` names it): from now on the
        connection counts against the token's cap, not its address's (a token is who the
        client is; an address behind a proxy or NAT is not). Idempotent.

        Raises:
            CapacityError: the token holds as many connections as it may.
        """
        self._admission.authenticated(self, principal)

    @property
    def trusted(self) -> bool:
        """Whether the client showed an accepted token."""
        return self.principal != self.address

    def end(self) -> None:
        """The connection is over: release everything it held (idempotent)."""
        self._admission.ended(self)


class Admission:
    """Admits accepted connections (see the module docstring).

    Args:
        limits: the bounds.
        start: runs a connection whose handshake may begin (starts its thread).
        refuse: tells a connection why it is refused (best effort, never blocks) and closes it.
        evict: drops an idle connection of a client that showed no token, to make room; False
            when there is none.
    """

    def __init__(
        self,
        limits: ConnectionLimits,
        start: Callable[[Ticket], None],
        refuse: Callable[[socket.socket, EnvwireError], None],
        evict: Callable[[], bool] | None = None,
    ) -> None:
        self.limits = limits
        self._start = start
        self._refuse = refuse
        self._evict = evict
        self.connections = AddressLimiter(limits.max_connections, limits.per_address, "connections")
        self.pending = AddressLimiter(
            limits.max_pending, limits.pending_per_address, "connections in their handshake"
        )
        self._waiting: deque[Ticket] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopped = False
        self._sweeper: threading.Thread | None = None

    def admit(self, sock: socket.socket, peer: object, address: str) -> None:
        """Refuse, start or queue a connection just accepted (the accept loop's thread). When
        the front end is full, an idle connection of a client that showed no token makes room
        first, where ``evict`` finds one."""
        try:
            self.connections.acquire(address)
        except CapacityError as exc:
            full = self.limits.max_connections is not None and (
                self.connections.held() >= self.limits.max_connections
            )
            if not (full and self._evict is not None and self._evict()):
                self._refuse(sock, exc)
                return
            try:
                self.connections.acquire(address)
            except CapacityError as again:
                self._refuse(sock, again)
                return
        ticket = Ticket(self, sock, peer, address)
        with self._lock:
            self._waiting.append(ticket)
        self._start_waiting()

    def _take_slot(self, ticket: Ticket) -> bool:
        try:
            self.pending.acquire(ticket.address)
        except CapacityError:
            return False
        ticket.pending = True
        return True

    def handshake_done(self, ticket: Ticket) -> None:
        """``ticket`` finished its handshake: its pending slot goes to whoever waits."""
        with self._lock:
            held, ticket.pending = ticket.pending, False
        if held:
            self.pending.release(ticket.address)
        self._start_waiting()

    def authenticated(self, ticket: Ticket, principal: str) -> None:
        """``ticket``'s client showed a token: count it by ``principal`` (see
        :meth:`Ticket.authenticated`).

        Raises:
            CapacityError: ``principal`` holds ``limits.per_token`` connections already.
        """
        with self._lock:
            if ticket.ended or ticket.principal == principal:
                return
        self.connections.rekey(ticket.principal, principal, self.limits.per_token)
        ticket.principal = principal

    def ended(self, ticket: Ticket) -> None:
        """``ticket``'s connection is over (any thread; idempotent)."""
        with self._lock:
            if ticket.ended:
                return
            ticket.ended = True
            if ticket in self._waiting:
                self._waiting.remove(ticket)
        self.connections.release(ticket.principal)
        self.handshake_done(ticket)

    def _start_waiting(self) -> None:
        """Start every waiting connection that can have a slot now."""
        ready: list[Ticket] = []
        with self._lock:
            for ticket in list(self._waiting):
                if self._take_slot(ticket):
                    self._waiting.remove(ticket)
                    ready.append(ticket)
            if self._waiting:
                self._ensure_sweeper()
        for ticket in ready:
            # Reading starts now: the handshake's time counts from here, not from the accept.
            ticket.deadline = time.monotonic() + self.limits.handshake_timeout
            self._start(ticket)

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = threading.Thread(
                target=self._sweep, name="envwire-admission", daemon=True
            )
            self._sweeper.start()
        self._wake.notify()

    def _sweep(self) -> None:
        """Refuse waiting connections whose handshake deadline passed."""
        while True:
            with self._lock:
                while not self._stopped and not self._waiting:
                    self._wake.wait()
                if self._stopped:
                    return
                now = time.monotonic()
                expired = [t for t in self._waiting if t.deadline <= now]
                for ticket in expired:
                    self._waiting.remove(ticket)
                if not expired:
                    self._wake.wait(max(min(t.deadline for t in self._waiting) - now, 0.01))
            for ticket in expired:
                seconds = self.limits.queue_timeout
                self._refuse(
                    ticket.sock,
                    CapacityError(
                        f"the server is busy: no connection slot freed within {seconds:g} s; "
                        "try again later"
                    ),
                )
                ticket.end()

    def stop(self) -> list[Ticket]:
        """Stop the sweeper; the connections still waiting, for the caller to close."""
        with self._lock:
            self._stopped = True
            waiting = list(self._waiting)
            self._waiting.clear()
            self._wake.notify_all()
        return waiting
