"""The OpenEnv front end: HTTP and WebSocket on one port, a thread per connection.

Each accepted connection gets a thread that reads HTTP requests (keep-alive) and answers them
with the :class:`~envwire.frontends.openenv.routes.Router`, after giving each of the front end's
``mounts`` (other route tables on the same port, such as the arena's) the first say; a request
that asks for a WebSocket on ``/ws`` or ``/mcp`` turns the connection into a WebSocket session
for its env. Env calls run in the connection's own thread (never an event loop), so an inline
env that hangs stalls only its connection: the watchdog reports it, the client gets an error and
the connection is closed.

Server options (``ServerConfig.options``, e.g. the ``[server]`` table of ``--config``):

==========================  =========  =========================================================
``ping_interval``           20.0       seconds of WebSocket silence before the server pings;
                                       0 or null disables pings
``ping_timeout``            20.0       seconds a pinged peer has to answer before it is dropped
``reap_interval``           10.0       seconds between sweeps for idle sessions
``http_keepalive``          60.0       seconds an idle keep-alive HTTP connection is kept
``max_message_size``        104857600  largest WebSocket message or HTTP body, in bytes
``send_timeout``            30.0       seconds a client has to take a reply (HTTP or WebSocket)
                                       before its connection is dropped; null = forever
``max_queued``              1048576    bytes of WebSocket requests read ahead of their replies;
                                       beyond them the server stops reading (backpressure)
``openenv_arrays``          "base64"   Gymnasium arrays as base64 objects, or "list"
``http_session_idle``       300.0      seconds an HTTP (or MCP) session may go unused
``http_max_sessions``       1024       HTTP and MCP sessions at once (``CAPACITY_REACHED``)
``http_sessions_per_address``  256     of those, opened from one client address
==========================  =========  =========================================================

Protocol errors, refused requests and dropped clients are logged at INFO with the peer's
address (at most 20 lines per 10 s).

``ServerConfig.idle_timeout`` (default 3600 s) is how long a WebSocket session may go unused
before it is reaped, and an env's ``session_timeout`` (an OpenEnv app's own) how long any of its
sessions may, checked every ``reap_interval``; ``ServerConfig.capacity`` caps sessions across
all front ends (``CAPACITY_REACHED``). Tokens, TLS, the Host/Origin checks and the connection
bounds are the server's security settings (:mod:`envwire.server.security`, :mod:`.guard`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from envwire.errors import CapacityError, EnvCapacityError, EnvTimeoutError, EnvwireError
from envwire.frontends.openenv.bindings import ActionRejected
from envwire.frontends.openenv.guard import Guard
from envwire.frontends.openenv.routes import Router, error_response, split_path
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.protocols.http.http11 import Request, Response, json_response, response_bytes
from envwire.protocols.http.websocket import handshake_problem
from envwire.protocols.openenv import (
    ErrorCode,
    RpcCode,
    WsClose,
    WsInvalid,
    WsMcp,
    WsReset,
    WsSample,
    WsSpaces,
    WsState,
    WsStep,
    dumps,
    error_data,
    error_message,
    message,
    parse_client_message,
    parse_rpc,
    rpc_error,
)
from envwire.server.listener import ThreadedListener
from envwire.server.ratelog import RateLimitedLog
from envwire.server.security import connection_limits, setting_seconds
from envwire.server.security.admission import Ticket
from envwire.server.security.limits import address_of
from envwire.sockets.http import (
    DEFAULT_MAX_QUEUED,
    DEFAULT_SEND_TIMEOUT,
    BodyPolicy,
    HttpConnection,
    WebSocketChannel,
)

if TYPE_CHECKING:
    from envwire.app import Server

__all__ = ["Mount", "OpenEnvFrontEnd"]

log = logging.getLogger("envwire.http")
#: What a client provokes (protocol errors, dropped connections): INFO, rate-limited.
_peer_log = RateLimitedLog(log)
#: Close reasons that are the client's doing and worth a line (not a plain goodbye).
_LOGGED_CLOSES = ("bad request", "protocol error", "the client did not read", "no answer")

#: Another route table on the same port: the response to a request, or None when the request
#: is not its to answer.
Mount = Callable[[Request], Response | None]

_OBSERVATION = '{"type":"observation","data":'

#: Seconds a refused WebSocket waits for the client's first message (see ``_refuse``).
_REFUSAL_WAIT = 5.0

_DEFAULTS: dict[str, float | None] = {
    "ping_interval": 20.0,
    "ping_timeout": 20.0,
    "reap_interval": 10.0,
    "http_keepalive": 60.0,
    "send_timeout": DEFAULT_SEND_TIMEOUT,
}


def _address(peer: Any) -> str:
    """A socket peer as ``host:port``."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def _kind(text: str) -> str:
    """The ``type`` of a message already known to be a JSON object with one."""
    kind = json.loads(text).get("type")
    return kind if isinstance(kind, str) else ""


