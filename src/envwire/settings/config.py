"""The config file (``envwire serve --config FILE``), read and checked as a whole at start.

It holds a ``[server]`` table (the settings of :mod:`.sections`) and ``[[env]]`` tables, one per
env served::

    [server]
    gym_socket = 5001

    [[env]]
    id = "my/Env-v0"
    entry_point = "mypkg.envs:MyEnv"
    isolation = "process"

Any other table, an unknown key in either, or a value of the wrong kind is a
:class:`~envwire.errors.ConfigError` naming the file, the table, the key and what it expects
(and the nearest valid key or value, when one is close). An ``[[env]]`` table without
``entry_point`` changes an env ``envwire serve ID`` would serve (``id = "CartPole-v1"``,
``max_episode_steps = 100``).
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envwire.errors import ConfigError, clip
from envwire.registry import EnvSpec, parse_env_arg
from envwire.settings.load import Source, load
from envwire.settings.values import Choice, Count, Flag, Kind, Names, Seconds, Text

__all__ = ["ConfigFile", "ENV_KEYS", "env_spec", "read"]

#: What each key of an ``[[env]]`` table takes (tables: ``kwargs``, ``ray``, ``openenv``).
ENV_KEYS: dict[str, Kind | type[dict[str, Any]]] = {
    "id": Text("an env id", optional=False),
    "entry_point": Text("an entry point (package.module:attr, a Gymnasium id, ...)"),
    "kwargs": dict,
    "isolation": Choice(("auto", "inline", "process", "pool", "ray")),
    "max_episode_steps": Count(1, optional=True),
    "step_timeout": Seconds(),
    "make_timeout": Seconds(),
    "client_kwargs": Names("argument names"),
    "ray": dict,
    "record": Flag(),
    "openenv": dict,
    "max_sessions": Count(1, optional=True),
    "session_timeout": Seconds(optional=True),
}


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A config file's contents, checked: its ``[server]`` table and its envs."""

    path: str
    server: Source
    envs: tuple[EnvSpec, ...]


def _nearest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read(path: str | Path) -> ConfigFile:
    """Read and check a config file.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds a mistake (see the module
            docstring).
    """
    name = str(path)
    try:
        document = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {name}: {exc}") from exc
    for table in document:
        if table not in ("server", "env"):
            hint = _nearest(table, ["server", "env"])
            raise ConfigError(
                f"{name}: unknown table [{table}]{hint}; a config file holds [server] and "
                "[[env]] tables"
            )
    server = document.get("server", {})
    if not isinstance(server, dict):
        raise ConfigError(f"{name}: server must be a table ([server]), got {clip(repr(server))}")
    tables = document.get("env", [])
    if not isinstance(tables, list):
        raise ConfigError(f"{name}: env must be an array of tables ([[env]]), got one table")
    source = Source(f"{name} [server]", server)
    load([source])  # every key and value checked now, before the flags are laid over it
    envs = tuple(env_spec(table, f"{name} [[env]] #{n}") for n, table in enumerate(tables, 1))
    return ConfigFile(name, source, envs)


def env_spec(table: Mapping[str, Any], where: str) -> EnvSpec:
    """The :class:`EnvSpec` one ``[[env]]`` table describes.

    Raises:
        ConfigError: an unknown key, a value of the wrong kind, a missing id, or a missing
            ``entry_point`` for an id ``envwire serve`` does not know by itself.
    """
    if "id" not in table:
        raise ConfigError(f"{where}: id is missing (the id clients name the env by)")
    values: dict[str, Any] = {}
    for key, value in table.items():
        kind = ENV_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{where}: unknown key {key!r}{_nearest(key, list(ENV_KEYS))}")
        if kind is dict:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {key} must be a table, got {clip(repr(value))}")
            values[key] = value
            continue
        assert isinstance(kind, Kind)
        try:
            values[key] = kind.check(value)
        except (TypeError, ValueError, OverflowError):
            hint = ""
            if isinstance(kind, Choice) and isinstance(value, str):
                hint = _nearest(value, list(kind.choices))
            shown = clip(value) if isinstance(value, str) else clip(repr(value))[1:-1]
            raise ConfigError(f"{where}: {key} must be {kind.expects}, got {shown}{hint}") from None
    env_id = values["id"]
    if values.get("entry_point") is None:
        try:
            base = parse_env_arg(env_id)
        except ConfigError as exc:
            raise ConfigError(
                f"{where} ({env_id}): entry_point is missing, and {exc}; an [[env]] table "
                "names its env's entry point unless its id is one envwire serve knows"
            ) from None
        values["entry_point"] = base.entry_point
        if base.openenv is not None and "openenv" not in values:
            values["openenv"] = base.openenv
    if "client_kwargs" in values:
        values["client_kwargs"] = tuple(values["client_kwargs"])
    known = {f.name for f in dataclasses.fields(EnvSpec)}
    assert set(values) <= known, set(values) - known  # ENV_KEYS names EnvSpec's fields
    return EnvSpec(**values)
