"""The arena's HTTP side: its endpoints, pages and ASGI app.

- :mod:`.routes`: :class:`ArenaWeb`, the act endpoint, the pages, the public JSON and the admin
  API, as plain request-in, response-out handlers (any HTTP server can mount them);
- :mod:`.mount`: :class:`ArenaMount`, the arena on envwire's own HTTP front end
  (:mod:`envwire.server.http`), made by :func:`arena_mount` from the server's settings;
- :mod:`.aisys`: the AISysProj server's admin API and public routes, beside envwire's own;
- :mod:`.pages`: the HTML of leaderboards, agent pages and run histories;
- :mod:`.asgi`: :func:`~envwire.arena.web.asgi.create_app`, the arena behind any ASGI server.

The arena itself (runs, store, accounts, ratings) is :mod:`envwire.arena`.
"""

from collections.abc import Callable
from typing import cast

from envwire.arena.aisys.admin import CourseAdmin
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.opening import open_arena, plugin_folder
from envwire.arena.web.aisys import AisysRoutes
from envwire.arena.web.mount import ArenaMount
from envwire.arena.web.routes import ArenaWeb
from envwire.registry import Catalog
from envwire.session import SessionObserver, WorkerFactory
from envwire.settings import ArenaSettings

__all__ = ["ArenaMount", "ArenaWeb", "arena_mount", "arena_paths", "arena_web"]


def arena_web(
    arena: Arena,
    *,
    public_url: str | None = None,
    plugins: PluginFolder | None = None,
    plugin_upload: bool = False,
) -> ArenaWeb:
    """The arena's endpoints with the AISysProj server's routes mounted beside them."""
    web = ArenaWeb(arena, public_url=public_url)
    course = CourseAdmin(arena, plugins, allow_upload=plugin_upload)
    web.mount(AisysRoutes(web, course).routes)
    return web


def arena_mount(
    settings: ArenaSettings,
    catalog: Catalog,
    *,
    worker_factory: WorkerFactory,
    observer: SessionObserver | None = None,
    on_actions: Callable[[str, int], None] | None = None,
) -> ArenaMount:
    """The arena the settings name (``arena_db`` must be set), as a mount of the HTTP front
    end (``worker_factory``, ``observer`` and ``on_actions``: see :class:`Arena`)."""
    arena = open_arena(
        settings, catalog, worker_factory=worker_factory, observer=observer, on_actions=on_actions
    )
    web = arena_web(
        arena,
        public_url=settings.arena_url,
        plugins=plugin_folder(settings),
        plugin_upload=settings.arena_plugin_upload,
    )
    return ArenaMount(arena, web, settings.arena_url)


def arena_paths() -> Callable[[str], bool]:
    """Whether a path is one of the arena's routes, known without opening an arena: for the
    workers of a server that pass the arena's requests to the worker holding it."""
    web = ArenaWeb(cast(Arena, None))
    web.mount(AisysRoutes(web, cast(CourseAdmin, None)).routes)
    return web.owns
