"""Reading the database of an AISysProj server (the original of the arena protocol).

That server keeps everything in one SQLite file (``aisysprojserver.db`` in its persistent
folder). Its tables, as its models define them:

=======================  ========================================================================
``active_environments``  ``identifier`` (the env's name in URLs), ``env_class`` (the plugin's
                         ``module:Class``), ``displayname``, ``displaygroup`` (unused),
                         ``config`` (JSON given to the plugin), ``signup``, ``status``
``accounts``             ``identifier`` (``"<env>/<agent>"``), ``environment``, ``password``
                         (``"sha256:<hex digest>"``), ``status`` (1 active, 0 locked)
``agents``               ratings: ``identifier`` (``"<env>/<agent>"``), ``environment``,
                         ``fully_evaluated``, ``total_runs``, ``recently_finished_runs`` (JSON:
                         the last 20 run ids, oldest first), ``recent_results`` (JSON: the
                         outcomes the rating averages, oldest first), ``best_rating``,
                         ``current_rating``
``runs``                 ``identifier`` (integer), ``environment``, ``agent`` (``"<env>/<a>"``),
                         ``finished``, ``outstanding_action``, ``state`` (JSON), ``history``
                         (JSON list of ``[action, extra info]``), ``outcome`` (JSON)
``groups``               ``identifier``, ``displayname``, ``description_html``
``group_entries``        ``group``, ``entry_type`` (0 a subgroup, 1 an env), ``entry``
``keyval``               ``"<env>#recentruns"``: the env's last 20 finished run ids (JSON)
=======================  ========================================================================

An agent has an ``agents`` row only once a run of it finished. That server deletes finished
runs now and then (keeping each agent's last 20), so ``runs`` may hold fewer runs than
``total_runs`` counts: ratings are read from ``agents``, not recomputed from ``runs``.

:func:`read_database` reads a file into :class:`OriginalDatabase`, opening it read-only.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from envwire.errors import ConfigError
from envwire.jsonio import JsonValue

__all__ = [
    "OriginalAccount",
    "OriginalDatabase",
    "OriginalEnv",
    "OriginalGroup",
    "OriginalRatings",
    "OriginalRun",
    "read_database",
]


@dataclass(frozen=True, slots=True)
class OriginalEnv:
    """An env of the original server: a plugin class and its config."""

    name: str
    env_class: str
    display_name: str
    config: JsonValue


@dataclass(frozen=True, slots=True)
class OriginalAccount:
    """An agent account: its password hash (``sha256:...``) and whether it is locked."""

    env: str
    agent: str
    password_hash: str
    locked: bool


@dataclass(frozen=True, slots=True)
class OriginalRatings:
    """An agent's ratings: ``recent_results`` are the outcomes its rating averages."""

    env: str
    agent: str
    fully_evaluated: bool
    total_runs: int
    recent_runs: tuple[int, ...]
    recent_results: tuple[JsonValue, ...]
    best_rating: float
    current_rating: float


@dataclass(frozen=True, slots=True)
class OriginalRun:
    """A run: its history of ``(action, extra info)``, state and outcome."""

    id: int
    env: str
    agent: str
    finished: bool
    outstanding: bool
    state: JsonValue
    history: tuple[tuple[JsonValue, JsonValue], ...]
    outcome: JsonValue


@dataclass(frozen=True, slots=True)
class OriginalGroup:
    """A group of envs and subgroups shown on one page (``main`` is the front page)."""

    name: str
    title: str
    description_html: str
    envs: tuple[str, ...] = ()
    subgroups: tuple[str, ...] = ()


@dataclass
class OriginalDatabase:
    """Everything read from an original server's database."""

    envs: list[OriginalEnv] = field(default_factory=list)
    accounts: list[OriginalAccount] = field(default_factory=list)
    ratings: list[OriginalRatings] = field(default_factory=list)
    runs: list[OriginalRun] = field(default_factory=list)
    groups: list[OriginalGroup] = field(default_factory=list)


def _split(identifier: str, env: str, table: str) -> str:
    """The agent name of an ``"<env>/<agent>"`` identifier."""
    prefix = env + "/"
    if not identifier.startswith(prefix) or len(identifier) == len(prefix):
        raise ConfigError(f"{table}: identifier {identifier!r} is not '{env}/<agent>'")
    return identifier[len(prefix) :]


def _json(text: str | bytes | int | float | None, where: str) -> JsonValue:
    """The JSON value of a column (None for NULL; any SQLite value may be found there)."""
    if text is None:
        return None
    if not isinstance(text, str | bytes):
        kind = type(text).__name__
        raise ConfigError(f"{where}: not JSON (expected text, got {kind}): {str(text)[:80]!r}")
    try:
        value: JsonValue = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: not JSON ({exc}): {str(text)[:80]!r}") from None
    return value


