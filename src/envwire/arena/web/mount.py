"""The arena on the server's HTTP front end: its routes as a mount, its lifetime the port's."""

from __future__ import annotations

import socket

from envwire.arena.core import Arena
from envwire.arena.web.routes import ArenaWeb
from envwire.protocols.http.http11 import Request, Response
from envwire.server.http import HttpFrontEnd, OnHang, PlainMount

__all__ = ["ArenaMount"]


class ArenaMount(PlainMount):
    """Serves ``web`` (the arena's routes over ``arena``) on the HTTP front end.

    Args:
        arena: the arena, closed when the front end stops.
        web: its routes.
        public_url: the server URL for agent config files; without it, the URL the front end
            listens on is recorded in the database when it starts (``envwire arena add-agent``
            without ``--url`` writes it into config files).
    """

    def __init__(self, arena: Arena, web: ArenaWeb, public_url: str | None) -> None:
        self.arena = arena
        self.web = web
        self.public_url = public_url

    def check(self, head: Request) -> bool | None:
        """The arena's paths are its own: their accounts are checked with the body."""
        return True if self.web.owns(head.path) else None

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        return self.web.handle(request)

    def body_limit(self, request: Request) -> int | None:
        return self.web.body_limit(request)

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        return self.web.refuse(request, status, message)

    def start(self, front: HttpFrontEnd) -> None:
        """Record the server's URL in the arena's database."""
        host = front.host
        shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
        shown = f"[{shown}]" if ":" in shown else shown
        self.arena.store.set_meta("served_url", self.public_url or f"http://{shown}:{front.port}/")

    def stop(self) -> None:
        """Close the arena's envs and database."""
        self.arena.close()
