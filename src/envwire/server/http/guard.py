"""What the HTTP front end checks before it routes a request (docs/guides/security.md).

- every request: its ``Host`` must name this server and its ``Origin``, if any, must be the
  server's own or an allowed one (403 otherwise): a web page the operator visits cannot drive
  the server through the browser (DNS rebinding, CSRF, cross-site WebSocket hijacking);
- with tokens: the mounts that need one (OpenEnv's routes but ``/health``, the dashboard, and
  every WebSocket upgrade) ask :meth:`Guard.token` (401 otherwise); the arena's paths have their
  own accounts.

Refusals are made by the front end's ``refusal`` function (the JSON error body every other
error on that port uses), and never echo more than a few dozen characters of what the client
sent.
"""

from __future__ import annotations

from collections.abc import Callable

from envwire.errors import (
    EnvwireError,
    ForbiddenError,
    ProtocolError,
    UnauthenticatedError,
    clip,
)
from envwire.protocols.http.http11 import Request, Response
from envwire.server.ratelog import refusals
from envwire.server.security import Security
from envwire.server.security.tokens import presented_token

__all__ = ["Guard", "Refusal"]

#: The answer an HTTP port gives to an error of its own (its JSON error body).
Refusal = Callable[[EnvwireError], Response]


class Guard:
    """The checks of one HTTP front end bound to ``bound_host``; ``refusal`` makes its
    answers."""

    def __init__(self, security: Security, bound_host: str, refusal: Refusal) -> None:
        self.security = security
        self.hosts = security.host_policy(bound_host)
        self.scheme = "https" if security.tls is not None else "http"
        self.refusal = refusal

    def _refuse(self, error: EnvwireError, *headers: tuple[str, str]) -> Response:
        response = self.refusal(error)
        response.headers.extend(headers)
        return response

    def browser(self, request: Request) -> Response | None:
        """403 when ``Host`` or ``Origin`` is foreign (400 when an HTTP/1.1 request has no
        ``Host``; browsers always send one, so an HTTP/1.0 request without it passes);
        None when both are fine."""
        host = request.header("host")
        if not host and request.version != "HTTP/1.0":
            return self._refuse(ProtocolError("an HTTP/1.1 request needs a Host header"))
        if host and not self.hosts.host_allowed(host):
            return self._refuse(
                ForbiddenError(
                    f"host {clip(host, 60)} is not one this server answers to; add it with "
                    "--allowed-host (or allowed_hosts in the config) if clients use that name"
                )
            )
        origin = request.headers.get("origin")
        if not self.hosts.origin_allowed(origin, host):
            return self._refuse(
                ForbiddenError(
                    f"requests from origin {clip(origin, 60)} are not allowed; add it with "
                    "--allowed-origin (or allowed_origins in the config) to allow that site"
                )
            )
        return None

    def principal(self, request: Request) -> str | None:
        """Who the request's token says its client is (None: no accepted token, or no tokens
        on this server)."""
        tokens = self.security.tokens
        if tokens is None:
            return None
        return tokens.principal(presented_token(request.header("authorization")))

    def token(self, request: Request) -> Response | None:
        """401 when the server has tokens and the request carries none of them."""
        tokens = self.security.tokens
        if tokens is None or tokens.check_header(request.header("authorization")):
            return None
        given = "no token" if not request.header("authorization") else "a token not accepted"
        refusals(
            "http", request.client or "?", f"{given} ({request.method} {clip(request.path, 60)})"
        )
        return self._refuse(
            UnauthenticatedError(
                f"this server requires a token (Authorization: Bearer TOKEN); the request "
                f"carried {given}"
            ),
            ("www-authenticate", 'Bearer realm="envwire"'),
        )
