"""The HTTP front end: HTTP/1.1 and WebSocket on one port, a thread per connection, and the
route tables (mounts) of whatever is served there: OpenEnv, the arena, the dashboard.

Each accepted connection gets a thread that reads requests (keep-alive, pipelining) with
:class:`~envwire.sockets.http.HttpConnection`. Every request passes the :class:`Guard`'s
Host/Origin check first; then each mount, in order, may answer it. A request for a WebSocket is
offered to the mounts the same way: the one that takes it returns a :class:`WebSocketHandler`,
and the connection becomes that WebSocket (:class:`~envwire.sockets.websocket.WebSocketChannel`)
until the handler returns. Handlers and mounts run in the connection's own thread (never an
event loop), so an inline env that hangs stalls only its connection.

One timer thread pings idle WebSockets and drops those that stop answering. Protocol errors,
refused requests and dropped clients are logged at INFO with the peer's address (rate-limited).
The settings are :class:`~envwire.settings.HttpSettings`.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from envwire.errors import CapacityError, EnvTimeoutError, EnvwireError
from envwire.protocols.http.http11 import Request, Response, json_response, response_bytes
from envwire.protocols.http.websocket import handshake_problem
from envwire.server.http.guard import Guard
from envwire.server.listener import BACKLOG, HOT_WINDOW, PARK_CHECK, ThreadedListener
from envwire.server.parking import Parking
from envwire.server.ratelog import RateLimitedLog
from envwire.server.security.addresses import address_of
from envwire.server.security.admission import ConnectionLimits, Ticket
from envwire.server.threads import ThreadPool
from envwire.settings import HttpSettings
from envwire.sockets import Stream
from envwire.sockets.buffers import DEFAULT_MAX_BUFFERED, BufferBudget
from envwire.sockets.http import HttpConnection, Waiting
from envwire.sockets.websocket import WebSocketChannel

__all__ = ["STRANGER_IDLE", "HttpFrontEnd", "Mount", "OnHang", "PlainMount", "WebSocketHandler"]

log = logging.getLogger("envwire.http")
#: What a client provokes (protocol errors, dropped connections): INFO, rate-limited.
_peer_log = RateLimitedLog(log)
#: Close reasons that are the client's doing and worth a line (not a plain goodbye).
_LOGGED_CLOSES = ("bad request", "protocol error", "the client did not read", "no answer")


def _not_found() -> Response:
    return json_response(404, '{"detail":"Not Found"}')


#: Seconds a connection that has shown no token may stay idle, when the server has tokens: a
#: stranger's keep-alive connection does not hold a slot for ``http_keepalive``.
STRANGER_IDLE = 5.0

#: Called from the watchdog's thread when an inline env hangs in a request.
OnHang = Callable[[EnvTimeoutError], None]


class WebSocketHandler(Protocol):
    """Serves one WebSocket, message by message, in whichever pool thread has its work."""

    def opened(self, channel: WebSocketChannel, forsake: Callable[[], None]) -> bool:
        """The handshake is done; False when the handler refuses (it told the client why).
        ``forsake`` gives the place of the thread serving it now back to the pool (for an
        env that hung in it)."""
        ...

    def message(self, text: str | bytes) -> bool:
        """Answer one message; False when the session is over."""
        ...

    def closed(self) -> None:
        """The WebSocket is over, whatever ended it: free what the handler holds."""
        ...

    def abort(self) -> None:
        """The connection is being dropped (another thread; idempotent)."""
        ...


class Mount(Protocol):
    """One route table on the HTTP front end."""

    def check(self, head: Request) -> Response | bool | None:
        """The mount's verdict on a request from its head alone, before any of its body is
        read: None when the path is not this mount's, True to read it, an answer to refuse it
        (a missing token); the connection closes after a refusal."""
        ...

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        """The answer to a plain request, or None when it is not this mount's."""
        ...

    def upgrade(self, request: Request) -> WebSocketHandler | Response | None:
        """A handler for a WebSocket request, a refusal, or None when it is not this mount's."""
        ...

    def body_limit(self, request: Request) -> int | None:
        """The largest body this mount takes for ``request`` (None: the front end's limit)."""
        ...

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        """This mount's answer to its request refused before its body was read (None: the
        front end's)."""
        ...

    def start(self, front: HttpFrontEnd) -> None:
        """The front end listens now (``front.host``, ``front.port``)."""
        ...

    def stop(self) -> None:
        """The front end stopped: free what the mount holds."""
        ...


