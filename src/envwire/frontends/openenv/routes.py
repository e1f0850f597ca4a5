"""HTTP endpoints of the OpenEnv front end: one route table, each route written once.

Every env is served under ``/envs/<env id>/<endpoint>`` (ids may contain ``/``: the endpoint is
the last path segment); ``/<endpoint>`` serves the first env of the catalog. :data:`ROUTES`
holds one row per (endpoint, method): its handler, its body, the modes that serve it and its
OpenAPI entry; :data:`ENDPOINTS` (the allowed methods), the 405s, the index and the OpenAPI
document all come from it. Endpoints:

=================  ===========  ===============================================================
``reset``          POST         start an episode; opens a session when the request has none
``step``           POST         ``{"action": {...}, "timeout_s": ...}``; needs a session
``state``          GET          the episode's state; needs a session
``health``         GET          ``{"status": "healthy"}`` (plus the server's health extras)
``metadata``       GET          name, description, readme, version, author, documentation url
``schema``         GET          JSON Schemas of action, observation and state
``openapi.json``   GET          the OpenAPI document of this env's endpoints
``docs``           GET          Swagger UI for it
``mcp``            POST         JSON-RPC 2.0: ``tools/list``, ``tools/call``, sessions
``session``        POST/GET/    envwire: open a session without resetting / describe it /
                   DELETE       close it
``sample``         POST         envwire: an action sampled server-side
``ws``, ``mcp``    WebSocket    handled by the front end's WebSocket path
``/envs``          GET          envwire: the catalog (server-wide, not per env)
``/status``        GET          envwire: session counts (server-wide)
=================  ===========  ===============================================================

Sessions (:mod:`.httpsessions`): ``/reset`` and ``POST /session`` answer with the session token;
``reset``, ``step`` and ``state`` continue it. In strict mode (openenv-core's stateless HTTP)
those three run on a fresh env instead, closed after the request: the same handlers, given a
:class:`Call` whose :meth:`Call.session` opens that env.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote

from envwire.errors import EnvError, EnvTimeoutError, EnvwireError, InvalidArgumentError
from envwire.frontends.openenv import handlers, openapi
from envwire.frontends.openenv.answers import (
    STATUS,
    detail,
    error_response,
    not_allowed,
    not_found,
)
from envwire.frontends.openenv.handlers import Call, Handler
from envwire.frontends.openenv.openapi import SESSION_NOTE, Operation
from envwire.frontends.openenv.service import FRONT_END, OpenEnvService
from envwire.observe import Observability
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.protocols.http.status import status_of
from envwire.protocols.openenv import BodyError, dumps, undeclared_body

__all__ = ["ENDPOINTS", "ROUTES", "Body", "Route", "Router", "split_path"]


class Body(Enum):
    """What a route's request body is."""

    NONE = "none"
    #: JSON: a body under another content type is refused (415), a cross-site form or
    #: ``text/plain`` fetch needing no CORS preflight.
    JSON = "json"
    #: JSON that openenv-core validates as a model (strict mode answers a body of another
    #: type as FastAPI does: 422); its ``/mcp`` reads any body as JSON.
    MODEL = "model"


def _openapi(call: Call) -> Response:
    documented = [(f"/{r.endpoint}", r.method, r.doc) for r in ROUTES if r.doc is not None]
    return call.json(openapi.document(call.service.binding(call.env_id), call.prefix, documented))


def _index(call: Call) -> Response:
    base = call.prefix or ""
    return call.json(
        {
            "env_id": call.env_id,
            "endpoints": {name: f"{base}/{name}" for name in ENDPOINTS if name},
            "websocket": f"{base}/ws",
        }
    )


