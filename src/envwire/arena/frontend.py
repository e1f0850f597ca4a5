"""The arena inside envwire's own HTTP front end (``envwire serve --http PORT --arena-db FILE``).

The front end answers each request with a router's ``handle(request, on_hang)`` in the
connection's thread. :func:`arena_router` puts the arena's routes in front of that router when
the server's options enable the arena, and returns the router unchanged otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from envwire.arena.web import ArenaWeb, WebRequest, web_for

if TYPE_CHECKING:
    from envwire.errors import EnvTimeoutError
    from envwire.server.openenv.wire import Request, Response

__all__ = ["ArenaRouter", "arena_router"]


class _Router(Protocol):
    def handle(
        self, request: Request, on_hang: Callable[[EnvTimeoutError], None] | None = None
    ) -> Response: ...


R = TypeVar("R", bound=_Router)


class ArenaRouter:
    """Arena paths go to the arena, every other path to ``fallback``."""

    def __init__(self, web: ArenaWeb, fallback: _Router) -> None:
        self.web = web
        self.fallback = fallback

    def handle(
        self, request: Request, on_hang: Callable[[EnvTimeoutError], None] | None = None
    ) -> Response:
        """The response to one request (never raises)."""
        from envwire.server.openenv.wire import Response

        base = f"http://{request.header('host') or '127.0.0.1'}/"
        reply = self.web.handle(
            WebRequest(request.method, request.path, request.headers, request.body, base)
        )
        if reply is None:
            return self.fallback.handle(request, on_hang)
        return Response(reply.status, reply.body, reply.content_type, reply.headers)


def arena_router(server: Any, router: R) -> R | ArenaRouter:
    """``router`` with the arena in front when ``server``'s options set ``arena_db``."""
    web = web_for(server)
    return router if web is None else ArenaRouter(web, router)
