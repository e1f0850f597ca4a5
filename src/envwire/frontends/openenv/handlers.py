"""The handlers of the OpenEnv routes (:mod:`.routes`), one per (endpoint, method).

A handler takes a :class:`Call` (the request, its env and the session it runs in) and returns
the response, raising :class:`~envwire.errors.EnvwireError` for the router to answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from envwire.errors import CapacityError, EnvTimeoutError, EnvwireError
from envwire.frontends.openenv import mcp, openapi
from envwire.frontends.openenv.answers import detail
from envwire.frontends.openenv.httpsessions import (
    expired_cookie,
    find_session,
    request_session,
    session_headers,
)
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.frontends.openenv.steps import step
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.protocols.openenv import dumps, parse_reset_body, parse_rpc, parse_step_body
from envwire.server.sessions import summary

__all__ = [
    "Call",
    "Handler",
    "Server",
    "close_session",
    "describe_session",
    "docs",
    "envs",
    "health",
    "mcp_http",
    "metadata",
    "open_session",
    "reset",
    "sample",
    "schema",
    "state",
    "status",
    "step_http",
    "websocket_only",
]


class Server(Protocol):
    """What handlers read of the router: the service and the server-wide answers."""

    service: OpenEnvService

    def health(self) -> dict[str, Any]:
        """Extra ``/health`` fields."""
        ...

    def status(self) -> dict[str, Any]:
        """``/status``."""
        ...


class Call:
    """One request to one route: what its handler reads, and the session it runs in.

    ``stateless``: openenv-core's HTTP (strict mode, on ``reset``, ``step`` and ``state``):
    :meth:`session` opens a fresh env, which the router closes after the request.
    """

    def __init__(
        self,
        server: Server,
        request: Request,
        *,
        env_id: str,
        prefix: str,
        on_hang: Callable[[EnvTimeoutError], None] | None,
        stateless: bool,
    ) -> None:
        self.server = server
        self.service = server.service
        self.request = request
        self.env_id = env_id
        self.prefix = prefix
        self.on_hang = on_hang
        self.stateless = stateless
        self.transient: Record | None = None

    def session(self) -> Record:
        """The session the request continues (or, stateless, a fresh env's).

        Raises:
            SessionMissing, SessionUnknown: no session, or an unknown one.
        """
        if self.stateless:
            self.transient = self.service.open(self.env_id, "http", transient=True)
            return self.transient
        return request_session(self.service, self.request, self.env_id)

    def found(self) -> Record | None:
        """The request's session, if it names one of this env's."""
        return find_session(self.service, self.request, self.env_id)

    def json(self, value: object, headers: list[tuple[str, str]] | None = None) -> Response:
        """A 200 with ``value`` as JSON."""
        return json_response(200, dumps(value), headers)

    def payload(self, text: str, headers: list[tuple[str, str]] | None = None) -> Response:
        """A 200 with a payload that is JSON text already."""
        return json_response(200, text, headers)

    def handing(self, record: Record) -> list[tuple[str, str]]:
        """The headers that hand ``record``'s token to the client."""
        return session_headers(record, self.prefix, self.request.scheme == "https")


Handler = Callable[[Call], Response]


# -- handlers: one per route -----------------------------------------------------------------


def reset(call: Call) -> Response:
    data = parse_reset_body(call.request.body).model_dump(exclude_unset=True)
    service = call.service
    found = None if call.stateless else call.found()
    if call.stateless:
        record = call.session()
    else:
        record = service.open(call.env_id, "http", call.request.client) if found is None else found
    try:
        payload = service.reset(record, data, ("body",), on_hang=call.on_hang, http=True)
    except CapacityError:
        raise
    except EnvwireError:
        if found is None and not call.stateless:
            service.close(record)
        raise
    return call.payload(payload, None if call.stateless else call.handing(record))


def step_http(call: Call) -> Response:
    body = parse_step_body(call.request.body)
    kwargs = body.model_dump(exclude_unset=True, exclude={"action"})
    record = call.session()
    return call.payload(
        step(call.service, record, body.action, on_hang=call.on_hang, kwargs=kwargs, http=True)
    )


def state(call: Call) -> Response:
    return call.json(call.service.state(call.session(), on_hang=call.on_hang))


def sample(call: Call) -> Response:
    return call.json(call.service.sample(call.session(), on_hang=call.on_hang))


def health(call: Call) -> Response:
    return call.json({"status": "healthy", **call.server.health()})


def metadata(call: Call) -> Response:
    return call.json(call.service.binding(call.env_id).metadata())


def schema(call: Call) -> Response:
    return call.json(call.service.binding(call.env_id).schema())


def docs(call: Call) -> Response:
    page = openapi.swagger_page(call.env_id, call.prefix)
    return Response(200, page.encode(), "text/html; charset=utf-8")


def websocket_only(call: Call) -> Response:
    return detail(400, "this is a WebSocket endpoint: connect with a WebSocket client")


def mcp_http(call: Call) -> Response:
    rpc = parse_rpc(call.request.body)
    if isinstance(rpc, dict):
        return call.json(rpc)
    if rpc.notification and rpc.method.startswith("notifications/"):
        return Response(202)
    mine = call.found()
    return call.json(mcp.answer(call.service, rpc, call.env_id, mine, call.request.client))


def open_session(call: Call) -> Response:
    record = call.service.open(call.env_id, "http", call.request.client)
    body = {
        "session_id": record.token,
        "env_id": call.env_id,
        "describe": record.binding.describe(),
    }
    return call.json(body, call.handing(record))


def describe_session(call: Call) -> Response:
    record = call.session()
    return call.json(
        {
            "session_id": record.token,
            "env_id": call.env_id,
            "episode_id": record.episode_id,
            "session": summary(record.session),
        }
    )


def close_session(call: Call) -> Response:
    record = call.session()
    call.service.close(record)
    return call.json({"session_id": record.token, "closed": True}, [expired_cookie(call.prefix)])


def envs(call: Call) -> Response:
    service = call.service
    return call.json({"envs": list(service.catalog), "default": service.default_env})


def status(call: Call) -> Response:
    return call.json(call.server.status())
