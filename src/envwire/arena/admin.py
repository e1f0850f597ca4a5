"""Arena administration: envs, agents, passwords and admin tokens, over a :class:`Store`.

Shared by the ``envwire arena`` command (working on the database file directly) and the admin
HTTP API (behind an admin token). Every operation validates names and raises envwire errors
that name what is wrong.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from envwire.arena.accounts import Verifier, check_name, hash_secret, new_secret
from envwire.arena.aisys.plugins import arena_settings, is_plugin_id, load_env_class, make_plugin
from envwire.arena.errors import AuthenticationError, ConflictError, NotFoundError
from envwire.arena.rows import AgentRow, EnvRow
from envwire.arena.settings import ArenaEnvSettings
from envwire.arena.store import Store
from envwire.errors import InvalidArgumentError
from envwire.registry import Catalog, EnvSpec, parse_env_arg

__all__ = ["DEFAULT_URL", "ArenaAdmin", "resolve_spec"]

#: The server URL written into agent config files when none is known.
DEFAULT_URL = "http://127.0.0.1:8000/"


def resolve_spec(env_id: str, catalog: Catalog | None, kwargs: Mapping[str, Any]) -> EnvSpec:
    """The spec an arena env's catalog id names: the server's catalog entry when it has one,
    else the id read as ``envwire serve`` reads its arguments (Gymnasium and built-in ids,
    ``module:Class``, ``id=module:Class``, ``@process``).

    Raises:
        ConfigError: the id is unknown and not an entry point.
    """
    spec = catalog[env_id] if catalog is not None and env_id in catalog else parse_env_arg(env_id)
    if kwargs:
        spec = replace(spec, kwargs={**spec.kwargs, **kwargs})
    return spec


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


class ArenaAdmin:
    """Admin operations on one arena database."""

    def __init__(self, store: Store, catalog: Catalog | None = None) -> None:
        self.store = store
        self.catalog = catalog
        self._tokens = Verifier()

    # -- envs ------------------------------------------------------------------------------

    def create_env(
        self,
        name: str,
        env_id: str,
        settings: Mapping[str, Any] | None = None,
        *,
        display_name: str = "",
        description: str = "",
        replace: bool = False,
    ) -> EnvRow:
        """Create (or, with ``replace``, redefine) arena env ``name`` hosting catalog env
        ``env_id``. The env is made once to check it and to read its arena defaults.

        Raises:
            InvalidArgumentError: a bad name or setting.
            ConflictError: the env exists and ``replace`` is false.
            ConfigError, EnvError: the env id is unknown or the env cannot be made.
        """
        check_name(name, "arena env")
        if self.store.env(name) is not None and not replace:
            raise ConflictError(f"arena env {name!r} exists; replace it explicitly")
        row = self.env_row(name, env_id, settings, display_name, description)
        self.store.put_env(row)
        return row

    def env_row(
        self,
        name: str,
        env_id: str,
        settings: Mapping[str, Any] | None = None,
        display_name: str = "",
        description: str = "",
    ) -> EnvRow:
        """The arena env ``create_env`` would store (the env is made once), without storing it.

        Raises:
            InvalidArgumentError: a bad setting.
            ConfigError, EnvError: the env id is unknown or the env cannot be made.
        """
        given = dict(settings or {})
        if is_plugin_id(env_id):  # an env of the AISysProj plugin interface
            cls = load_env_class(env_id)
            plugin_defaults, about = arena_settings(cls)
            merged = ArenaEnvSettings.build(plugin_defaults, given)
            make_plugin(cls, display_name or name, name, merged.config)  # it must construct
            return EnvRow(name, env_id, merged.to_json(), display_name or name,
                          description or about, time.time())  # fmt: skip
        kwargs = given.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise InvalidArgumentError(f"arena setting kwargs: expected an object, got {kwargs!r}")
        spec = resolve_spec(env_id, self.catalog, kwargs)
        env = spec.make()
        try:
            defaults = env.metadata.get("arena") if isinstance(env.metadata, dict) else None
        finally:
            env.close()
        merged = ArenaEnvSettings.build(defaults, given)
        return EnvRow(name, env_id, merged.to_json(), display_name or name, description,
                      time.time())  # fmt: skip

    def env(self, name: str) -> EnvRow:
        """The arena env ``name``.

        Raises:
            NotFoundError: there is none.
        """
        row = self.store.env(name)
        if row is None:
            known = ", ".join(e.name for e in self.store.envs()) or "none"
            raise NotFoundError(f"no arena env {name!r} (arena envs: {known})")
        return row

    def list_envs(self) -> list[dict[str, Any]]:
        """Every arena env as a JSON object."""
        result = []
        for row in self.store.envs():
            runs, finished = self.store.count_runs(row.name)
            result.append(
                {
                    "env": row.name,
                    "env_id": row.env_id,
                    "display_name": row.display_name,
                    "settings": row.settings,
                    "agents": len(self.store.agents(row.name)),
                    "runs": runs,
                    "finished_runs": finished,
                }
            )
        return result

    # -- agents ----------------------------------------------------------------------------

    def config(self, env: str, agent: str, password: str, url: str | None) -> dict[str, str]:
        """The agent config file: ``{agent, pwd, env, url}`` (the url ends in '/'): ``url``,
        else the one ``set-url`` stored, else the URL of the server that last served this
        database, else :data:`DEFAULT_URL`."""
        url = url or self.store.meta("public_url") or self.store.meta("served_url") or DEFAULT_URL
        return {"agent": agent, "pwd": password, "env": env, "url": _with_slash(url)}

    def add_agent(
        self, env: str, agent: str, *, url: str | None = None, replace: bool = False
    ) -> dict[str, str]:
        """Create an agent with a fresh password; its config file.

        Raises:
            NotFoundError: no such arena env.
            InvalidArgumentError: a bad agent name.
            ConflictError: the agent exists and ``replace`` is false.
        """
        self.env(env)
        check_name(agent, "agent")
        if self.store.agent(env, agent) is not None and not replace:
            raise ConflictError(f"agent {agent!r} exists in arena env {env!r}")
        password = new_secret()
        self.store.put_agent(env, agent, hash_secret(password))
        return self.config(env, agent, password, url)

    def agent(self, env: str, agent: str) -> AgentRow:
        """The agent ``agent`` of ``env``.

        Raises:
            NotFoundError: no such env or agent.
        """
        self.env(env)
        row = self.store.agent(env, agent)
        if row is None:
            raise NotFoundError(f"no agent {agent!r} in arena env {env!r}")
        return row

    def reset_password(self, env: str, agent: str, *, url: str | None = None) -> dict[str, str]:
        """Give an agent a new password (the old one stops working); its new config file."""
        self.agent(env, agent)
        password = new_secret()
        self.store.put_agent(env, agent, hash_secret(password))
        return self.config(env, agent, password, url)

    def set_blocked(self, env: str, agent: str, blocked: bool) -> None:
        """Block an agent (its requests get 401) or unblock it."""
        self.agent(env, agent)
        self.store.set_blocked(env, agent, blocked)

    def list_agents(self, env: str) -> list[dict[str, Any]]:
        """The agents of an env as JSON objects."""
        self.env(env)
        return [
            {
                "agent": a.name,
                "blocked": a.blocked,
                "total_runs": a.total_runs,
                "rating": a.rating,
                "best_rating": a.best_rating,
                "fully_evaluated": a.fully_evaluated,
            }
            for a in self.store.agents(env)
        ]

    # -- admin tokens --------------------------------------------------------------------

    def new_admin_token(self) -> str:
        """A new admin token for the admin HTTP API (only its hash is stored)."""
        token = new_secret()
        self.store.add_admin_token(hash_secret(token))
        return token

    def add_admin_password(self, password: str) -> None:
        """Accept a password of the admin's choosing as an admin token (only its hash is
        stored).

        Raises:
            InvalidArgumentError: shorter than 8 characters.
        """
        if len(password) < 8:
            raise InvalidArgumentError("an admin password needs at least 8 characters")
        self.store.add_admin_token(hash_secret(password))

    def check_admin_token(self, token: str | None) -> None:
        """Accept a valid admin token.

        Raises:
            AuthenticationError: missing or wrong.
        """
        if not token:
            raise AuthenticationError("admin token required: Authorization: Bearer <token>")
        for stored in self.store.admin_token_hashes():
            if self._tokens.verify(("admin", stored), token, stored):
                return
        raise AuthenticationError("wrong admin token")

    def set_public_url(self, url: str) -> None:
        """The server URL written into agent config files from now on."""
        if not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(
                f"public url must start with http:// or https://, got {url!r}"
            )
        self.store.set_meta("public_url", _with_slash(url))
