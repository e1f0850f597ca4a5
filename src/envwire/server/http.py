"""The ``http`` front end (``envwire serve --http PORT``): OpenEnv over HTTP and WebSocket, with
the arena's routes in front when the server's options enable the arena (``--arena-db FILE``).

See :mod:`envwire.frontends.openenv`, :mod:`envwire.arena.web`, ``docs/openenv.md`` and
``docs/arena.md``.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from envwire.arena.core import Arena
from envwire.arena.options import ArenaOptions, open_arena
from envwire.arena.web import arena_web
from envwire.frontends.openenv import OpenEnvFrontEnd
from envwire.observe.dashboard import ObserveWeb

if TYPE_CHECKING:
    from envwire.app import Server

__all__ = ["HttpFrontEnd"]


class HttpFrontEnd(OpenEnvFrontEnd):
    """OpenEnv on ``host:port``, with ``/metrics`` and ``/dashboard`` in front
    (:mod:`envwire.observe.dashboard`); the arena too when ``server.config.options`` has
    ``arena_db`` (and ``arena_sync``, ``arena_max_body``, ``arena_live_runs``, ``arena_url``).

    Raises:
        ConfigError: an arena option has the wrong type.
    """

    def __init__(self, server: Server, host: str = "127.0.0.1", port: int = 8000) -> None:
        options = ArenaOptions.from_options(server.config.options)
        self.arena: Arena | None = None
        observe = ObserveWeb(server.observe, server.security.tokens, server.security.public_metrics)
        if options is None:
            super().__init__(server, host, port, mounts=(observe.handle,))
            return
        # the server's factory: arena envs with ray isolation go to the server's Ray cluster
        self.arena = open_arena(
            options,
            server.catalog,
            worker_factory=server.sessions.worker_factory,
            observer=server.observe,
            on_actions=server.observe.arena_acted,
        )
        self.arena_url = options.public_url
        web = arena_web(
            self.arena,
            public_url=options.public_url,
            plugins=options.plugin_folder(),
            plugin_upload=options.plugin_upload,
        )
        super().__init__(server, host, port, mounts=(observe.handle, web.handle), policies=(web,))

    def start(self) -> tuple[str, int]:
        """Listen; with the arena on, record the server's URL in its database (agent config
        files made by ``envwire arena add-agent`` without ``--url`` carry it)."""
        host, port = super().start()
        if self.arena is not None:
            shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
            shown = f"[{shown}]" if ":" in shown else shown
            self.arena.store.set_meta("served_url", self.arena_url or f"http://{shown}:{port}/")
        return host, port

    def stop(self) -> None:
        """Stop serving, then close the arena's envs and database."""
        super().stop()
        if self.arena is not None:
            self.arena.close()
