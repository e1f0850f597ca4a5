"""Agent config files of an AISysProj course, imported as arena agents with their passwords.

A course hands each student a file ``{"agent", "pwd", "env", "url"}``. :func:`import_configs`
creates (or, with ``replace``, updates) an agent for each file in an arena env, keeping its
password, stored as a salted scrypt hash like every other password, so the students' files
work unchanged against envwire once their ``url`` reaches it (point the old host name at
envwire, or have the students edit the ``url``).

Every file is checked before any agent is written: a file that does not read, is not an object
of four strings, names another env, repeats an agent, or names an agent that exists already
(without ``replace``) fails the whole import, naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envwire.arena.accounts import check_imported_name, hash_secret
from envwire.arena.store import Store
from envwire.errors import InvalidArgumentError
from envwire.jsonio import JsonValue

__all__ = ["MAX_PASSWORD", "ImportedConfig", "import_configs", "read_config"]

#: The longest password accepted from a config file.
MAX_PASSWORD = 1024
_KEYS = ("agent", "pwd", "env", "url")


@dataclass(frozen=True, slots=True)
class ImportedConfig:
    """One config file: where it came from and what it holds."""

    source: str
    agent: str
    pwd: str
    env: str
    url: str


def read_config(source: str, data: JsonValue) -> ImportedConfig:
    """Check one decoded config file.

    Raises:
        InvalidArgumentError: it is not an object with the four strings, or a name or password
            is not acceptable (names the file).
    """
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"{source}: expected a JSON object {{agent, pwd, env, url}}")
    values: dict[str, str] = {}
    for key in _KEYS:
        value = data.get(key)
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{source}: {key!r} must be a string")
        values[key] = value
    pwd = values["pwd"]
    if not pwd or len(pwd) > MAX_PASSWORD or not pwd.isprintable():
        raise InvalidArgumentError(
            f"{source}: the password must be 1-{MAX_PASSWORD} printable characters"
        )
    try:
        check_imported_name(values["agent"], "agent")
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{source}: {exc.message}") from None
    return ImportedConfig(source, values["agent"], pwd, values["env"], values["url"])


def _load(path: Path) -> ImportedConfig:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"{path}: cannot read a JSON config file ({exc})") from None
    return read_config(str(path), data)


def import_configs(
    store: Store,
    env: str,
    files: Iterable[str | Path],
    *,
    replace: bool = False,
    any_env: bool = False,
) -> list[ImportedConfig]:
    """Create an agent of ``env`` for each config file, with the file's password.

    Args:
        store: the arena database.
        env: the arena env the agents join.
        files: the config files.
        replace: give existing agents the file's password instead of failing.
        any_env: accept files whose ``env`` is another name (the env was renamed).

    Raises:
        InvalidArgumentError: no such env, or a file does not qualify (nothing was written).
    """
    if store.env(env) is None:
        raise InvalidArgumentError(f"no arena env {env!r}: create it first")
    configs = [_load(Path(f)) for f in files]
    seen: dict[str, str] = {}
    for config in configs:
        if config.env != env and not any_env:
            raise InvalidArgumentError(
                f"{config.source}: the file is for env {config.env!r}, not {env!r} (pass "
                "--any-env to import it anyway)"
            )
        if config.agent in seen:
            raise InvalidArgumentError(
                f"{config.source}: agent {config.agent!r} is also in {seen[config.agent]}"
            )
        seen[config.agent] = config.source
        if not replace and store.agent(env, config.agent) is not None:
            raise InvalidArgumentError(
                f"{config.source}: agent {config.agent!r} exists in {env!r} (pass --replace "
                "to give it the file's password)"
            )
    hashes = [(c.agent, hash_secret(c.pwd)) for c in configs]
    store.put_agents(env, hashes)
    return configs
