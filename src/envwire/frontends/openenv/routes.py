"""HTTP endpoints of the OpenEnv front end.

Every env is served under ``/envs/<env id>/<endpoint>`` (ids may contain ``/``: the endpoint is
the last path segment); ``/<endpoint>`` serves the first env of the catalog. Endpoints:

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
=================  ===========  ===============================================================

Sessions: ``/reset`` and ``POST /session`` answer with the session token in the
``Envwire-Session`` header and the ``envwire_session`` cookie; later requests send either.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from envwire.errors import (
    CapacityError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
    InvalidArgumentError,
)
from envwire.frontends.openenv import mcp, openapi
from envwire.frontends.openenv.bindings import ActionRejected
from envwire.frontends.openenv.service import FRONT_END, OpenEnvService, Record
from envwire.observe import Observability
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.protocols.http.status import STATUS, StatusTable, status_of, statuses
from envwire.protocols.openenv import (
    ERROR_TABLE,
    BodyError,
    ErrorCode,
    StepRequest,
    code_of,
    dumps,
    parse_reset_body,
    parse_rpc,
    parse_step_body,
    undeclared_body,
)

__all__ = [
    "ENDPOINTS",
    "HEADER",
    "COOKIE",
    "Router",
    "error_response",
    "session_tokens",
    "split_path",
]

HEADER = "envwire-session"
COOKIE = "envwire_session"

#: endpoint -> allowed methods
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "reset": ("POST",),
    "step": ("POST",),
    "state": ("GET",),
    "health": ("GET",),
    "metadata": ("GET",),
    "schema": ("GET",),
    "openapi.json": ("GET",),
    "docs": ("GET",),
    "mcp": ("POST",),
    "session": ("POST", "GET", "DELETE"),
    "sample": ("POST",),
    "ws": ("GET",),
    "": ("GET",),
}
_ROOT_ONLY = {"envs": ("GET",), "status": ("GET",)}
#: envwire's own endpoints, which strict mode does not serve (openenv-core answers 404).
_EXTENSIONS = frozenset({"session", "sample", ""})
#: What openenv-core's production mode does not register.
_SIMULATION = frozenset({"reset", "step", "state"})


def split_path(path: str, served: Callable[[str], bool], default: str) -> tuple[str, str, str]:
    """(env id, endpoint, prefix) of a request path; prefix is the env's URL prefix."""
    if path.startswith("/envs/"):
        rest = path[len("/envs/") :].rstrip("/") if path.endswith("/") else path[len("/envs/") :]
        env_id, _, endpoint = rest.rpartition("/")
        if not env_id or (endpoint not in ENDPOINTS and served(rest)):
            env_id, endpoint = rest, ""
        return env_id, endpoint, "/envs/" + quote(env_id, safe="/:@!$&'()*+,;=-._~")
    return default, path.lstrip("/"), ""


def session_tokens(request: Request) -> list[str]:
    """The session tokens a request names: its header, its cookies, and for MCP over HTTP the
    ``session_id`` of its JSON-RPC params (a body that does not parse names none)."""
    tokens = [request.header(HEADER)] if request.header(HEADER) else []
    tokens += request.cookie_values(COOKIE)
    if request.method == "POST" and request.path.rstrip("/").endswith("/mcp") and request.body:
        try:
            params = json.loads(request.body).get("params")
        except (ValueError, AttributeError):
            return tokens
        token = params.get("session_id") if isinstance(params, dict) else None
        if isinstance(token, str):
            tokens.append(token)
    return tokens


def _detail(status: int, text: str, **extra: object) -> Response:
    headers = [("retry-after", "1")] if status == 503 else []
    return json_response(status, dumps({"detail": text, **extra}), headers)


