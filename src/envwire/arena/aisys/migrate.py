"""Moving an AISysProj server's database into an arena database.

:func:`migrate` carries over, from what :func:`~envwire.arena.aisys.database.read_database`
read:

- every env: a plugin env becomes the arena env ``aisys:<module:Class>`` with the plugin's
  ``EnvSettings`` as arena settings and its config (the plugin must import: pass its plugins
  folder); ``env_map`` maps an env to a catalog env instead (``test-nim=envwire/Nim-v0``), for
  organizers who rewrote an env for envwire;
- every agent account with its password hash (``sha256:...``, which envwire verifies and
  replaces by a scrypt hash at the agent's first successful request) and its locked status;
- every agent's ratings as they were: total runs, current and best rating, fully evaluated,
  and the outcomes its rating averages, so the next finished run moves the rating exactly as it
  would have moved there (these outcomes are kept apart from runs, because that server deleted
  old runs and did not record when runs finished);
- every run with its id (so run URLs keep working), history, state and outcome; unfinished
  runs of plugin envs go on where they were. Unfinished runs of an env mapped to a catalog env
  cannot (the state belongs to the old env) and are left out; finished ones are kept;
- groups and their entries, and admin password hashes.

That server stored no times and no percepts (:mod:`envwire.arena.aisys.replay`): carried runs
finish in the order they finished there (before any run finished here), with no start or end
time; the percepts of a plugin run's actions are rebuilt by replaying it where the replay gives
back what was stored, and are otherwise marked unknown (``carried_runs``). A replayed finished
run whose last action did not end it was abandoned.

The target must hold no runs yet (run ids are kept). Everything is written in one transaction:
a failed migration changes nothing. Progress lines go to the ``envwire.arena.progress`` logger.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from envwire.arena.accounts import check_imported_name
from envwire.arena.admin import ArenaAdmin
from envwire.arena.aisys.database import OriginalDatabase, OriginalEnv, OriginalRun
from envwire.arena.aisys.plugins import PREFIX, Plugin, load_env_class, make_plugin, run_data
from envwire.arena.aisys.replay import finish_order, replay
from envwire.arena.history import MIGRATED_AT
from envwire.arena.progress import EVERY, Progress
from envwire.arena.rows import EnvRow
from envwire.arena.store import Store
from envwire.errors import ConfigError
from envwire.protocols.arena import dumps

__all__ = ["MISSING_PLUGIN", "MigrationReport", "migrate"]

#: The stored hash of an agent that has ratings but no account (it cannot log in).
NO_ACCOUNT = "none$no account on the original server"
#: What to do about a plugin that does not import while migrating.
MISSING_PLUGIN = (
    "give the original server's plugins folder with --plugins DIR (by default the 'plugins' "
    "folder beside its database is used), or play the env by a catalog env with --env-map"
)


@dataclass
class MigrationReport:
    """What a migration carried over, per env, and what it left out and why."""

    envs: dict[str, dict[str, int]] = field(default_factory=dict)
    groups: int = 0
    admin_hashes: int = 0
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The report as a JSON object."""
        return {
            "envs": self.envs,
            "groups": self.groups,
            "admin_hashes": self.admin_hashes,
            "skipped": self.skipped,
            "warnings": self.warnings,
        }


@dataclass
class _Env:
    row: EnvRow
    plugin: Plugin | None  # None for an env mapped to a catalog env


#: Makes the row of an env mapped to a catalog env: ``(env, catalog env id) -> EnvRow``.
_MakeRow = Callable[[OriginalEnv, str], EnvRow]


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return float(value)
    return None


def _plugin_env(env: OriginalEnv, store: Store) -> _Env:
    ref = PREFIX + env.env_class
    cls = load_env_class(ref, hint=MISSING_PLUGIN)  # first: its error is the one to give
    row = ArenaAdmin(store).env_row(env.name, ref, {"config": env.config}, env.display_name)
    instance = make_plugin(cls, env.display_name, env.name, env.config)
    return _Env(row, instance)


