"""The OpenEnv front end: OpenEnv's routes and WebSocket sessions, mounted on the HTTP front
end (:mod:`envwire.server.http`), as openenv-core 0.3.0 speaks them.

Plain requests go to the :class:`~envwire.frontends.openenv.routes.Router` (with a token, when
the server has tokens, except ``/health``); a WebSocket on ``/ws`` or ``/mcp`` becomes one
OpenEnv session for its env, served by :class:`~.wsession.WsSession` in the connection's own
thread, so an inline env that hangs stalls only its connection: the watchdog reports it, the
client gets an error and the connection is closed.

A WebSocket session may go unused for the server's ``idle_timeout`` (default 3600 s), an HTTP
or MCP session for ``http_session_idle``, and any session of an env with a ``session_timeout``
(an OpenEnv app's own) for that long; one reaper thread checks every ``reap_interval``. The
settings are :class:`~envwire.settings.OpenEnvSettings`; the server's ``capacity`` caps sessions
across all front ends (``CAPACITY_REACHED``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from envwire.frontends.openenv.answers import not_found
from envwire.frontends.openenv.routes import Router, split_path
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.frontends.openenv.wsession import WsSession
from envwire.observe import Observability
from envwire.protocols.http.http11 import Request, Response
from envwire.registry import Catalog
from envwire.server.http import Guard, HttpFrontEnd, OnHang
from envwire.server.security.addresses import AddressLimiter
from envwire.server.sessions import SessionTable
from envwire.settings import OpenEnvSettings

__all__ = ["OpenEnvMount"]


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

    def upgrade(self, request: Request) -> WsSession | Response:
        """A session for a WebSocket on ``/ws`` or ``/mcp`` (after the token check)."""
        refused = self.guard.token(request)
        if refused is not None:
            return refused
        service = self.service
        env_id, endpoint, _ = split_path(request.path, service.served, service.default_env)
        if endpoint not in ("ws", "mcp"):
            return not_found()
        return WsSession(self.service, env_id, endpoint, request.client, request.peer)

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