class PlainMount:
    """A mount of plain requests only: subclasses define ``respond`` (and ``check``, for the
    paths whose heads they judge); no WebSocket, the front end's body limit, nothing to start
    or stop."""

    def check(self, head: Request) -> Response | bool | None:
        return None

    def upgrade(self, request: Request) -> WebSocketHandler | Response | None:
        return None

    def body_limit(self, request: Request) -> int | None:
        return None

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        return None

    def start(self, front: HttpFrontEnd) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""


class HttpFrontEnd(ThreadedListener["_Connection"]):
    """Serves its mounts on ``host:port`` (port 0 picks one).

    Args:
        settings: the port, keep-alive, message size and WebSocket settings.
        guard: the checks every request passes (its security's TLS serves the port), and the
            answer to errors of the front end's own (its JSON error body).
        limits: the connection bounds.
        mounts: the route tables, asked in order.
        browsers: check every request's ``Host`` and ``Origin`` (a port browsers may reach;
            off for a port that only machines scrape).
        budget: the receive buffers all connections of every front end share (HTTP bodies and
            WebSocket messages in progress draw on it).
        threads: the server's pool that serves connections while they have work; ``parking``
            where they wait for their clients meanwhile, without a thread.

    With tokens on, a connection that has shown none may stay idle for
    :data:`STRANGER_IDLE` seconds, not ``http_keepalive``, and is the first dropped when the
    front end is full.
    """

    name = "http"
    thread_name = "envwire-http"
    #: Whether requests carry their client's address in ``envwire-forwarded`` (set on a
    #: worker's relay socket alone: :mod:`envwire.server.relay`).
    forwarded = False

    def __init__(
        self,
        settings: HttpSettings,
        *,
        host: str,
        guard: Guard,
        limits: ConnectionLimits,
        mounts: Sequence[Mount],
        browsers: bool = True,
        budget: BufferBudget | None = None,
        threads: ThreadPool | None = None,
        parking: Parking | None = None,
    ) -> None:
        super().__init__(limits, guard.security.tls, threads=threads, parking=parking)
        self.budget = budget or BufferBudget(DEFAULT_MAX_BUFFERED)
        self.settings = settings
        self.host, self.port = host, settings.port or 0
        self.guard = guard
        self.mounts = tuple(mounts)
        self.refusal_response = guard.refusal
        self.browsers = browsers

    def start(self) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), start accepting, and tell the
        mounts."""
        address = self.listen(BACKLOG)
        threading.Thread(
            target=self._keepalive_loop, name="envwire-http-keepalive", daemon=True
        ).start()
        for mount in self.mounts:
            mount.start(self)
        return address

    def connection(self, sock: Stream, peer: object, ticket: Ticket) -> _Connection:
        return _Connection(self, sock, peer, ticket)

    def refusal(self, error: EnvwireError) -> bytes:
        """A refused connection's answer: 503 with the JSON error body."""
        return response_bytes(self.refusal_response(error), keep_alive=False)

    def evictable(self, conn: _Connection) -> bool:
        """An idle connection that has shown no token, when the server has tokens."""
        return self.guard.security.tokens is not None and not conn.ticket.trusted

    def check(self, head: Request) -> Response | None:
        """A request's head: the Host/Origin rule, then the first mount that claims its path;
        a refusal, or None to read the request."""
        refused = self.guard.browser(head) if self.browsers else None
        if refused is not None:
            return refused
        for mount in self.mounts:
            verdict = mount.check(head)
            if isinstance(verdict, Response):
                return verdict
            if verdict is not None:
                break
        return None

    def respond(self, request: Request, on_hang: OnHang) -> Response:
        """The first mount's answer to a plain request (404 when none takes it)."""
        for mount in self.mounts:
            response = mount.respond(request, on_hang)
            if response is not None:
                return response
        return _not_found()

    def _keepalive_loop(self) -> None:
        """One timer for every WebSocket: ping the idle ones, drop the unresponsive ones."""
        interval, timeout = self.settings.ping_interval, self.settings.ping_timeout
        step = min(interval or 2.0, timeout or 2.0) / 4
        # At least twice a second: busy connections answer their clients' pings from here.
        while not self._stopping.wait(min(max(step, 0.02), 0.5)):
            now = time.monotonic()
            with self._lock:
                channels = [c.channel for c in self._connections if c.channel is not None]
            for channel in channels:
                channel.keepalive(now)

    def stop(self) -> None:
        """Stop accepting, drop every connection, and tell the mounts."""
        for conn in self.stop_listening():
            conn.abort()
        for mount in self.mounts:
            mount.stop()


