"""The arena's server options, and the arena they open."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import DEFAULT_MAX_BODY, Arena
from envwire.arena.logins import LoginLimits
from envwire.arena.store import Store, Sync
from envwire.errors import ConfigError
from envwire.registry import Catalog
from envwire.session import SessionObserver, WorkerFactory

__all__ = ["ArenaOptions", "open_arena"]


@dataclass(frozen=True, slots=True)
class ArenaOptions:
    """Server options of the arena (``envwire serve --arena-db ...`` or ``[server]`` keys)."""

    db: str
    sync: Sync = "full"
    max_body: int = DEFAULT_MAX_BODY
    live_runs: int = 1024
    public_url: str | None = None
    plugins: str | None = None  # the AISysProj plugins folder
    plugin_upload: bool = False  # whether admins may upload plugins (code) over HTTP
    login_failures: int = 10
    login_failures_per_address: int = 30
    login_window: float = 60.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ArenaOptions | None:
        """The arena's options among a server's options; None when the arena is off.

        Raises:
            ConfigError: a value has the wrong type.
        """
        db = options.get("arena_db")
        if not db:
            return None
        sync = options.get("arena_sync") or "full"
        if sync not in ("full", "normal"):
            raise ConfigError(f"arena_sync must be 'full' or 'normal', got {sync!r}")
        try:
            max_body = int(options.get("arena_max_body") or DEFAULT_MAX_BODY)
            live_runs = int(options.get("arena_live_runs") or 1024)
            failures = int(options.get("arena_login_failures", 10))
            per_address = int(options.get("arena_login_failures_per_address", 30))
            window = float(options.get("arena_login_window", 60.0))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"arena options: {exc}") from exc
        if failures < 1 or per_address < 1 or not window > 0:
            raise ConfigError("arena_login_failures (and per address) must be >= 1, the window > 0")
        url = options.get("arena_url") or None
        plugins = options.get("arena_plugins") or None
        upload = options.get("arena_plugin_upload", False)
        if not isinstance(upload, bool):
            raise ConfigError(f"arena_plugin_upload must be true or false, got {upload!r}")
        if upload and plugins is None:
            raise ConfigError("arena_plugin_upload needs arena_plugins (the plugins folder)")
        return cls(
            str(db),
            "normal" if sync == "normal" else "full",
            max_body,
            live_runs,
            url,
            None if plugins is None else str(plugins),
            upload,
            failures,
            per_address,
            window,
        )

    def plugin_folder(self) -> PluginFolder | None:
        """The plugins folder (put on the import path), or None."""
        return None if self.plugins is None else PluginFolder(self.plugins)


def open_arena(
    options: ArenaOptions,
    catalog: Catalog | None,
    *,
    worker_factory: WorkerFactory,
    observer: SessionObserver | None = None,
    on_actions: Callable[[str, int], None] | None = None,
) -> Arena:
    """An :class:`Arena` over the database the options name, its envs made by
    ``worker_factory`` (``observer`` and ``on_actions``: see :class:`Arena`)."""
    store = Store(options.db, sync=options.sync)
    return Arena(
        store,
        catalog,
        worker_factory=worker_factory,
        max_body=options.max_body,
        live_runs=options.live_runs,
        logins=LoginLimits(
            options.login_failures, options.login_failures_per_address, options.login_window
        ),
        observer=observer,
        on_actions=on_actions,
    )