# -- the table -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """One (endpoint, method) and how it is served.

    Attributes:
        server: a server-wide path (``/envs``, ``/status``), not one of each env.
        extension: envwire's own, not served in strict mode (openenv-core answers 404).
        simulation: continues an episode: not in openenv-core's production mode, and
            stateless in strict mode.
        doc: its OpenAPI entry (None: not in the document).
    """

    endpoint: str
    method: str
    handler: Handler
    body: Body = Body.NONE
    server: bool = False
    extension: bool = False
    simulation: bool = False
    doc: Operation | None = None


_CONTROL, _INFO, _SESSIONS = "Environment Control", "Environment Info", "Sessions (envwire)"

#: Every route (the order of :data:`ENDPOINTS`, the index and the OpenAPI document).
ROUTES: tuple[Route, ...] = (
    Route(
        "reset",
        "POST",
        handlers.reset,
        Body.MODEL,
        simulation=True,
        doc=Operation(
            _CONTROL,
            "Reset the environment",
            "The first observation",
            "Starts an episode. Without a session, opens one and returns it in the "
            "Envwire-Session header and the envwire_session cookie.",
            body="ResetRequest",
            answers="StepResult",
            invalid=True,
        ),
    ),
    Route(
        "step",
        "POST",
        handlers.step_http,
        Body.MODEL,
        simulation=True,
        doc=Operation(
            _CONTROL,
            "Execute an action in the environment",
            "The next observation",
            SESSION_NOTE,
            body="StepRequest",
            body_required=True,
            answers="StepResult",
            invalid=True,
        ),
    ),
    Route(
        "state",
        "GET",
        handlers.state,
        simulation=True,
        doc=Operation(
            "State Management",
            "Get current environment state",
            "The episode's state",
            SESSION_NOTE,
            answers="State",
        ),
    ),
    Route(
        "health",
        "GET",
        handlers.health,
        doc=Operation("Health", "Health check", '{"status": "healthy"}'),
    ),
    Route(
        "metadata",
        "GET",
        handlers.metadata,
        doc=Operation(_INFO, "Get environment metadata", "Name, description, readme, version"),
    ),
    Route(
        "schema",
        "GET",
        handlers.schema,
        doc=Operation("Schema", "Get all JSON schemas", "action, observation and state schemas"),
    ),
    Route("openapi.json", "GET", _openapi),
    Route("docs", "GET", handlers.docs),
    Route(
        "mcp",
        "POST",
        handlers.mcp_http,
        Body.JSON,
        doc=Operation(
            "MCP",
            "MCP JSON-RPC 2.0 endpoint",
            "A JSON-RPC 2.0 response",
            "tools/list, tools/call, openenv/session/create|close",
            body="object",
        ),
    ),
    Route(
        "session",
        "POST",
        handlers.open_session,
        Body.JSON,
        extension=True,
        doc=Operation(
            _SESSIONS,
            "Open a session without starting an episode",
            "session_id and the env's description",
        ),
    ),
    Route(
        "session",
        "GET",
        handlers.describe_session,
        extension=True,
        doc=Operation(_SESSIONS, "Describe the current session", "the session"),
    ),
    Route(
        "session",
        "DELETE",
        handlers.close_session,
        extension=True,
        doc=Operation(_SESSIONS, "Close the current session", "closed"),
    ),
    Route(
        "sample",
        "POST",
        handlers.sample,
        Body.JSON,
        extension=True,
        doc=Operation(_SESSIONS, "Sample an action server-side", '{"action": ...}'),
    ),
    Route("ws", "GET", handlers.websocket_only),
    Route("", "GET", _index, extension=True),
    Route("envs", "GET", handlers.envs, server=True, extension=True),
    Route("status", "GET", handlers.status, server=True, extension=True),
)


def _table(server: bool) -> dict[str, dict[str, Route]]:
    table: dict[str, dict[str, Route]] = {}
    for route in ROUTES:
        if route.server == server:
            table.setdefault(route.endpoint, {})[route.method] = route
    return table


_PER_ENV = _table(server=False)
_SERVER = {f"/{name}": methods for name, methods in _table(server=True).items()}

#: endpoint -> allowed methods (of each env's endpoints)
ENDPOINTS: dict[str, tuple[str, ...]] = {name: tuple(m) for name, m in _PER_ENV.items()}
#: Endpoints that are envwire's own in every method (strict mode: 404 whatever the method).
_EXTENSIONS = frozenset(
    name for name, methods in _PER_ENV.items() if all(r.extension for r in methods.values())
)


def split_path(path: str, served: Callable[[str], bool], default: str) -> tuple[str, str, str]:
    """(env id, endpoint, prefix) of a request path; prefix is the env's URL prefix."""
    if path.startswith("/envs/"):
        rest = path[len("/envs/") :].rstrip("/") if path.endswith("/") else path[len("/envs/") :]
        env_id, _, endpoint = rest.rpartition("/")
        if not env_id or (endpoint not in ENDPOINTS and served(rest)):
            env_id, endpoint = rest, ""
        return env_id, endpoint, "/envs/" + quote(env_id, safe="/:@!$&'()*+,;=-._~")
    return default, path.lstrip("/"), ""