def _seconds(options: dict[str, Any], key: str) -> float | None:
    value = options.get(key, _DEFAULTS[key])
    if value is None or value is False:
        return None
    number = float(value)
    return number if number > 0 else None


class OpenEnvFrontEnd(ThreadedListener):
    """Serves every env over OpenEnv's HTTP and WebSocket protocol on ``host:port``.

    Args:
        mounts: route tables asked first, in order, for every plain HTTP request.
        policies: body limits of mounted routes (refused on the declared length, in their
            format).
    """

    name = "http"
    thread_name = "envwire-http"

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        mounts: Sequence[Mount] = (),
        policies: Sequence[BodyPolicy] = (),
    ) -> None:
        options = server.config.options
        super().__init__(connection_limits(options), server.security.tls)
        self.server = server
        self.host, self.port = host, port
        self.guard = Guard(server.security, host)
        # HTTP sessions have no connection that ends them: a shorter idle time than the
        # server's idle_timeout, which still bounds it.
        self.http_idle = min(
            setting_seconds(options, "http_session_idle", 300.0),
            server.config.idle_timeout or float("inf"),
        )
        self.ping_interval = _seconds(options, "ping_interval")
        self.ping_timeout = _seconds(options, "ping_timeout")
        self.reap_interval = _seconds(options, "reap_interval") or 10.0
        self.keepalive = _seconds(options, "http_keepalive")
        self.max_message = int(options.get("max_message_size", 100 * 1024 * 1024))
        self.send_timeout = _seconds(options, "send_timeout")
        self.max_queued = int(options.get("max_queued", DEFAULT_MAX_QUEUED))
        self.idle_timeout = server.config.idle_timeout
        self.service = OpenEnvService(server)
        self.mounts = tuple(mounts)
        self.policies = tuple(policies)
        health = options.get("health", dict)  # extra /health fields, set by `envwire serve`
        self.router = Router(self.service, self.status, health)

    def start(self) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), then start accepting."""
        address = self.listen(1024)
        threading.Thread(target=self._reap_loop, name="envwire-http-reaper", daemon=True).start()
        threading.Thread(
            target=self._keepalive_loop, name="envwire-http-keepalive", daemon=True
        ).start()
        return address

    def connection(self, sock: Any, peer: Any, ticket: Ticket) -> _Connection:
        return _Connection(self, sock, peer, ticket)

    def refusal(self, error: EnvwireError) -> bytes:
        """A refused connection's answer: 503 with the JSON error body."""
        return response_bytes(error_response(error), keep_alive=False)

    def respond(
        self, request: Request, on_hang: Callable[[EnvTimeoutError], None] | None = None
    ) -> Response:
        """The response to one plain HTTP request: the first mount's that answers (mounts
        have their own accounts), else, with a token, the OpenEnv router's (never raises)."""
        for mount in self.mounts:
            response = mount(request)
            if response is not None:
                return response
        if not self._is_health(request):
            refused = self.guard.token(request)
            if refused is not None:
                return refused
        return self.router.handle(request, on_hang)

    def _is_health(self, request: Request) -> bool:
        service = self.service
        return split_path(request.path, service.served, service.default_env)[1] == "health"

    def _reap_loop(self) -> None:
        while not self._stopping.wait(self.reap_interval):
            for record, idle in self.service.idle(self._idle_limit):
                self.service.reap(record, idle)

    def _idle_limit(self, record: Any) -> float | None:
        """How long a session may go unused: a WebSocket's the server's ``idle_timeout``, an
        HTTP or MCP session's ``http_session_idle``."""
        return self.idle_timeout if record.kind == "ws" else self.http_idle

    def _keepalive_loop(self) -> None:
        """One timer for every WebSocket: ping the idle ones, drop the unresponsive ones."""
        step = min(self.ping_interval or 2.0, self.ping_timeout or 2.0) / 4
        # At least twice a second: busy connections answer their clients' pings from here.
        while not self._stopping.wait(min(max(step, 0.02), 0.5)):
            now = time.monotonic()
            with self._lock:
                channels = [c.channel for c in self._connections if c.channel is not None]
            for channel in channels:
                channel.keepalive(now)

    def status(self) -> dict[str, Any]:
        """Session counts (``GET /status``)."""
        counts = self.service.counts()
        table = self.server.sessions
        return {
            "sessions": len(table),
            "capacity": table.capacity,
            "openenv": {"websocket": counts["ws"], "http": counts["http"], "mcp": counts["mcp"]},
            "connections": len(self._connections),
        }

    def stop(self) -> None:
        """Stop accepting, drop every connection and free the front end's sessions."""
        for conn in self.stop_listening():
            conn.abort()
        self.service.close_all()