def error_response(exc: EnvwireError, loc: tuple[str, ...] = ("body",)) -> Response:
    """The HTTP answer to an envwire error (422 bodies carry FastAPI's detail list)."""
    if isinstance(exc, ActionRejected):
        return json_response(422, dumps({"detail": exc.detail, "code": exc.code}))
    status = status_of(exc, _STATUS)
    if status == 422:
        entry = {"type": "value_error", "loc": list(loc), "msg": str(exc), "input": None}
        return json_response(422, dumps({"detail": [entry], "code": exc.code}))
    return _detail(status, str(exc), code=exc.code, openenv_code=code_of(exc, _CODES))


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
        self.status = status
        self.health = health  # extra /health fields (the code sandbox's enforcement)

    def handle(
        self, request: Request, on_hang: Callable[[EnvTimeoutError], None] | None = None
    ) -> Response:
        """The response to one (non-WebSocket) request; never raises."""
        service = self.service
        extensions = service.compat.extensions
        if request.path in ("/envs", "/status") and extensions:
            name = request.path[1:]
            if request.method not in _ROOT_ONLY[name]:
                return _not_allowed(_ROOT_ONLY[name])
            if name == "envs":
                return json_response(
                    200, dumps({"envs": list(service.catalog), "default": service.default_env})
                )
            return json_response(200, dumps(self.status()))
        env_id, endpoint, prefix = split_path(request.path, service.served, service.default_env)
        allowed = ENDPOINTS.get(endpoint)
        if allowed is None or (endpoint in _EXTENSIONS and not extensions):
            return _detail(404, "Not Found")
        if request.method not in allowed and not (request.method == "HEAD" and "GET" in allowed):
            return _not_allowed(allowed)
        compat = service.compat
        undeclared = endpoint in _JSON_BODIES and bool(request.body) and not _is_json(request)
        if undeclared and (compat.json_bodies_only or endpoint not in _MODEL_BODIES):
            # A cross-site form or text/plain fetch needs no CORS preflight: refuse it here.
            return _detail(
                415,
                f"/{endpoint} takes a JSON body: send it with Content-Type: application/json",
                code="unsupported_media_type",
            )
        try:
            service.lookup(env_id)
            if endpoint in _SIMULATION and service.binding(env_id).production:
                return _detail(404, "Not Found")
            if undeclared:  # strict: FastAPI's 422; the body never reaches an env either
                raise undeclared_body(request.body)
            if endpoint in _SIMULATION and not service.compat.stateful_http:
                return self._stateless(request, env_id, endpoint, on_hang)
            return self._dispatch(request, env_id, endpoint, prefix, on_hang)
        except BodyError as exc:
            self.observe.error(FRONT_END, InvalidArgumentError(str(exc.detail)), env_id)
            return json_response(exc.status, dumps({"detail": exc.detail}))
        except EnvwireError as exc:
            self.observe.error(FRONT_END, exc, env_id)
            if (
                isinstance(exc, EnvError)
                and status_of(exc, _STATUS) == 500
                and not compat.named_env_errors
            ):
                # openenv-core lets the env's exception reach Starlette's last-resort handler.
                return Response(500, b"Internal Server Error", "text/plain; charset=utf-8")
            return error_response(exc, ("body", "action") if endpoint == "step" else ("body",))

    def _dispatch(
        self,
        request: Request,
        env_id: str,
        endpoint: str,
        prefix: str,
        on_hang: Callable[[EnvTimeoutError], None] | None,
    ) -> Response:
        service = self.service
        match endpoint, request.method:
            case "health", _:
                return json_response(200, dumps({"status": "healthy", **self.health()}))
            case "metadata", _:
                return json_response(200, dumps(service.binding(env_id).metadata()))
            case "schema", _:
                return json_response(200, dumps(service.binding(env_id).schema()))
            case "openapi.json", _:
                document = openapi.document(service.binding(env_id), prefix)
                return json_response(200, dumps(document))
            case "docs", _:
                return Response(
                    200, openapi.swagger_page(env_id, prefix).encode(), "text/html; charset=utf-8"
                )
            case "", _:
                return json_response(200, dumps(_index(env_id, prefix)))
            case "ws", _:
                return _detail(400, "this is a WebSocket endpoint: connect with a WebSocket client")
            case "mcp", _:
                rpc = parse_rpc(request.body)
                if isinstance(rpc, dict):
                    return json_response(200, dumps(rpc))
                if rpc.notification and rpc.method.startswith("notifications/"):
                    return Response(202)
                mine = self._find_session(request, env_id)
                return json_response(
                    200, dumps(mcp.answer(service, rpc, env_id, mine, request.client))
                )
            case "reset", _:
                data = _reset_body(request.body)
                found = self._find_session(request, env_id)
                opened = found is None
                record = service.open(env_id, "http", request.client) if found is None else found
                try:
                    payload = service.reset(record, data, ("body",), on_hang=on_hang, http=True)
                except CapacityError:
                    raise
                except EnvwireError:
                    if opened:
                        service.close(record)
                    raise
                return json_response(
                    200, payload, _session_headers(record, prefix, request.scheme == "https")
                )
            case "step", _:
                step = parse_step_body(request.body)
                record = self._session(request, env_id)
                payload = mcp.step(
                    service,
                    record,
                    step.action,
                    on_hang=on_hang,
                    kwargs=_step_kwargs(step),
                    http=True,
                )
                return json_response(200, payload)
            case "state", _:
                record = self._session(request, env_id)
                return json_response(200, dumps(service.state(record, on_hang=on_hang)))
            case "sample", _:
                record = self._session(request, env_id)
                return json_response(200, dumps(service.sample(record, on_hang=on_hang)))
            case "session", "POST":
                record = service.open(env_id, "http", request.client)
                body = {
                    "session_id": record.token,
                    "env_id": env_id,
                    "describe": record.binding.describe(),
                }
                return json_response(
                    200, dumps(body), _session_headers(record, prefix, request.scheme == "https")
                )
            case "session", "DELETE":
                record = self._session(request, env_id)
                service.close(record)
                path = _cookie_path(prefix)
                expired = f"{COOKIE}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Lax"
                return json_response(
                    200,
                    dumps({"session_id": record.token, "closed": True}),
                    [("set-cookie", expired)],
                )
            case "session", _:
                record = self._session(request, env_id)
                summary = {
                    "session_id": record.token,
                    "env_id": env_id,
                    "episode_id": record.episode_id,
                    "session": record.session.describe(),
                }
                return json_response(200, dumps(summary))
        return _detail(404, "Not Found")  # pragma: no cover

    def _stateless(
        self,
        request: Request,
        env_id: str,
        endpoint: str,
        on_hang: Callable[[EnvTimeoutError], None] | None,
    ) -> Response:
        """openenv-core's HTTP (strict mode): every request gets a fresh env, closed after."""
        service = self.service
        match endpoint:
            case "reset":
                data = _reset_body(request.body)
                record = service.open(env_id, "http", transient=True)
                try:
                    return json_response(
                        200, service.reset(record, data, ("body",), on_hang=on_hang, http=True)
                    )
                finally:
                    service.close(record)
            case "step":
                step = parse_step_body(request.body)
                record = service.open(env_id, "http", transient=True)
                try:
                    payload = mcp.step(
                        service,
                        record,
                        step.action,
                        on_hang=on_hang,
                        kwargs=_step_kwargs(step),
                        http=True,
                    )
                    return json_response(200, payload)
                finally:
                    service.close(record)
        record = service.open(env_id, "http", transient=True)
        try:
            return json_response(200, dumps(service.state(record, on_hang=on_hang)))
        finally:
            service.close(record)

    def _find_session(self, request: Request, env_id: str) -> Record | None:
        """The request's session for ``env_id`` (header first, then cookies), if any."""
        for token in self._tokens(request):
            record = self.service.find(token)
            if record is not None and record.env_id == env_id:
                return record
        return None

    @staticmethod
    def _tokens(request: Request) -> list[str]:
        tokens = [request.header(HEADER)] if request.header(HEADER) else []
        return tokens + request.cookie_values(COOKIE)

    def _session(self, request: Request, env_id: str) -> Record:
        """The request's session for ``env_id``.

        Raises:
            _SessionMissing: without a session (400).
            _SessionUnknown: for an unknown or expired one (404).
        """
        record = self._find_session(request, env_id)
        if record is not None:
            return record
        if self._tokens(request):
            raise _SessionUnknown(env_id)
        raise _SessionMissing(env_id)