class _Connection:
    """One client connection: HTTP requests, possibly upgraded to a WebSocket, served in steps
    (:class:`~envwire.server.listener.Served`)."""

    def __init__(self, front: HttpFrontEnd, sock: Stream, peer: object, ticket: Ticket) -> None:
        self.front = front
        self.peer = peer
        self.ticket = ticket
        self.client = address_of(peer)
        self.peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.scheme = "https" if front.tls is not None else "http"
        if not front.forwarded:  # TCP (the relay's are Unix sockets)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        settings = front.settings
        self.http = HttpConnection(
            sock,
            max_body=settings.max_message_size,
            send_timeout=settings.send_timeout,
            policies=front.mounts,
            on_head=self._check_head,
            hold=front.budget.hold(),
        )
        self.channel: WebSocketChannel | None = None
        self.handler: WebSocketHandler | None = None
        self.first = True  # the first request is the connection's handshake
        self.over = False

    def fileno(self) -> int:
        return self.http.sock.fileno()

    def serve(self) -> float | None:
        """Answer requests (or WebSocket messages) while the client keeps sending: then the
        time until which it may stay silent, None when the connection is over."""
        try:
            if self.channel is not None:
                return self._messages()
            return self._requests()
        except Exception:
            log.exception("connection %s failed", self.peer)
            self.over = True
            return None

    def expire(self) -> float | None:
        """The client stayed silent past its time: close (a WebSocket first checks that its
        client is alive, and goes on waiting when it is)."""
        if self.channel is not None and not self.channel.closed:
            return self._silent_until()
        if self.http.began is not None:
            self.http.close_reason = "the request did not arrive whole in time"
        self.over = True
        return None

    def abort(self) -> None:
        """Drop the connection (idempotent, any thread), and say why in the log."""
        if self.handler is not None:
            handler, self.handler = self.handler, None
            handler.closed()
        if self.channel is not None:
            self.channel.abort()
        self.http.abort()
        if self.over:
            return
        self.over = True
        channel = self.channel
        reason = channel.close_reason if channel is not None else self.http.close_reason
        if reason.startswith(_LOGGED_CLOSES):
            _peer_log("%s: connection closed: %s", self.peer, reason)
        elif reason:
            log.debug("%s: connection closed: %s", self.peer, reason)

    def _silent_until(self) -> float:
        """Until when the client may stay silent: the first request within the handshake's
        deadline, a request begun within ``request_timeout``, between requests the keep-alive
        time; a WebSocket until its next liveness check."""
        now = time.monotonic()
        settings = self.front.settings
        if self.channel is not None:
            interval = settings.ping_interval or PARK_CHECK
            return now + min(interval, PARK_CHECK)
        if self.first:
            return self.ticket.deadline
        if self.http.began is not None:
            return self.http.began + self.front.admission.limits.handshake_timeout
        keepalive = settings.http_keepalive
        if self.front.guard.security.tokens is not None and not self.ticket.trusted:
            keepalive = min(keepalive or STRANGER_IDLE, STRANGER_IDLE)
        return math.inf if keepalive is None else now + keepalive

    def _check_head(self, head: Request) -> Response | None:
        """A request's head, before any of its body is read: the front end's checks, then,
        for a client that shows an accepted token, the token's count instead of the address's.
        """
        head.client, head.peer, head.scheme = self.client, self.peer_text, self.scheme
        if self.front.forwarded:  # passed by another worker: its client's address
            client, _, rest = head.header("envwire-forwarded").partition(" ")
            peer, _, scheme = rest.partition(" ")
            head.client, head.peer, head.scheme = client, peer, scheme or "http"
        refused = self.front.check(head)
        if refused is not None:
            return refused
        if not self.ticket.trusted:
            principal = self.front.guard.principal(head)
            if principal is not None:
                try:
                    self.ticket.authenticated(principal)
                except CapacityError as exc:
                    return self.front.refusal_response(exc)
        return None

    def _requests(self) -> float | None:
        front = self.front
        while not front.stopping:
            deadline = self.ticket.deadline if self.first else None
            if not self.first and self.http.began is not None:
                deadline = self.http.began + front.admission.limits.handshake_timeout
            request = self.http.next_request(HOT_WINDOW, deadline)
            if isinstance(request, Waiting):
                return self._silent_until()
            if self.first:
                self.first = False
                self.ticket.passed()
            if request is None:
                return None
            if isinstance(request, Response):
                self.http.send(request)
                return None
            if "websocket" in request.header("upgrade").lower():
                return self._websocket(request)
            self.thread = threading.get_ident()
            response = front.respond(request, self._hung)
            if not self.http.send(response, head=request.method == "HEAD"):
                return None
        return None

    def _forsake(self) -> None:
        """The env hung in the thread serving this connection: its place goes to another."""
        self.front.threads.forsake(self.thread)

    def _hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: an inline env hung in this connection's request."""
        self._forsake()
        log.warning("%s: %s", self.peer, error)
        self.http.send(self.front.refusal_response(error))
        self.http.abort()

    def _websocket(self, request: Request) -> float | None:
        front = self.front
        taken: WebSocketHandler | Response | None = None
        for mount in front.mounts:
            taken = mount.upgrade(request)
            if taken is not None:
                break
        if taken is None:
            self.http.send(_not_found())
            return None
        if isinstance(taken, Response):
            self.http.send(taken)
            return None
        problem = handshake_problem(request)
        if problem is not None:
            self.http.send(json_response(400, json.dumps({"detail": problem})))
            return None
        trailing = self.http.accept_websocket(request)
        settings = front.settings
        self.channel = WebSocketChannel(
            self.http.sock,
            trailing,
            max_size=settings.max_message_size,
            max_fragments=settings.max_fragments,
            ping_interval=settings.ping_interval,
            ping_timeout=settings.ping_timeout,
            send_timeout=settings.send_timeout,
            max_queued=settings.max_queued,
            hold=self.http.hold,
        )
        self.thread = threading.get_ident()
        if not taken.opened(self.channel, self._forsake):
            self.channel.close()
            return None
        self.handler = taken
        return self._messages()

    def _messages(self) -> float | None:
        """Answer the WebSocket's messages while they keep coming."""
        channel, handler = self.channel, self.handler
        assert channel is not None
        while handler is not None:
            text = channel.receive(wait=HOT_WINDOW)
            if text is None:
                if channel.closed:
                    break
                return self._silent_until()
            self.thread = threading.get_ident()
            if not handler.message(text):
                break
        channel.close()
        return None