def _mapped_env(env: OriginalEnv, env_id: str, make_row: _MakeRow) -> _Env:
    return _Env(make_row(env, env_id), None)


def migrate(
    original: OriginalDatabase,
    store: Store,
    *,
    env_map: Mapping[str, str] | None = None,
    make_mapped_env: _MakeRow | None = None,
    admin_hashes: Iterable[str] = (),
    now: float | None = None,
    progress_every: float = EVERY,
) -> MigrationReport:
    """Write ``original`` into ``store`` (see the module docstring).

    Args:
        original: the database read.
        store: the arena database; it must hold no runs and none of the env names.
        env_map: original env name -> catalog env id, for envs not played by their plugin.
        make_mapped_env: ``(OriginalEnv, env_id) -> EnvRow`` for mapped envs (the admin's
            ``create_env`` check, made by the caller, which knows the catalog).
        admin_hashes: admin password hashes (``sha256:...``) to accept from now on.
        now: when the migration ran: when carried rows entered this database.
        progress_every: seconds between two progress lines.

    Raises:
        ConfigError: the target is not empty, a plugin does not import, or a name or value does
            not carry over (the message names it). Nothing was written.
    """
    now = time.time() if now is None else now
    env_map = dict(env_map or {})
    report = MigrationReport()
    runs_here = store.query_one("SELECT COUNT(*) FROM runs")
    if runs_here and runs_here[0]:
        raise ConfigError(
            f"the arena database already holds {runs_here[0]} runs: migrate into a new database"
        )
    unknown = set(env_map) - {e.name for e in original.envs}
    if unknown:
        raise ConfigError(f"--env-map names envs the database does not have: {sorted(unknown)}")
    envs: dict[str, _Env] = {}
    for env in original.envs:
        check_imported_name(env.name, "arena env")
        if store.env(env.name) is not None:
            raise ConfigError(f"the arena database already has an env {env.name!r}")
        if env.name in env_map:
            if make_mapped_env is None:
                raise ConfigError(f"env {env.name!r}: mapping needs the server's catalog")
            envs[env.name] = _mapped_env(env, env_map[env.name], make_mapped_env)
        else:
            envs[env.name] = _plugin_env(env, store)
        report.envs[env.name] = {
            "agents": 0, "runs": 0, "unfinished_runs": 0, "runs_with_percepts": 0
        }  # fmt: skip
    with store.transaction() as db:
        for item in envs.values():
            store.insert_env(db, item.row)
        _accounts(db, original, envs, report, now)
        progress = Progress("migrate", len(original.runs), "runs", every=progress_every)
        _runs(db, original, envs, report, now, progress=progress)
        for group in original.groups:
            db.execute(
                "INSERT OR REPLACE INTO groups VALUES (?, ?, ?)",
                (group.name, group.title, group.description_html),
            )
            db.executemany(
                "INSERT OR IGNORE INTO group_entries VALUES (?, ?, ?)",
                [(group.name, "env", e) for e in group.envs]
                + [(group.name, "group", g) for g in group.subgroups],
            )
            report.groups += 1
        for digest in admin_hashes:
            db.execute("INSERT OR IGNORE INTO admin_tokens VALUES (?, ?)", (digest, now))
            report.admin_hashes += 1
        db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (MIGRATED_AT, repr(now))
        )
    progress.finish()
    return report


