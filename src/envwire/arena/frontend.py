"""The arena inside envwire's own HTTP front end (``envwire serve --http PORT --arena-db FILE``).

The front end answers each request with a router's ``handle(request, on_hang)`` in the
connection's thread. :func:`arena_router` puts the arena's routes in front of that router when
the server's options enable the arena, and returns the router unchanged otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from envwire.arena.web import ArenaWeb, web_for
from envwire.protocols.http11 import Request, Response

if TYPE_CHECKING:
    from envwire.errors import EnvTimeoutError

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
        reply = self.web.handle(request)
        return self.fallback.handle(request, on_hang) if reply is None else reply


def arena_router(server: Any, router: R) -> R | ArenaRouter:
    """``router`` with the arena in front when ``server``'s options set ``arena_db``."""
    web = web_for(server)
    return router if web is None else ArenaRouter(web, router)
