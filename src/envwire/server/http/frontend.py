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
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from envwire.errors import EnvTimeoutError, EnvwireError
from envwire.protocols.http.http11 import Request, Response, json_response, response_bytes
from envwire.protocols.http.websocket import handshake_problem
from envwire.server.http.guard import Guard
from envwire.server.listener import ThreadedListener
from envwire.server.ratelog import RateLimitedLog
from envwire.server.security.addresses import address_of
from envwire.server.security.admission import ConnectionLimits, Ticket
from envwire.settings import HttpSettings
from envwire.sockets import Stream
from envwire.sockets.http import HttpConnection
from envwire.sockets.websocket import WebSocketChannel

__all__ = ["HttpFrontEnd", "Mount", "OnHang", "PlainMount", "WebSocketHandler"]

log = logging.getLogger("envwire.http")
#: What a client provokes (protocol errors, dropped connections): INFO, rate-limited.
_peer_log = RateLimitedLog(log)
#: Close reasons that are the client's doing and worth a line (not a plain goodbye).
_LOGGED_CLOSES = ("bad request", "protocol error", "the client did not read", "no answer")


def _not_found() -> Response:
    return json_response(404, '{"detail":"Not Found"}')


#: Called from the watchdog's thread when an inline env hangs in a request.
OnHang = Callable[[EnvTimeoutError], None]


class WebSocketHandler(Protocol):
    """Serves one WebSocket, in its connection's thread, once the handshake is done."""

    def run(self, channel: WebSocketChannel) -> None:
        """Serve messages until the session ends (the channel is closed afterwards)."""
        ...

    def abort(self) -> None:
        """The connection is being dropped (another thread; idempotent)."""
        ...


class Mount(Protocol):
    """One route table on the HTTP front end."""

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
    """A mount of plain requests only: subclasses define ``respond``; no WebSocket, the front
    end's body limit, nothing to start or stop."""

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
    """

    name = "http"
    thread_name = "envwire-http"

    def __init__(
        self,
        settings: HttpSettings,
        *,
        host: str,
        guard: Guard,
        limits: ConnectionLimits,
        mounts: Sequence[Mount],
        browsers: bool = True,
    ) -> None:
        super().__init__(limits, guard.security.tls)
        self.settings = settings
        self.host, self.port = host, settings.port or 0
        self.guard = guard
        self.mounts = tuple(mounts)
        self.refusal_response = guard.refusal
        self.browsers = browsers

    def start(self) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), start accepting, and tell the
        mounts."""
        address = self.listen(1024)
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

    @property
    def stopping(self) -> bool:
        """Whether the front end is shutting down."""
        return self._stopping.is_set()

    def connection_count(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._connections)

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
    """One client connection: HTTP requests, possibly upgraded to a WebSocket."""

    def __init__(self, front: HttpFrontEnd, sock: Stream, peer: object, ticket: Ticket) -> None:
        self.front = front
        self.peer = peer
        self.ticket = ticket
        self.client = address_of(peer)
        self.peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.scheme = "https" if front.tls is not None else "http"
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        settings = front.settings
        self.http = HttpConnection(
            sock,
            max_body=settings.max_message_size,
            keepalive=settings.http_keepalive,
            send_timeout=settings.send_timeout,
            policies=front.mounts,
        )
        self.channel: WebSocketChannel | None = None
        self.handler: WebSocketHandler | None = None

    def run(self) -> None:
        try:
            self._serve()
        except Exception:
            log.exception("connection %s failed", self.peer)
        finally:
            self.abort()
            self.front.forget(self)
            channel = self.channel
            reason = channel.close_reason if channel is not None else self.http.close_reason
            if reason.startswith(_LOGGED_CLOSES):
                _peer_log("%s: connection closed: %s", self.peer, reason)
            elif reason:
                log.debug("%s: connection closed: %s", self.peer, reason)

    def abort(self) -> None:
        if self.handler is not None:
            self.handler.abort()
        if self.channel is not None:
            self.channel.abort()
        self.http.abort()

    def _serve(self) -> None:
        # The first request is the connection's handshake: it has the ticket's deadline.
        deadline: float | None = time.monotonic() + self.ticket.remaining()
        front = self.front
        while not front.stopping:
            request = self.http.next_request(deadline)
            if deadline is not None:
                deadline = None
                self.ticket.passed()
            if request is None:
                return
            if isinstance(request, Response):
                self.http.send(request)
                return
            request.client, request.peer, request.scheme = self.client, self.peer_text, self.scheme
            refused = front.guard.browser(request) if front.browsers else None
            if refused is not None:  # a foreign page's request: answer, and hang up
                self.http.keep_alive = False
                self.http.send(refused)
                return
            if "websocket" in request.header("upgrade").lower():
                self._websocket(request)
                return
            response = front.respond(request, self._hung)
            if not self.http.send(response, head=request.method == "HEAD"):
                return

    def _hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: an inline env hung in this connection's request."""
        log.warning("%s: %s", self.peer, error)
        self.http.send(self.front.refusal_response(error))
        self.http.abort()

    def _websocket(self, request: Request) -> None:
        front = self.front
        taken: WebSocketHandler | Response | None = None
        for mount in front.mounts:
            taken = mount.upgrade(request)
            if taken is not None:
                break
        if taken is None:
            self.http.send(_not_found())
            return
        if isinstance(taken, Response):
            self.http.send(taken)
            return
        problem = handshake_problem(request)
        if problem is not None:
            self.http.send(json_response(400, json.dumps({"detail": problem})))
            return
        trailing = self.http.accept_websocket(request)
        settings = front.settings
        self.handler = taken
        self.channel = WebSocketChannel(
            self.http.sock,
            trailing,
            max_size=settings.max_message_size,
            ping_interval=settings.ping_interval,
            ping_timeout=settings.ping_timeout,
            send_timeout=settings.send_timeout,
            max_queued=settings.max_queued,
        )
        taken.run(self.channel)
        self.channel.close()
