"""The ``http`` front end (``envwire serve --http PORT``): OpenEnv over HTTP and WebSocket, with
the arena's routes in front when the server's options enable the arena (``--arena-db FILE``).

See :mod:`envwire.server.openenv`, :mod:`envwire.server.arena`, ``docs/openenv.md`` and
``docs/arena.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envwire.arena.core import Arena
from envwire.arena.options import ArenaOptions, open_arena
from envwire.server.arena import ArenaWeb
from envwire.server.openenv import OpenEnvFrontEnd

if TYPE_CHECKING:
    from envwire.server.app import Server

__all__ = ["HttpFrontEnd"]


class HttpFrontEnd(OpenEnvFrontEnd):
    """OpenEnv on ``host:port``; the arena too when ``server.config.options`` has ``arena_db``
    (and ``arena_sync``, ``arena_max_body``, ``arena_live_runs``, ``arena_url``).

    Raises:
        ConfigError: an arena option has the wrong type.
    """

    def __init__(self, server: Server, host: str = "127.0.0.1", port: int = 8000) -> None:
        options = ArenaOptions.from_options(server.config.options)
        self.arena: Arena | None = None
        if options is None:
            super().__init__(server, host, port)
            return
        # the server's factory: arena envs with ray isolation go to the server's Ray cluster
        self.arena = open_arena(
            options, server.catalog, worker_factory=server.sessions.worker_factory
        )
        web = ArenaWeb(self.arena, public_url=options.public_url)
        super().__init__(server, host, port, mounts=(web.handle,))

    def stop(self) -> None:
        """Stop serving, then close the arena's envs and database."""
        super().stop()
        if self.arena is not None:
            self.arena.close()