def _accounts(
    db: sqlite3.Connection,
    original: OriginalDatabase,
    envs: dict[str, _Env],
    report: MigrationReport,
    now: float,
) -> None:
    known: set[tuple[str, str]] = set()
    for account in original.accounts:
        if account.env not in envs:
            report.skipped.append(f"agent {account.env}/{account.agent}: no such env")
            continue
        check_imported_name(account.agent, "agent")
        db.execute(
            "INSERT INTO agents (env, name, pwd_hash, blocked, created) VALUES (?, ?, ?, ?, ?)",
            (account.env, account.agent, account.password_hash, int(account.locked), now),
        )
        known.add((account.env, account.agent))
        report.envs[account.env]["agents"] += 1
    for r in original.ratings:
        if r.env not in envs:
            report.skipped.append(f"ratings of {r.env}/{r.agent}: no such env")
            continue
        if (r.env, r.agent) not in known:
            check_imported_name(r.agent, "agent")
            db.execute(
                "INSERT INTO agents (env, name, pwd_hash, blocked, created) VALUES (?, ?, ?, 1, ?)",
                (r.env, r.agent, NO_ACCOUNT, now),
            )
            report.skipped.append(
                f"agent {r.env}/{r.agent}: ratings but no account (listed, cannot log in)"
            )
        db.execute(
            "UPDATE agents SET total_runs = ?, rating = ?, best_rating = ?, fully_evaluated = ? "
            "WHERE env = ? AND name = ?",
            (r.total_runs, r.current_rating, r.best_rating if r.fully_evaluated else None,
             int(r.fully_evaluated), r.env, r.agent),
        )  # fmt: skip
        values = [_number(v) for v in r.recent_results]
        db.executemany(
            "INSERT INTO carried_outcomes VALUES (?, ?, ?, ?)",
            [(r.env, r.agent, i - len(values), v) for i, v in enumerate(values) if v is not None],
        )


def _runs(
    db: sqlite3.Connection,
    original: OriginalDatabase,
    envs: dict[str, _Env],
    report: MigrationReport,
    now: float,
    *,
    progress: Progress,
) -> None:
    order = finish_order(original.runs, original.ratings)
    finish_seq = {run_id: n - len(order) for n, run_id in enumerate(order)}  # -N .. -1
    for run in original.runs:
        progress.advance()
        env = envs.get(run.env)
        if env is None:
            report.skipped.append(f"run {run.id}: no such env {run.env!r}")
            continue
        if not run.finished and env.plugin is None:
            report.skipped.append(
                f"run {run.id}: unfinished, and env {run.env!r} is now played by another env"
            )
            continue
        replayed = None if env.plugin is None else replay(env.plugin, run)
        percept: str = dumps(None)
        if not run.finished:
            assert env.plugin is not None  # an unfinished run of a mapped env was left out
            percept = _percept(env.plugin, run, report)
        how = None
        if run.finished:
            how = "abandoned" if replayed is not None and not replayed.ended_by_action else "done"
        db.execute(
            "INSERT INTO runs (id, env, agent, seed, act_no, percept, outstanding, finished, "
            "outcome, outcome_value, how, finish_seq, created, ended) "
            "VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (run.id, run.env, run.agent, len(run.history), percept, int(run.outstanding),
             int(run.finished), dumps(run.outcome) if run.finished else None,
             _number(run.outcome) if run.finished else None, how, finish_seq.get(run.id), now),
        )  # fmt: skip
        percepts = replayed.percepts if replayed is not None else [dumps(None)] * len(run.history)
        db.executemany(
            "INSERT INTO steps VALUES (?, ?, ?, ?, 0.0, ?)",
            [(run.id, i, percepts[i], dumps(action), now)
             for i, (action, _) in enumerate(run.history)],
        )  # fmt: skip
        db.execute("INSERT INTO carried_runs VALUES (?, ?)", (run.id, int(replayed is not None)))
        if env.plugin is not None:
            db.execute("INSERT INTO run_states VALUES (?, ?)", (run.id, dumps(run.state)))
            db.executemany(
                "INSERT INTO step_extras VALUES (?, ?, ?)",
                [(run.id, i, dumps(extra)) for i, (_, extra) in enumerate(run.history)],
            )
        counts = report.envs[run.env]
        counts["runs"] += 1
        counts["unfinished_runs"] += int(not run.finished)
        counts["runs_with_percepts"] += int(replayed is not None)


def _percept(plugin: Plugin, run: OriginalRun, report: MigrationReport) -> str:
    """The percept an unfinished plugin run shows now (asked of the plugin)."""
    try:
        request = plugin.get_action_request(run_data(run.id, run.agent, run.state, run.history))
        return dumps(getattr(request, "content", None))
    except Exception as exc:
        report.skipped.append(f"run {run.id}: no percept ({type(exc).__name__}: {exc})")
        return json.dumps(None)
