"""The OpenEnv front end: OpenEnv's routes and WebSocket sessions, mounted on the HTTP front
end (:mod:`envwire.server.http`), as openenv-core 0.3.0 speaks them.

Plain requests go to the :class:`~envwire.frontends.openenv.routes.Router` (with a token, when
the server has tokens, except ``/health``); a WebSocket on ``/ws`` or ``/mcp`` becomes one
OpenEnv session for its env, served by :class:`_Session` in the connection's own thread, so an
inline env that hangs stalls only its connection: the watchdog reports it, the client gets an
error and the connection is closed.

A WebSocket session may go unused for the server's ``idle_timeout`` (default 3600 s), an HTTP
or MCP session for ``http_session_idle``, and any session of an env with a ``session_timeout``
(an OpenEnv app's own) for that long; one reaper thread checks every ``reap_interval``. The
settings are :class:`~envwire.settings.OpenEnvSettings`; the server's ``capacity`` caps sessions
across all front ends (``CAPACITY_REACHED``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from envwire.errors import (
    CapacityError,
    EnvCapacityError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
)
from envwire.frontends.openenv import mcp
from envwire.frontends.openenv.bindings import ActionRejected
from envwire.frontends.openenv.routes import Router, split_path
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.observe import Observability
from envwire.protocols.http.http11 import Request, Response, json_response
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
    code_of,
    dumps,
    error_data,
    error_message,
    message,
    parse_client_message,
    parse_rpc,
    rpc_error,
)
from envwire.registry import Catalog
from envwire.server.http import Guard, HttpFrontEnd, OnHang
from envwire.server.security.addresses import AddressLimiter
from envwire.server.sessions import SessionTable
from envwire.settings import OpenEnvSettings
from envwire.sockets.websocket import WebSocketChannel

__all__ = ["OpenEnvMount"]

log = logging.getLogger("envwire.openenv")

_OBSERVATION = '{"type":"observation","data":'

#: Seconds a refused WebSocket waits for the client's first message (see ``_refuse``).
_REFUSAL_WAIT = 5.0


def _nothing() -> None:
    """Nothing to do."""


def _kind(text: str) -> str:
    """The ``type`` of a message already known to be a JSON object with one."""
    kind = json.loads(text).get("type")
    return kind if isinstance(kind, str) else ""


class OpenEnvMount:
    """Every env of the catalog over OpenEnv's HTTP routes and WebSocket sessions.

    Args:
        settings: the OpenEnv settings (arrays, compat mode, HTTP sessions, reaping).
        sessions: the server's session table; ``catalog`` its envs.
        observe: where errors answered to clients are counted.
        guard: the HTTP front end's token check.
        idle_timeout: seconds a WebSocket session may go unused (None: no limit).
        health: extra ``/health`` fields (the code sandbox's enforcement).
        token_prefix: what every HTTP and MCP session token begins with (the worker's mark).
        http_sessions: what counts the HTTP and MCP sessions (see :class:`OpenEnvService`).
    """

    def __init__(
        self,
        settings: OpenEnvSettings,
        *,
        sessions: SessionTable,
        catalog: Catalog,
        observe: Observability,
        guard: Guard,
        idle_timeout: float | None,
        health: Callable[[], dict[str, Any]] = dict,
        token_prefix: str = "",
        http_sessions: AddressLimiter | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.guard = guard
        self.idle_timeout = idle_timeout
        # HTTP sessions have no connection that ends them: a shorter idle time than the
        # server's idle_timeout, which still bounds it.
        self.http_idle = min(settings.http_session_idle, idle_timeout or float("inf"))
        self.service = OpenEnvService(settings, sessions, catalog, token_prefix, http_sessions)
        self.router = Router(self.service, observe, self.status, health)
        self.front: HttpFrontEnd | None = None
        self._stopping = threading.Event()

    # -- the mount ----------------------------------------------------------------------------

    def check(self, head: Request) -> Response | bool:
        """Every request not claimed before is OpenEnv's: a token, when the server has
        tokens, for all but ``/health`` (checked on the head, before any body is read)."""
        service = self.service
        if split_path(head.path, service.served, service.default_env)[1] == "health":
            return True
        refused = self.guard.token(head)
        return True if refused is None else refused

    def respond(self, request: Request, on_hang: OnHang) -> Response:
        """Every plain request not answered before is OpenEnv's (404s included)."""
        service = self.service
        if split_path(request.path, service.served, service.default_env)[1] != "health":
            refused = self.guard.token(request)
            if refused is not None:
                return refused
        return self.router.handle(request, on_hang)

    def upgrade(self, request: Request) -> _Session | Response:
        """A session for a WebSocket on ``/ws`` or ``/mcp`` (after the token check)."""
        refused = self.guard.token(request)
        if refused is not None:
            return refused
        service = self.service
        env_id, endpoint, _ = split_path(request.path, service.served, service.default_env)
        if endpoint not in ("ws", "mcp"):
            return json_response(404, '{"detail":"Not Found"}')
        return _Session(self, env_id, endpoint, request.client, request.peer)

    def body_limit(self, request: Request) -> int | None:
        return None

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        return None

    def start(self, front: HttpFrontEnd) -> None:
        """Start the reaper."""
        self.front = front
        threading.Thread(target=self._reap_loop, name="envwire-http-reaper", daemon=True).start()

    def stop(self) -> None:
        """Stop the reaper and free every OpenEnv session."""
        self._stopping.set()
        self.service.close_all()

    # -- sessions -----------------------------------------------------------------------------

    def _reap_loop(self) -> None:
        while not self._stopping.wait(self.settings.reap_interval):
            for record, idle in self.service.idle(self._idle_limit):
                self.service.reap(record, idle)

    def _idle_limit(self, record: Record) -> float | None:
        """How long a session may go unused: a WebSocket's the server's ``idle_timeout``, an
        HTTP or MCP session's ``http_session_idle``."""
        return self.idle_timeout if record.kind == "ws" else self.http_idle

    def status(self) -> dict[str, Any]:
        """Session counts (``GET /status``)."""
        counts = self.service.counts()
        table = self.sessions
        return {
            "sessions": len(table),
            "capacity": table.capacity,
            "openenv": {"websocket": counts["ws"], "http": counts["http"], "mcp": counts["mcp"]},
            "connections": 0 if self.front is None else self.front.connection_count(),
        }


class _Session:
    """One OpenEnv WebSocket session (``/ws``, or ``/mcp``: JSON-RPC only)."""

    def __init__(
        self, mount: OpenEnvMount, env_id: str, endpoint: str, client: str, peer: str
    ) -> None:
        self.mount = mount
        self.env_id = env_id
        self.endpoint = endpoint
        self.client = client
        self.peer = peer
        self.channel: WebSocketChannel | None = None
        self.record: Record | None = None
        self.forsake: Callable[[], None] = _nothing

    def opened(self, channel: WebSocketChannel, forsake: Callable[[], None]) -> bool:
        """Open the env's session (a pool thread); False after telling the client why not."""
        self.channel = channel
        self.forsake = forsake
        try:
            self.record = self.mount.service.open(self.env_id, "ws", peer=self.peer)
        except EnvwireError as exc:
            self._refuse(exc, self.endpoint)
            return False
        self.record.owner = self
        self.record.on_hang = self._ws_hung
        return True

    def message(self, text: str | bytes) -> bool:
        """Answer one message (a pool thread); False when the session is over."""
        if self.endpoint == "mcp":
            return self._mcp_message(text)
        return self._ws_message(text)

    def closed(self) -> None:
        """The WebSocket is over: free the session at once."""
        if self.record is not None:
            self.mount.service.close(self.record)

    def abort(self) -> None:
        self.closed()

    def _refuse(self, exc: EnvwireError, endpoint: str) -> None:
        """Tell the client why no session was opened, then close.

        The error answers the client's first message (or goes unasked after a few seconds of
        silence), so that a client that sends before it reads still gets it: closing at once,
        as openenv-core does, makes such clients fail on a closed socket instead.
        """
        channel = self.channel
        assert channel is not None
        table = self.mount.sessions
        limits: dict[str, Any] = {"active_sessions": len(table), "max_sessions": table.capacity}
        if isinstance(exc, EnvCapacityError):
            limits = {"active_sessions": exc.active, "max_sessions": exc.limit}
        compat = self.mount.service.compat
        if isinstance(exc, CapacityError) and not compat.named_refusals:
            # openenv-core's words, which name no env (one env per server there)
            said = (
                f"Server at capacity: {limits['active_sessions']}/{limits['max_sessions']} "
                "sessions active. Cannot accept new connections."
            )
            exc = CapacityError(said)
        if endpoint == "mcp":
            data = limits if isinstance(exc, CapacityError) else None
            text = dumps(rpc_error(None, RpcCode.SERVER_ERROR, str(exc), data))
        elif isinstance(exc, CapacityError):
            text = self._error(ErrorCode.CAPACITY_REACHED, str(exc), exc.code, **limits)
        else:
            text = self._error(ErrorCode.FACTORY_ERROR, str(exc), exc.code)
        if compat.refusal_waits:
            channel.receive(wait=_REFUSAL_WAIT)
        channel.send_text(text)
        if not compat.named_refusals:
            channel.close(1000)  # as openenv-core's websocket.close() after the error
        else:
            channel.close(1013 if isinstance(exc, CapacityError) else 1011, type(exc).__name__)

    def _error(self, code: ErrorCode, text: str, envwire_code: str, **extra: object) -> str:
        """An error message; envwire's finer code rides along unless in strict mode."""
        if self.mount.service.compat.extensions:
            extra["envwire_code"] = envwire_code
        return error_message(code, text, **extra)

    def _ending(self, text: str) -> None:
        """openenv-core's answer to a message it cannot read at all: ``SESSION_ERROR``, then
        the session ends."""
        channel = self.channel
        assert channel is not None
        channel.send_text(error_message(ErrorCode.SESSION_ERROR, text))

    def _ws_message(self, text: str | bytes) -> bool:
        channel, record, service = self.channel, self.record, self.mount.service
        assert channel is not None and record is not None
        compat = service.compat
        if isinstance(text, bytes):
            self._ending("binary messages are not accepted: send JSON as text")
            return False
        event = parse_client_message(text)
        if isinstance(event, WsInvalid) and event.not_object and not compat.malformed_continues:
            self._ending(event.ending)
            return False
        if isinstance(event, WsSpaces | WsSample) and not compat.extensions:
            event = WsInvalid(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {_kind(text)}")
        try:
            match event:
                case WsStep(data=data):
                    reply = _OBSERVATION + mcp.step(service, record, data) + "}"
                case WsReset(data=data):
                    payload = service.reset(record, data, ("data",), validate=compat.check_ws_seed)
                    reply = _OBSERVATION + payload + "}"
                case WsState():
                    reply = message("state", service.state(record))
                case WsClose():
                    return False
                case WsMcp(data=data):
                    rpc = parse_rpc(data, decoded=True)
                    response = rpc
                    if not isinstance(rpc, dict):
                        response = mcp.answer(service, rpc, record.env_id, record, self.client)
                    reply = message("mcp", response)
                case WsSpaces():
                    reply = message("spaces", record.binding.describe())
                case WsSample():
                    reply = message("sample", service.sample(record))
                case WsInvalid(code=code, message=text_, errors=errors):
                    extra = {} if errors is None else {"errors": errors}
                    reply = error_message(code, text_, **extra)
        except ActionRejected as exc:
            reply = self._error(ErrorCode.VALIDATION_ERROR, str(exc), exc.code, errors=exc.detail)
        except EnvwireError as exc:
            if not exc.remote:
                log.warning("session %s (%s): %s", record.session.id[:8], record.env_id, exc)
            text_ = str(exc)
            if isinstance(exc, EnvError) and not compat.named_env_errors:
                text_ = exc.env_message  # openenv-core reports the exception's own text
            reply = self._error(code_of(exc), text_, exc.code)
        return channel.send_text(reply)

    def _mcp_message(self, text: str | bytes) -> bool:
        channel, record, service = self.channel, self.record, self.mount.service
        assert channel is not None and record is not None
        if isinstance(text, bytes):  # openenv-core ends the session with a server error
            error = rpc_error(None, RpcCode.SERVER_ERROR, "binary messages are not accepted")
            channel.send_text(dumps(error))
            return False
        rpc = parse_rpc(text)
        response = rpc
        if not isinstance(rpc, dict):
            response = mcp.answer(service, rpc, self.env_id, record, self.client)
        return channel.send_text(dumps(response))

    def _ws_hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: the env hung in this connection's thread; report it and hang up
        (the stuck thread's place in the pool goes to another)."""
        self.forsake()
        log.warning("%s: %s", self.peer, error)
        channel = self.channel
        if channel is not None:
            channel.send_text(message("error", error_data(error)))
            channel.close(1011, "env hung", linger=0.2)
        if self.record is not None:
            self.mount.service.close(self.record)

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
