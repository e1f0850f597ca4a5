"""The arena a server's settings open (``envwire serve --arena-db FILE``)."""

from __future__ import annotations

from collections.abc import Callable

from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.logins import LoginLimits
from envwire.arena.store import Store
from envwire.registry import Catalog
from envwire.session import SessionObserver, WorkerFactory
from envwire.settings import ArenaSettings

__all__ = ["open_arena", "plugin_folder"]


def open_arena(
    settings: ArenaSettings,
    catalog: Catalog | None,
    *,
    worker_factory: WorkerFactory,
    observer: SessionObserver | None = None,
    on_actions: Callable[[str, int], None] | None = None,
) -> Arena:
    """An :class:`Arena` over the database ``settings.arena_db`` names, its envs made by
    ``worker_factory`` (``observer`` and ``on_actions``: see :class:`Arena`)."""
    assert settings.arena_db is not None
    store = Store(settings.arena_db, sync="normal" if settings.arena_sync == "normal" else "full")
    return Arena(
        store,
        catalog,
        worker_factory=worker_factory,
        max_body=settings.arena_max_body,
        live_runs=settings.arena_live_runs,
        logins=LoginLimits(
            settings.arena_login_failures,
            settings.arena_login_failures_per_address,
            settings.arena_login_window,
        ),
        observer=observer,
        on_actions=on_actions,
    )


def plugin_folder(settings: ArenaSettings) -> PluginFolder | None:
    """The plugins folder the settings name (put on the import path), or None."""
    return None if settings.arena_plugins is None else PluginFolder(settings.arena_plugins)