def _history(value: JsonValue, where: str) -> tuple[tuple[JsonValue, JsonValue], ...]:
    """The ``(action, extra info)`` pairs of a ``history`` column."""
    bad = ConfigError(f"{where}: history must be a JSON list of [action, extra] pairs")
    if not isinstance(value, list):
        raise bad
    pairs: list[tuple[JsonValue, JsonValue]] = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2:
            raise bad
        pairs.append((item[0], item[1]))
    return tuple(pairs)


def _run_ids(values: list[JsonValue], where: str) -> tuple[int, ...]:
    """The run ids of a ``recently_finished_runs`` list (integers, or what ``int`` reads)."""
    ids: list[int] = []
    for value in values:
        if not isinstance(value, int | float | str):
            raise ConfigError(f"{where}: recent runs must be run ids, got {value!r}")
        try:
            ids.append(int(value))
        except (ValueError, OverflowError):
            raise ConfigError(f"{where}: recent runs must be run ids, got {value!r}") from None
    return tuple(ids)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_database(path: str | Path) -> OriginalDatabase:
    """Read an original server's database.

    Raises:
        ConfigError: the file is missing, is not such a database, or a row does not read (the
            message names the table and row).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no database file at {path}")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open {path}: {exc}") from None
    try:
        tables = _tables(db)
        missing = {"active_environments", "accounts", "agents", "runs"} - tables
        if missing:
            tables_missing = ", ".join(sorted(missing))
            raise ConfigError(f"{path} is not an AISysProj server database (no {tables_missing})")
        return _read(db, tables)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    finally:
        db.close()


def _read(db: sqlite3.Connection, tables: set[str]) -> OriginalDatabase:
    out = OriginalDatabase()
    for name, env_class, display, config in db.execute(
        "SELECT identifier, env_class, displayname, config FROM active_environments "
        "ORDER BY identifier"
    ):
        where = f"active_environments {name!r}"
        out.envs.append(
            OriginalEnv(str(name), str(env_class), str(display or name), _json(config, where))
        )
    for ident, env, pwd, status in db.execute(
        "SELECT identifier, environment, password, status FROM accounts ORDER BY identifier"
    ):
        agent = _split(str(ident), str(env), "accounts")
        out.accounts.append(OriginalAccount(str(env), agent, str(pwd), int(status or 0) == 0))
    for row in db.execute(
        "SELECT identifier, environment, fully_evaluated, total_runs, recently_finished_runs, "
        "recent_results, best_rating, current_rating FROM agents ORDER BY rowid"
    ):
        ident, env = str(row[0]), str(row[1])
        where = f"agents {ident!r}"
        recent = _json(row[4], where) or []
        results = _json(row[5], where) or []
        if not isinstance(recent, list) or not isinstance(results, list):
            raise ConfigError(f"{where}: recent runs and results must be JSON lists")
        out.ratings.append(
            OriginalRatings(
                env,
                _split(ident, env, "agents"),
                bool(row[2]),
                int(row[3] or 0),
                _run_ids(recent, where),
                tuple(results),
                float(row[6] if row[6] is not None else 0.0),
                float(row[7] if row[7] is not None else 0.0),
            )
        )
    for row in db.execute(
        "SELECT identifier, environment, agent, finished, outstanding_action, state, history, "
        "outcome FROM runs ORDER BY identifier"
    ):
        run_id, env = int(row[0]), str(row[1])
        where = f"runs {run_id}"
        history = _history(_json(row[6], where) or [], where)
        out.runs.append(
            OriginalRun(
                run_id,
                env,
                _split(str(row[2]), env, "runs"),
                bool(row[3]),
                bool(row[4]),
                _json(row[5], where),
                history,
                _json(row[7], where),
            )
        )
    if {"groups", "group_entries"} <= tables:
        entries: dict[str, tuple[list[str], list[str]]] = {}
        for group, kind, entry in db.execute(
            'SELECT "group", entry_type, entry FROM group_entries ORDER BY entry'
        ):
            envs, subgroups = entries.setdefault(str(group), ([], []))
            (envs if int(kind) == 1 else subgroups).append(str(entry))
        for name, title, description in db.execute(
            "SELECT identifier, displayname, description_html FROM groups ORDER BY identifier"
        ):
            envs, subgroups = entries.get(str(name), ([], []))
            out.groups.append(
                OriginalGroup(
                    str(name),
                    str(title or name),
                    str(description or ""),
                    tuple(envs),
                    tuple(subgroups),
                )
            )
    return out