class _Connection:
    """One client connection: HTTP requests, possibly upgraded to a WebSocket."""

    def __init__(self, front: OpenEnvFrontEnd, sock: Any, peer: Any, ticket: Ticket) -> None:
        self.front = front
        self.peer = peer
        self.ticket = ticket
        self.client = address_of(peer)
        self.scheme = "https" if front.tls is not None else "http"
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.http = HttpConnection(
            sock,
            max_body=front.max_message,
            keepalive=front.keepalive,
            send_timeout=front.send_timeout,
            policies=front.policies,
        )
        self.channel: WebSocketChannel | None = None
        self.record: Record | None = None

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
        if self.channel is not None:
            self.channel.abort()
        self.http.abort()
        if self.record is not None:
            self.front.service.close(self.record)

    def _serve(self) -> None:
        # The first request is the connection's handshake: it has the ticket's deadline.
        deadline: float | None = time.monotonic() + self.ticket.remaining()
        while not self.front._stopping.is_set():
            request = self.http.next_request(deadline)
            if deadline is not None:
                deadline = None
                self.ticket.passed()
            if request is None:
                return
            if isinstance(request, Response):
                self.http.send(request)
                return
            request.client, request.scheme = self.client, self.scheme
            refused = self.front.guard.browser(request)
            if refused is not None:  # a foreign page's request: answer, and hang up
                self.http.keep_alive = False
                self.http.send(refused)
                return
            if "websocket" in request.header("upgrade").lower():
                refused = self.front.guard.token(request)
                if refused is not None:
                    self.http.send(refused)
                    return
                self._websocket(request)
                return
            response = self.front.respond(request, self._http_hung)
            if not self.http.send(response, head=request.method == "HEAD"):
                return

    def _http_hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: an inline env hung in this connection's request."""
        log.warning("%s: %s", self.peer, error)
        response = error_response(error)
        self.http.send(response)
        self.http.abort()

    # -- WebSocket --------------------------------------------------------------------------

    def _websocket(self, request: Request) -> None:
        service = self.front.service
        env_id, endpoint, _ = split_path(request.path, service.served, service.default_env)
        problem = handshake_problem(request)
        if endpoint not in ("ws", "mcp"):
            self.http.send(json_response(404, '{"detail":"Not Found"}'))
            return
        if problem is not None:
            self.http.send(json_response(400, dumps({"detail": problem})))
            return
        trailing = self.http.accept_websocket(request)
        self.channel = WebSocketChannel(
            self.http.sock,
            trailing,
            max_size=self.front.max_message,
            ping_interval=self.front.ping_interval,
            ping_timeout=self.front.ping_timeout,
            send_timeout=self.front.send_timeout,
            max_queued=self.front.max_queued,
        )
        try:
            self.record = service.open(env_id, "ws", peer=_address(self.peer))
        except EnvwireError as exc:
            self._refuse(exc, endpoint)
            return
        self.record.owner = self
        self.record.on_hang = self._ws_hung
        if endpoint == "mcp":
            self._mcp_loop(env_id)
        else:
            self._ws_loop()
        service.close(self.record)
        self.channel.close()

    def _refuse(self, exc: EnvwireError, endpoint: str) -> None:
        """Tell the client why no session was opened, then close.

        The error answers the client's first message (or goes unasked after a few seconds of
        silence), so that a client that sends before it reads still gets it: closing at once,
        as openenv-core does, makes such clients fail on a closed socket instead.
        """
        channel = self.channel
        assert channel is not None
        table = self.front.server.sessions
        limits: dict[str, Any] = {"active_sessions": len(table), "max_sessions": table.capacity}
        if isinstance(exc, EnvCapacityError):
            limits = {"active_sessions": exc.active, "max_sessions": exc.limit}
        if endpoint == "mcp":
            data = limits if isinstance(exc, CapacityError) else None
            text = dumps(rpc_error(None, RpcCode.SERVER_ERROR, str(exc), data))
        elif isinstance(exc, CapacityError):
            text = self._error(ErrorCode.CAPACITY_REACHED, str(exc), exc.code, **limits)
        else:
            text = self._error(ErrorCode.FACTORY_ERROR, str(exc), exc.code)
        if self.front.service.compat.refusal_waits:
            channel.receive(wait=_REFUSAL_WAIT)
        channel.send_text(text)
        channel.close(1013 if isinstance(exc, CapacityError) else 1011, type(exc).__name__)

    def _error(self, code: ErrorCode, text: str, envwire_code: str, **extra: Any) -> str:
        """An error message; envwire's finer code rides along unless in strict mode."""
        if self.front.service.compat.extensions:
            extra["envwire_code"] = envwire_code
        return error_message(code, text, **extra)

    def _ending(self, text: str) -> None:
        """openenv-core's answer to a message it cannot read at all: ``SESSION_ERROR``, then
        the session ends."""
        channel = self.channel
        assert channel is not None
        channel.send_text(error_message(ErrorCode.SESSION_ERROR, text))

    def _ws_loop(self) -> None:
        channel, record, service = self.channel, self.record, self.front.service
        assert channel is not None and record is not None
        binding = record.binding
        compat = service.compat
        while True:
            text = channel.receive()
            if text is None:
                return
            if isinstance(text, bytes):
                return self._ending("binary messages are not accepted: send JSON as text")
            event = parse_client_message(text)
            if isinstance(event, WsInvalid) and event.not_object and not compat.malformed_continues:
                return self._ending(event.message)
            if isinstance(event, WsSpaces | WsSample) and not compat.extensions:
                event = WsInvalid(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {_kind(text)}")
            try:
                match event:
                    case WsStep(data=data):
                        reply = _OBSERVATION + service.step(record, data) + "}"
                    case WsReset(data=data):
                        payload = service.reset(
                            record, data, ("data",), validate=compat.check_ws_seed
                        )
                        reply = _OBSERVATION + payload + "}"
                    case WsState():
                        reply = message("state", service.state(record))
                    case WsClose():
                        return
                    case WsMcp(data=data):
                        rpc = parse_rpc(data, decoded=True)
                        response = (
                            rpc
                            if isinstance(rpc, dict)
                            else service.mcp(rpc, record.env_id, record, self.client)
                        )
                        reply = message("mcp", response)
                    case WsSpaces():
                        reply = message("spaces", binding.describe())
                    case WsSample():
                        reply = message("sample", service.sample(record))
                    case WsInvalid(code=code, message=text_, errors=errors):
                        extra = {} if errors is None else {"errors": errors}
                        reply = error_message(code, text_, **extra)
            except ActionRejected as exc:
                reply = self._error(
                    ErrorCode.VALIDATION_ERROR, str(exc), exc.code, errors=exc.detail
                )
            except EnvwireError as exc:
                if not exc.remote:
                    log.warning("session %s (%s): %s", record.session.id[:8], record.env_id, exc)
                reply = self._error(ErrorCode(exc.openenv_code), str(exc), exc.code)
            if not channel.send_text(reply):
                return

    def _mcp_loop(self, env_id: str) -> None:
        channel, record, service = self.channel, self.record, self.front.service
        assert channel is not None and record is not None
        while True:
            text = channel.receive()
            if text is None:
                return
            if isinstance(text, bytes):  # openenv-core ends the session with a server error
                error = rpc_error(None, RpcCode.SERVER_ERROR, "binary messages are not accepted")
                channel.send_text(dumps(error))
                return
            rpc = parse_rpc(text)
            response = (
                rpc if isinstance(rpc, dict) else service.mcp(rpc, env_id, record, self.client)
            )
            if not channel.send_text(dumps(response)):
                return

    def _ws_hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: the env hung in this connection's thread; report it and hang up."""
        log.warning("%s: %s", self.peer, error)
        channel = self.channel
        if channel is not None:
            channel.send_text(message("error", error_data(error)))
            channel.close(1011, "env hung", linger=0.2)
        if self.record is not None:
            self.front.service.close(self.record)

    def reap(self, idle: float) -> None:
        """Reaper thread: the session was unused for ``idle`` seconds; say so and close."""
        channel = self.channel
        if channel is None:
            return
        channel.send_text(
            error_message(
                ErrorCode.SESSION_ERROR,
                f"session closed after {idle:g} s without requests",
                envwire_code="idle_timeout",
            )
        )
        channel.close(1001, "idle timeout", linger=0.2)