class _SessionMissing(EnvwireError):
    """A request that continues an episode came without a session."""

    code = "no_session"
    remote = True
    _TEXT = (
        "no session: this request continues an episode of {env_id}, so it needs the session "
        "that POST /reset returned (the {header!r} header or the {cookie!r} cookie)"
    )

    def __init__(self, env_id: str) -> None:
        # Built from the env id, not from a message: a client that reads "no_session" back gets
        # a RemoteError (error_class_for_code skips such classes), never this private class.
        super().__init__(self._TEXT.format(env_id=env_id, header=HEADER, cookie=COOKIE))


class _SessionUnknown(_SessionMissing):
    """A request that continues an episode named a session that is not open (any more)."""

    _TEXT = "unknown or expired session for {env_id}: POST /reset (or /session) opens a new one"


#: The statuses and OpenEnv codes these routes answer with: the tables' and the sessions' rows.
_STATUS: StatusTable = statuses(STATUS, {_SessionMissing: 400, _SessionUnknown: 404})
_CODES: Mapping[type[EnvwireError], ErrorCode] = MappingProxyType(
    {**ERROR_TABLE, _SessionMissing: ErrorCode.SESSION_ERROR}
)


def _reset_body(raw: bytes) -> dict[str, Any]:
    return parse_reset_body(raw).model_dump(exclude_unset=True)


def _step_kwargs(step: StepRequest) -> dict[str, Any]:
    """The ``/step`` body's keys besides the action, as the client sent them."""
    return step.model_dump(exclude_unset=True, exclude={"action"})


def _cookie_path(prefix: str) -> str:
    # Cookie attributes end at ';' and the header at a line break: quote strictly.
    return quote(unquote(prefix), safe="/-._~:@") if prefix else "/"


#: Endpoints whose bodies are JSON: a body under any other content type is refused (415).
_JSON_BODIES = frozenset({"reset", "step", "mcp", "session", "sample"})
#: Of those, the ones whose bodies openenv-core validates as a model (strict mode answers a
#: body of another type there as FastAPI does: 422); its ``/mcp`` reads any body as JSON.
_MODEL_BODIES = frozenset({"reset", "step"})


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


def _session_headers(record: Record, prefix: str, secure: bool) -> list[tuple[str, str]]:
    assert record.token is not None
    cookie = f"{COOKIE}={record.token}; Path={_cookie_path(prefix)}; HttpOnly; SameSite=Lax"
    if secure:  # under TLS the cookie never travels over plain HTTP
        cookie += "; Secure"
    return [(HEADER, record.token), ("set-cookie", cookie)]


def _not_allowed(allowed: tuple[str, ...]) -> Response:
    return json_response(405, '{"detail":"Method Not Allowed"}', [("allow", ", ".join(allowed))])


def _index(env_id: str, prefix: str) -> dict[str, Any]:
    base = prefix or ""
    return {
        "env_id": env_id,
        "endpoints": {name: f"{base}/{name}" for name in ENDPOINTS if name},
        "websocket": f"{base}/ws",
    }
