"""What the AISysProj server's admin API does, over an arena: the operations behind its routes.

Each method is one request of that server's ``AdminClient``; the HTTP side
(:mod:`envwire.arena.web.aisys`) parses requests, checks the admin password and reports
errors. Differences from that server are deliberate and listed in ``docs/arena/index.md``.

- :meth:`CourseAdmin.make_env`: ``env_class`` is a plugin env (``package.module:Class`` of the
  plugin interface, found on the plugins folder or the Python path; ``config`` goes to it), or
  any env id the arena takes (a catalog id such as ``envwire/Nim-v0``, an entry point), with
  ``config`` as the arena settings object.
- :meth:`CourseAdmin.make_agent`: a fresh password; ``{agent, pwd, env}`` (the client adds the
  url).
- :meth:`CourseAdmin.results`: ratings as that server reports them: ``rating`` is the best
  rating of fully evaluated agents and the env's initial rating for the others; agents without
  finished runs are not listed.
"""

from __future__ import annotations

import re
from typing import Any

from envwire.arena.accounts import check_imported_name, hash_secret, new_secret
from envwire.arena.aisys.plugins import PREFIX, PluginFolder, is_plugin_id, load_env_class
from envwire.arena.core import Arena
from envwire.arena.errors import ConflictError, ForbiddenError, NotFoundError
from envwire.arena.groups import Groups
from envwire.arena.rows import EnvRow
from envwire.errors import ConfigError, InvalidArgumentError
from envwire.jsonio import JsonObject, JsonValue

__all__ = ["CourseAdmin"]

# The first character of an agent name that server takes (it matches a prefix only).
_AGENT_START = re.compile(r"[a-zA-Z0-9 \[\]_()-]")


class CourseAdmin:
    """The admin API of the AISysProj server over one arena.

    Args:
        arena: the arena.
        plugins: the plugins folder (plugin envs and uploads), or None.
        allow_upload: whether plugins may be uploaded (code from the network: off by default).
    """

    def __init__(
        self, arena: Arena, plugins: PluginFolder | None = None, *, allow_upload: bool = False
    ) -> None:
        self.arena = arena
        self.store = arena.store
        self.plugins = plugins
        self.allow_upload = allow_upload
        self.groups = Groups(arena.store)

    # -- envs and agents -------------------------------------------------------------------

    def _plugin_class(self, env_class: str) -> type | None:
        """The plugin class ``env_class`` names, or None when it is not a plugin env."""
        if is_plugin_id(env_class):
            return load_env_class(env_class)
        if ":" not in env_class or "/" in env_class or "=" in env_class or "@" in env_class:
            return None
        try:
            return load_env_class(env_class)
        except ConfigError:
            return None

    def make_env(
        self, name: str, env_class: str, display_name: str, config: JsonValue, *, overwrite: bool
    ) -> EnvRow:
        """Create (or, with ``overwrite``, redefine) arena env ``name``.

        Raises:
            InvalidArgumentError: a bad name, or ``config`` is not a settings object for a
                non-plugin env.
            ConflictError: the env exists and ``overwrite`` is false.
            ConfigError, EnvError: the env cannot be made.
        """
        check_imported_name(name, "arena env")
        if self.store.env(name) is not None and not overwrite:
            raise ConflictError(f"Environment {name} already exists")
        cls = self._plugin_class(env_class)
        if cls is not None:
            env_id = env_class if is_plugin_id(env_class) else PREFIX + env_class
            settings: JsonObject = {"config": config}
        else:
            if config is not None and not isinstance(config, dict):
                raise InvalidArgumentError(
                    f"config of {env_class!r}: expected the arena settings object, got {config!r}"
                )
            env_id, settings = env_class, config or {}
        row = self.arena.admin.env_row(name, env_id, settings, display_name)
        self.store.put_env(row)
        return row

    def make_agent(self, env: str, agent: str, *, overwrite: bool) -> dict[str, str]:
        """Create an agent (or give it a new password, with ``overwrite``).

        Raises:
            NotFoundError: no such env.
            InvalidArgumentError: a name that server refuses, or one envwire cannot serve.
            ConflictError: the agent exists and ``overwrite`` is false.
        """
        if self.store.env(env) is None:
            raise NotFoundError(f"No such environment {env}")
        if not _AGENT_START.match(agent):
            raise InvalidArgumentError(f'Illegal agent name "{agent}"')
        check_imported_name(agent, "agent")
        if self.store.agent(env, agent) is not None and not overwrite:
            raise ConflictError(f"Agent {env}/{agent} already exists")
        password = new_secret()
        self.store.put_agent(env, agent, hash_secret(password))
        return {"agent": agent, "pwd": password, "env": env}

    def set_blocked(self, env: str, agent: str, blocked: bool) -> None:
        """Block or unblock an agent.

        Raises:
            NotFoundError: no such env or agent.
        """
        self.arena.admin.set_blocked(env, agent, blocked)

    # -- results -----------------------------------------------------------------------------

    def results(self, env: str) -> dict[str, dict[str, Any]]:
        """``{agent: {"rating", "fully-evaluated", "total-runs"}}`` of an env.

        Raises:
            NotFoundError: no such env.
        """
        row = self.arena.admin.env(env)
        initial = float(row.settings.get("initial_rating", 0.0))
        return {
            a.name: {
                "rating": (a.best_rating if a.best_rating is not None else initial)
                if a.fully_evaluated
                else initial,
                "fully-evaluated": a.fully_evaluated,
                "total-runs": a.total_runs,
            }
            for a in self.store.agents(env)
            if a.total_runs > 0
        }

    def all_results(self) -> dict[str, dict[str, dict[str, Any]]]:
        """:meth:`results` of every env."""
        return {env.name: self.results(env.name) for env in self.store.envs()}

    def envs_and_groups(self) -> dict[str, list[str]]:
        """``{env: [titles of the groups listing it]}``."""
        return {
            env.name: [g.title for g in self.groups.of_env(env.name)] for env in self.store.envs()
        }

    # -- plugins -----------------------------------------------------------------------------

    def upload_plugin(self, data: bytes) -> str:
        """Install an uploaded plugin package; envs made from it restart with the new code.

        Raises:
            ForbiddenError: the server has no plugins folder or does not take uploads.
            InvalidArgumentError: the upload is not an acceptable plugin.
        """
        if self.plugins is None or not self.allow_upload:
            raise ForbiddenError(
                "this server takes no plugin uploads (start it with --arena-plugins DIR "
                "--arena-plugin-upload)"
            )
        package = self.plugins.upload(data)
        self.arena.forget_games(lambda env_id: plugin_package(env_id) == package)
        return package


def plugin_package(env_id: str) -> str | None:
    """The top-level package of a plugin env id (None for other envs)."""
    if not is_plugin_id(env_id):
        return None
    return env_id[len(PREFIX) :].split(":", 1)[0].split(".", 1)[0]
