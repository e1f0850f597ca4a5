"""The arena's HTTP side: its endpoints, pages and ASGI app.

- :mod:`.web`: :class:`ArenaWeb`, the act endpoint, the pages, the public JSON and the admin API,
  as plain request-in, response-out handlers (any HTTP server can mount them: envwire's own
  ``http`` front end does, see :mod:`envwire.server.http`);
- :mod:`.aisys`: the AISysProj server's admin API and public routes, beside envwire's own;
- :mod:`.pages`: the HTML of leaderboards, agent pages and run histories;
- :mod:`.asgi`: :func:`~envwire.arena.web.asgi.create_app`, the arena behind any ASGI server.

The arena itself (runs, store, accounts, ratings) is :mod:`envwire.arena`.
"""

from envwire.arena.aisys.admin import CourseAdmin
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.web.aisys import AisysRoutes
from envwire.arena.web.routes import ArenaWeb

__all__ = ["ArenaWeb", "arena_web"]


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