class Router:
    """Answers HTTP requests with the service (one instance per front end)."""

    def __init__(
        self,
        service: OpenEnvService,
        observe: Observability,
        status: Callable[[], dict[str, Any]],
        health: Callable[[], dict[str, Any]] = dict,
    ) -> None:
        self.service = service
        self.observe = observe
        self._status = status
        self._health = health  # extra /health fields (the code sandbox's enforcement)

    def status(self) -> dict[str, Any]:
        """``GET /status``: session counts."""
        return self._status()

    def health(self) -> dict[str, Any]:
        """Extra ``/health`` fields."""
        return self._health()

    def handle(
        self, request: Request, on_hang: Callable[[EnvTimeoutError], None] | None = None
    ) -> Response:
        """The response to one (non-WebSocket) request; never raises."""
        service = self.service
        compat = service.compat
        methods = _SERVER.get(request.path) if compat.extensions else None
        method = request.method
        if methods is not None:
            env_id, endpoint, prefix = service.default_env, request.path[1:], ""
        else:
            env_id, endpoint, prefix = split_path(request.path, service.served, service.default_env)
            methods = _PER_ENV.get(endpoint)
            if method == "HEAD":  # an env's GET routes answer HEAD too (server-wide ones: 405)
                method = "GET"
        if methods is None or (endpoint in _EXTENSIONS and not compat.extensions):
            return not_found()
        route = methods.get(method)
        if route is None or (route.extension and not compat.extensions):
            return not_allowed(tuple(methods))
        if route.server:
            return route.handler(
                Call(self, request, env_id=env_id, prefix=prefix, on_hang=on_hang, stateless=False)
            )
        undeclared = route.body is not Body.NONE and bool(request.body) and not _is_json(request)
        if undeclared and (compat.json_bodies_only or route.body is not Body.MODEL):
            return detail(
                415,
                f"/{endpoint} takes a JSON body: send it with Content-Type: application/json",
                code="unsupported_media_type",
            )
        stateless = route.simulation and not compat.stateful_http
        call = Call(
            self, request, env_id=env_id, prefix=prefix, on_hang=on_hang, stateless=stateless
        )
        try:
            service.lookup(env_id)
            if route.simulation and service.binding(env_id).production:
                return not_found()
            if undeclared:  # strict: FastAPI's 422; the body never reaches an env either
                raise undeclared_body(request.body)
            return route.handler(call)
        except BodyError as exc:
            self.observe.error(FRONT_END, InvalidArgumentError(str(exc.detail)), env_id)
            return json_response(exc.status, dumps({"detail": exc.detail}))
        except EnvwireError as exc:
            self.observe.error(FRONT_END, exc, env_id)
            if (
                isinstance(exc, EnvError)
                and status_of(exc, STATUS) == 500
                and not compat.named_env_errors
            ):
                # openenv-core lets the env's exception reach Starlette's last-resort handler.
                return Response(500, b"Internal Server Error", "text/plain; charset=utf-8")
            return error_response(exc, ("body", "action") if endpoint == "step" else ("body",))
        finally:
            service.close(call.transient)


def _is_json(request: Request) -> bool:
    """JSON, or no type at all (curl, scripts): browsers label every body they send across
    sites (``text/plain``, forms), and a body without a label comes with an ``Origin``, which
    the guard checks first."""
    media = request.header("content-type").partition(";")[0].strip().lower()
    return (
        not media
        or media == "application/json"
        or (media.startswith("application/") and media.endswith("+json"))
    )
