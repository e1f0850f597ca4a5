"""The arena as an ASGI application, for deployments behind uvicorn, hypercorn or gunicorn::

    # app.py
    from envwire.arena.web.asgi import create_app
    app = create_app("arena.sqlite3", public_url="https://arena.example.org/")

    $ uvicorn app:app --port 8000

No framework: the app reads the body (refusing it past the arena's size limit), runs
:meth:`ArenaWeb.handle <envwire.arena.web.routes.ArenaWeb.handle>` in a worker thread and writes the
response. Paths that are not the arena's get 404. The database is closed at lifespan shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from envwire.arena.core import Arena
from envwire.arena.errors import ARENA_STATUS, BodyTooLargeError, NotFoundError
from envwire.arena.opening import open_arena
from envwire.arena.web import arena_web
from envwire.protocols.arena import error_reply
from envwire.protocols.http.http11 import Request, Response
from envwire.registry import Catalog
from envwire.runtime import make_worker
from envwire.settings import ArenaSettings

__all__ = ["create_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_DRAIN_FACTOR = 16  # an oversized body is read (and dropped) up to this many limits


def create_app(
    arena: Arena | str | Path,
    *,
    catalog: Catalog | None = None,
    public_url: str | None = None,
) -> ASGIApp:
    """An ASGI app serving ``arena`` (an :class:`Arena`, or the path of its database)."""
    if not isinstance(arena, Arena):
        settings = ArenaSettings(arena_db=str(arena))
        arena = open_arena(settings, catalog, worker_factory=make_worker)
    web = arena_web(arena, public_url=public_url)
    limit = arena.max_body

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(arena, receive, send)
            return
        if scope["type"] != "http":
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:  # refused before reading
            error = BodyTooLargeError(
                f"request body of {int(declared)} bytes is over the {limit}-byte limit"
            )
            await _send(send, Response(*error_reply(error, ARENA_STATUS)))
            return
        body, too_big = await _read(receive, limit)
        if too_big:
            error = BodyTooLargeError(f"request body is over the {limit}-byte limit")
            await _send(send, Response(*error_reply(error, ARENA_STATUS)))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request = Request(
            scope["method"],
            scope["path"],
            scope.get("query_string", b"").decode("latin-1"),
            headers,
            body,
            scheme=scope.get("scheme", "http"),
        )
        response = await asyncio.to_thread(web.handle, request)
        if response is None:
            response = Response(
                *error_reply(NotFoundError(f"no arena page {request.path}"), ARENA_STATUS)
            )
        await _send(send, response, head=scope["method"] == "HEAD")

    return app


async def _lifespan(arena: Arena, receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            arena.close()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size, too_big = 0, False
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", too_big
        chunk = message.get("body", b"")
        size += len(chunk)
        too_big = too_big or size > limit
        if not too_big:
            chunks.append(chunk)
        if not message.get("more_body", False) or size > limit * _DRAIN_FACTOR:
            return b"".join(chunks), too_big


async def _send(send: Send, response: Response, *, head: bool = False) -> None:
    headers = [
        (b"content-type", response.content_type.encode()),
        (b"content-length", str(len(response.body)).encode()),
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers),
    ]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else response.body})
