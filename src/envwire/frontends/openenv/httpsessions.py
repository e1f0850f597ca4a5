"""How an HTTP request names its OpenEnv session, and the errors when it names none.

``/reset`` and ``POST /session`` answer with the session token in the ``Envwire-Session``
header and the ``envwire_session`` cookie (:func:`session_headers`); later requests send
either (:func:`request_tokens`), and MCP over HTTP may name one in its JSON-RPC params
(:func:`session_tokens`, for the HTTP front end's per-session limits).
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

from envwire.errors import EnvwireError
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.protocols.http.http11 import Request

__all__ = [
    "COOKIE",
    "HEADER",
    "SessionMissing",
    "SessionUnknown",
    "cookie_path",
    "expired_cookie",
    "find_session",
    "request_session",
    "request_tokens",
    "session_headers",
    "session_tokens",
]

HEADER = "envwire-session"
COOKIE = "envwire_session"


def request_tokens(request: Request) -> list[str]:
    """The session tokens of a request's header and cookies, header first."""
    tokens = [request.header(HEADER)] if request.header(HEADER) else []
    return tokens + request.cookie_values(COOKIE)


def session_tokens(request: Request) -> list[str]:
    """The session tokens a request names: its header, its cookies, and for MCP over HTTP the
    ``session_id`` of its JSON-RPC params (a body that does not parse names none)."""
    tokens = request_tokens(request)
    if request.method == "POST" and request.path.rstrip("/").endswith("/mcp") and request.body:
        try:
            params = json.loads(request.body).get("params")
        except (ValueError, AttributeError):
            return tokens
        token = params.get("session_id") if isinstance(params, dict) else None
        if isinstance(token, str):
            tokens.append(token)
    return tokens


def find_session(service: OpenEnvService, request: Request, env_id: str) -> Record | None:
    """The request's session for ``env_id`` (header first, then cookies), if any."""
    for token in request_tokens(request):
        record = service.find(token)
        if record is not None and record.env_id == env_id:
            return record
    return None


def request_session(service: OpenEnvService, request: Request, env_id: str) -> Record:
    """The request's session for ``env_id``.

    Raises:
        SessionMissing: without a session (400).
        SessionUnknown: for an unknown or expired one (404).
    """
    record = find_session(service, request, env_id)
    if record is not None:
        return record
    if request_tokens(request):
        raise SessionUnknown(env_id)
    raise SessionMissing(env_id)


def cookie_path(prefix: str) -> str:
    """The cookie's ``Path`` for an env's URL prefix."""
    # Cookie attributes end at ';' and the header at a line break: quote strictly.
    return quote(unquote(prefix), safe="/-._~:@") if prefix else "/"


def session_headers(record: Record, prefix: str, secure: bool) -> list[tuple[str, str]]:
    """The headers that hand a session's token to the client (``secure``: under TLS)."""
    assert record.token is not None
    cookie = f"{COOKIE}={record.token}; Path={cookie_path(prefix)}; HttpOnly; SameSite=Lax"
    if secure:  # under TLS the cookie never travels over plain HTTP
        cookie += "; Secure"
    return [(HEADER, record.token), ("set-cookie", cookie)]


def expired_cookie(prefix: str) -> tuple[str, str]:
    """The header that makes the client forget a closed session's cookie."""
    return (
        "set-cookie",
        f"{COOKIE}=; Path={cookie_path(prefix)}; Max-Age=0; HttpOnly; SameSite=Lax",
    )


class SessionMissing(EnvwireError):
    """A request that continues an episode came without a session."""

    code = "no_session"
    remote = True
    _TEXT = (
        "no session: this request continues an episode of {env_id}, so it needs the session "
        "that POST /reset returned (the {header!r} header or the {cookie!r} cookie)"
    )

    def __init__(self, env_id: str) -> None:
        # Built from the env id, not from a message: a client that reads "no_session" back gets
        # a RemoteError (error_class_for_code skips such classes), never this class.
        super().__init__(self._TEXT.format(env_id=env_id, header=HEADER, cookie=COOKIE))


class SessionUnknown(SessionMissing):
    """A request that continues an episode named a session that is not open (any more)."""

    _TEXT = "unknown or expired session for {env_id}: POST /reset (or /session) opens a new one"
