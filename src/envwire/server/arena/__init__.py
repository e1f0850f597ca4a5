"""The arena's HTTP side (seed 003): its endpoints, pages and ASGI app.

- :mod:`.web`: :class:`ArenaWeb`, the act endpoint, the pages, the public JSON and the admin API,
  as plain request-in, response-out handlers (any HTTP server can mount them: envwire's own
  ``http`` front end does, see :mod:`envwire.server.http`);
- :mod:`.pages`: the HTML of leaderboards, agent pages and run histories;
- :mod:`.asgi`: :func:`~envwire.server.arena.asgi.create_app`, the arena behind any ASGI server.

The arena itself (runs, store, accounts, ratings) is :mod:`envwire.arena`.
"""

from envwire.server.arena.web import ArenaWeb

__all__ = ["ArenaWeb"]
