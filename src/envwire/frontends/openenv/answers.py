"""The HTTP answers of the OpenEnv routes: FastAPI's shapes, as openenv-core's server sends them.

Errors map to a status through the HTTP table plus the session rows (:data:`STATUS`) and to
an OpenEnv code through OpenEnv's table plus the same rows (:data:`CODES`); 422 bodies carry
FastAPI's ``detail`` list, every other error ``{"detail": text, "code", "openenv_code"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from envwire.errors import EnvwireError
from envwire.frontends.openenv.bindings import ActionRejected
from envwire.frontends.openenv.httpsessions import SessionMissing, SessionUnknown
from envwire.protocols.http.http11 import Response, json_response
from envwire.protocols.http.status import STATUS as HTTP_STATUS
from envwire.protocols.http.status import StatusTable, status_of, statuses
from envwire.protocols.openenv import ERROR_TABLE, ErrorCode, code_of, dumps

__all__ = ["CODES", "STATUS", "detail", "error_response", "not_allowed", "not_found"]

#: The statuses and OpenEnv codes these routes answer with: the tables' and the sessions' rows.
STATUS: StatusTable = statuses(HTTP_STATUS, {SessionMissing: 400, SessionUnknown: 404})
CODES: Mapping[type[EnvwireError], ErrorCode] = MappingProxyType(
    {**ERROR_TABLE, SessionMissing: ErrorCode.SESSION_ERROR}
)


def detail(status: int, text: str, **extra: object) -> Response:
    """``{"detail": text, ...}`` with ``status`` (a 503 asks the client to retry in 1 s)."""
    headers = [("retry-after", "1")] if status == 503 else []
    return json_response(status, dumps({"detail": text, **extra}), headers)


def not_found() -> Response:
    """FastAPI's 404."""
    return json_response(404, '{"detail":"Not Found"}')


def not_allowed(allowed: tuple[str, ...]) -> Response:
    """FastAPI's 405, with the methods the path takes."""
    return json_response(405, '{"detail":"Method Not Allowed"}', [("allow", ", ".join(allowed))])


def error_response(exc: EnvwireError, loc: tuple[str, ...] = ("body",)) -> Response:
    """The HTTP answer to an envwire error (422 bodies carry FastAPI's detail list)."""
    if isinstance(exc, ActionRejected):
        return json_response(422, dumps({"detail": exc.detail, "code": exc.code}))
    status = status_of(exc, STATUS)
    if status == 422:
        entry = {"type": "value_error", "loc": list(loc), "msg": str(exc), "input": None}
        return json_response(422, dumps({"detail": [entry], "code": exc.code}))
    return detail(status, str(exc), code=exc.code, openenv_code=code_of(exc, CODES))
