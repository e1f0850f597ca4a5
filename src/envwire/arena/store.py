"""The arena's persistence: one SQLite file (WAL mode), written one transaction per request.

Everything a restarted server needs lives here: arena envs and their settings, agent accounts
(password hashes only), runs (seed, accepted actions, current percept, outcome) and ratings. The
env state of an unfinished run is not stored; it is rebuilt by replaying the run's seed and
accepted actions (see :mod:`envwire.arena.games`). Plugin envs of the AISysProj interface keep
state instead: their runs' states and the extra information of each action are stored too
(``run_states``, ``step_extras``). Ratings carried over from another server keep the outcomes
they averaged (``carried_outcomes``, older than any run here); runs carried over are listed in
``carried_runs`` and finished in the order they finished there (``finish_seq`` <= 0, before
every run finished here); groups of envs are pages (``groups``, ``group_entries``).

:meth:`Store.apply` writes everything one act request changed (new runs, accepted actions,
messages, finished runs, ratings) in a single ``BEGIN IMMEDIATE ... COMMIT``; the server replies
only after it returns, so an acknowledged action is on disk (``synchronous=FULL``, the default,
survives power loss; ``NORMAL`` survives a killed process). One connection serves all threads,
behind a lock. One server process owns a database file; admin commands may write beside it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from envwire.arena.rows import (
    AgentRow,
    Batch,
    EnvRow,
    MessageRow,
    RunRow,
    StepRow,
)
from envwire.arena.rules import Objective, best_rating, rating
from envwire.protocols.arena import RawJSON

__all__ = ["Store", "Sync"]

Sync = Literal["full", "normal"]
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS envs (
    name TEXT PRIMARY KEY, env_id TEXT NOT NULL, settings TEXT NOT NULL,
    display_name TEXT NOT NULL, description TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
    env TEXT NOT NULL REFERENCES envs(name), name TEXT NOT NULL, pwd_hash TEXT NOT NULL,
    blocked INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
    total_runs INTEGER NOT NULL DEFAULT 0, rating REAL, best_rating REAL,
    fully_evaluated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (env, name));
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, env TEXT NOT NULL, agent TEXT NOT NULL, seed INTEGER NOT NULL,
    act_no INTEGER NOT NULL DEFAULT 0, percept TEXT NOT NULL,
    outstanding INTEGER NOT NULL DEFAULT 0, finished INTEGER NOT NULL DEFAULT 0,
    episode_return REAL NOT NULL DEFAULT 0, outcome TEXT, outcome_value REAL, how TEXT,
    finish_seq INTEGER, created REAL NOT NULL, ended REAL);
CREATE INDEX IF NOT EXISTS runs_by_agent ON runs (env, agent, finished, id);
CREATE INDEX IF NOT EXISTS runs_by_finish ON runs (env, agent, finish_seq);
CREATE TABLE IF NOT EXISTS steps (
    run INTEGER NOT NULL, act_no INTEGER NOT NULL, percept TEXT NOT NULL, action TEXT NOT NULL,
    reward REAL NOT NULL, at REAL NOT NULL, PRIMARY KEY (run, act_no)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    run INTEGER NOT NULL, act_no INTEGER NOT NULL, type TEXT NOT NULL, content TEXT NOT NULL,
    at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_run ON messages (run, act_no);
CREATE TABLE IF NOT EXISTS admin_tokens (hash TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS run_states (run INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS step_extras (
    run INTEGER NOT NULL, act_no INTEGER NOT NULL, extra TEXT NOT NULL,
    PRIMARY KEY (run, act_no)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS carried_outcomes (
    env TEXT NOT NULL, agent TEXT NOT NULL, seq INTEGER NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (env, agent, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS carried_runs (
    run INTEGER PRIMARY KEY, percepts INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    name TEXT PRIMARY KEY, title TEXT NOT NULL, description_html TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS group_entries (
    grp TEXT NOT NULL, kind TEXT NOT NULL, entry TEXT NOT NULL,
    PRIMARY KEY (grp, kind, entry)) WITHOUT ROWID;
"""


_RUN_COLUMNS = (
    "id, env, agent, seed, act_no, percept, outstanding, finished, episode_return, outcome, how, "
    "created, ended"
)


def _run(row: tuple[Any, ...]) -> RunRow:
    outcome = RawJSON(row[9]) if row[9] is not None else None
    return RunRow(
        row[0], row[1], row[2], row[3], row[4], RawJSON(row[5]), bool(row[6]), bool(row[7]),
        row[8], outcome, row[10], row[11], row[12],
    )  # fmt: skip


def _agent(row: tuple[Any, ...]) -> AgentRow:
    return AgentRow(
        row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6], row[7], bool(row[8])
    )


class Store:
    """The arena database.

    Args:
        path: the SQLite file (created with its tables when missing); ``":memory:"`` for tests.
        sync: ``"full"`` (an acknowledged action survives power loss) or ``"normal"`` (it
            survives a killed process; faster on slow disks).
    """

    def __init__(self, path: str | Path, *, sync: Sync = "full") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=10.0
        )
        self._lock = threading.RLock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
            )
            self._next_run = int(self._one("SELECT COALESCE(MAX(id), 0) FROM runs")[0]) + 1
            # Runs carried over from another server finished at 0 and below: ours count on.
            self._finish_seq = int(
                self._one("SELECT MAX(COALESCE(MAX(finish_seq), 0), 0) FROM runs")[0]
            )

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            self._db.close()

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read-only query (for the arena's other modules: groups, housekeeping)."""
        return self._all(sql, args)

    def query_one(self, sql: str, args: Iterable[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a read-only query, or None."""
        return self._get(sql, args)

    def vacuum(self) -> None:
        """Compact the database file (after deleting runs)."""
        with self._lock:
            self._db.execute("VACUUM")

    def _one(self, sql: str, args: Iterable[Any] = ()) -> tuple[Any, ...]:
        row: tuple[Any, ...] = self._db.execute(sql, tuple(args)).fetchone()
        return row

    def _all(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def _get(self, sql: str, args: Iterable[Any] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            row: tuple[Any, ...] | None = self._db.execute(sql, tuple(args)).fetchone()
            return row

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- meta and admin tokens ---------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A stored setting (such as ``public_url``), or None."""
        row = self._get("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def add_admin_token(self, token_hash: str) -> None:
        """Remember the hash of a new admin token."""
        with self.transaction() as db:
            db.execute("INSERT INTO admin_tokens VALUES (?, ?)", (token_hash, time.time()))

    def admin_token_hashes(self) -> list[str]:
        """The hashes of every admin token."""
        return [str(r[0]) for r in self._all("SELECT hash FROM admin_tokens")]

    # -- envs and agents -----------------------------------------------------------------

    def put_env(self, row: EnvRow) -> None:
        """Create or replace an arena env (its agents and runs stay)."""
        with self.transaction() as db:
            self.insert_env(db, row)

    @staticmethod
    def insert_env(db: sqlite3.Connection, row: EnvRow) -> None:
        """Create or replace an arena env inside a transaction."""
        db.execute(
            "INSERT OR REPLACE INTO envs VALUES (?, ?, ?, ?, ?, ?)",
            (row.name, row.env_id, json.dumps(row.settings), row.display_name,
             row.description, row.created),
        )  # fmt: skip

    def env(self, name: str) -> EnvRow | None:
        """The arena env called ``name``."""
        row = self._get("SELECT * FROM envs WHERE name = ?", (name,))
        if row is None:
            return None
        return EnvRow(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])

    def envs(self) -> list[EnvRow]:
        """Every arena env, by name."""
        rows = self._all("SELECT * FROM envs ORDER BY name")
        return [EnvRow(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def put_agent(self, env: str, name: str, pwd_hash: str) -> None:
        """Create an agent, or give an existing one a new password (and unblock nothing)."""
        with self.transaction() as db:
            updated = db.execute(
                "UPDATE agents SET pwd_hash = ? WHERE env = ? AND name = ?", (pwd_hash, env, name)
            ).rowcount
            if not updated:
                db.execute(
                    "INSERT INTO agents (env, name, pwd_hash, created) VALUES (?, ?, ?, ?)",
                    (env, name, pwd_hash, time.time()),
                )

    def put_agents(self, env: str, agents: Iterable[tuple[str, str]]) -> None:
        """Create or re-password many agents (name, password hash) in one transaction."""
        with self.transaction() as db:
            for name, pwd_hash in agents:
                updated = db.execute(
                    "UPDATE agents SET pwd_hash = ? WHERE env = ? AND name = ?",
                    (pwd_hash, env, name),
                ).rowcount
                if not updated:
                    db.execute(
                        "INSERT INTO agents (env, name, pwd_hash, created) VALUES (?, ?, ?, ?)",
                        (env, name, pwd_hash, time.time()),
                    )

    def replace_pwd_hash(self, env: str, name: str, old: str, new: str) -> bool:
        """Store a new hash of the same password, unless the hash changed meanwhile (a
        password reset wins); whether it was stored."""
        with self.transaction() as db:
            return bool(
                db.execute(
                    "UPDATE agents SET pwd_hash = ? WHERE env = ? AND name = ? AND pwd_hash = ?",
                    (new, env, name, old),
                ).rowcount
            )

    def set_blocked(self, env: str, name: str, blocked: bool) -> bool:
        """Block or unblock an agent; False when there is no such agent."""
        with self.transaction() as db:
            return bool(
                db.execute(
                    "UPDATE agents SET blocked = ? WHERE env = ? AND name = ?",
                    (int(blocked), env, name),
                ).rowcount
            )

    def agent(self, env: str, name: str) -> AgentRow | None:
        """The agent ``name`` of arena env ``env``."""
        row = self._get("SELECT * FROM agents WHERE env = ? AND name = ?", (env, name))
        return None if row is None else _agent(row)

    def agents(self, env: str) -> list[AgentRow]:
        """The agents of an env, by name."""
        return [
            _agent(r) for r in self._all("SELECT * FROM agents WHERE env = ? ORDER BY name", (env,))
        ]

    # -- runs ------------------------------------------------------------------------------

    def allocate_run_ids(self, count: int) -> list[int]:
        """``count`` fresh run ids (above any run an admin command added meanwhile)."""
        if count <= 0:
            return []
        with self._lock:
            highest = int(self._one("SELECT COALESCE(MAX(id), 0) FROM runs")[0])
            first = max(self._next_run, highest + 1)
            self._next_run = first + count
        return list(range(first, first + count))

    def active_runs(self, env: str, agent: str) -> list[RunRow]:
        """The agent's unfinished runs, oldest first."""
        return [
            _run(r)
            for r in self._all(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE env = ? AND agent = ? AND finished = 0 "
                "ORDER BY id",
                (env, agent),
            )
        ]

    def run(self, run_id: int) -> RunRow | None:
        """The run with that id."""
        row = self._get(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return None if row is None else _run(row)

    def runs(
        self, env: str, agent: str | None = None, *, finished: bool | None = None, limit: int = 50
    ) -> list[RunRow]:
        """The newest runs of an env (or of one agent), newest first."""
        where, args = ["env = ?"], [env]
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        if finished is not None:
            where.append(f"finished = {int(finished)}")
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        )
        return [_run(r) for r in self._all(sql, (*args, limit))]

    def count_runs(self, env: str) -> tuple[int, int]:
        """(runs, finished runs) of an env."""
        row = self._get(
            "SELECT COUNT(*), COALESCE(SUM(finished), 0) FROM runs WHERE env = ?", (env,)
        )
        assert row is not None
        return int(row[0]), int(row[1])

    def steps(self, run_id: int) -> list[StepRow]:
        """The accepted actions of a run, in order."""
        rows = self._all("SELECT * FROM steps WHERE run = ? ORDER BY act_no", (run_id,))
        return [StepRow(r[0], r[1], RawJSON(r[2]), RawJSON(r[3]), r[4], r[5]) for r in rows]

    def actions(self, run_id: int) -> list[str]:
        """The accepted actions of a run as JSON text, in order (what a replay needs)."""
        return [
            str(r[0])
            for r in self._all("SELECT action FROM steps WHERE run = ? ORDER BY act_no", (run_id,))
        ]

    def plugin_run(self, run_id: int) -> tuple[str, list[tuple[str, str]]]:
        """A plugin run's state and ``(action, extra)`` history, as JSON text.

        Raises:
            KeyError: the run has no stored state.
        """
        row = self._get("SELECT state FROM run_states WHERE run = ?", (run_id,))
        if row is None:
            raise KeyError(f"run {run_id} has no stored state")
        history = self._all(
            "SELECT s.action, COALESCE(x.extra, 'null') FROM steps s LEFT JOIN step_extras x "
            "ON x.run = s.run AND x.act_no = s.act_no WHERE s.run = ? ORDER BY s.act_no",
            (run_id,),
        )
        return str(row[0]), [(str(a), str(x)) for a, x in history]

    def messages(self, run_id: int) -> list[MessageRow]:
        """The messages about a run, in order."""
        rows = self._all("SELECT * FROM messages WHERE run = ? ORDER BY rowid", (run_id,))
        return [MessageRow(*r) for r in rows]

    # -- the write path ----------------------------------------------------------------------

    def apply(
        self, batch: Batch, *, rating_runs: int, objective: Objective, initial_rating: float
    ) -> None:
        """Write one request's changes, and the agent's new rating, in one transaction.

        Raises:
            sqlite3.Error: nothing was written.
        """
        with self.transaction() as db:
            env, agent = batch.env, batch.agent
            db.executemany(
                "INSERT INTO runs (id, env, agent, seed, percept, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(r.id, env, agent, r.seed, r.percept, r.created) for r in batch.new_runs],
            )
            db.executemany(
                "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?)",
                [(s.run, s.act_no, s.percept, s.action, s.reward, s.at) for s in batch.steps],
            )
            db.executemany(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                [(m.run, m.act_no, m.type, m.content, m.at) for m in batch.messages],
            )
            db.executemany(
                "UPDATE runs SET act_no = ?, percept = ?, episode_return = ?, outstanding = 0 "
                "WHERE id = ?",
                [(n, p, ret, run) for run, (n, p, ret) in batch.progress.items()],
            )
            finishes = []
            for f in batch.finished:
                self._finish_seq += 1
                finishes.append((f.outcome, f.value, f.how, self._finish_seq, f.at, f.run))
            db.executemany(
                "UPDATE runs SET finished = 1, outstanding = 0, outcome = ?, outcome_value = ?, "
                "how = ?, finish_seq = ?, ended = ? WHERE id = ?",
                finishes,
            )
            db.executemany(
                "UPDATE runs SET outstanding = 1 WHERE id = ?", [(r,) for r in sorted(batch.asked)]
            )
            db.executemany(
                "INSERT OR REPLACE INTO run_states VALUES (?, ?)", list(batch.states.items())
            )
            db.executemany("INSERT INTO step_extras VALUES (?, ?, ?)", batch.extras)
            if batch.finished:
                self._rate(
                    db, env, agent, len(batch.finished),
                    rating_runs=rating_runs, objective=objective, initial=initial_rating,
                )  # fmt: skip

    @staticmethod
    def _rate(
        db: sqlite3.Connection,
        env: str,
        agent: str,
        newly_finished: int,
        *,
        rating_runs: int,
        objective: Objective,
        initial: float,
    ) -> None:
        total, best = db.execute(
            "SELECT total_runs, best_rating FROM agents WHERE env = ? AND name = ?", (env, agent)
        ).fetchone()
        total += newly_finished
        # Runs carried over from another server (finish_seq <= 0, or NULL as an older migration
        # wrote them) count through carried_outcomes (seq < 0), the window that server kept.
        outcomes = [
            float(r[0])
            for r in db.execute(
                "SELECT value FROM (SELECT outcome_value AS value, finish_seq AS seq FROM runs "
                "WHERE env = ? AND agent = ? AND finished = 1 AND outcome_value IS NOT NULL "
                "AND finish_seq > 0 UNION ALL SELECT value, seq FROM carried_outcomes "
                "WHERE env = ? AND agent = ?) ORDER BY seq DESC LIMIT ?",
                (env, agent, env, agent, rating_runs),
            )
        ]
        current = rating(outcomes, initial)
        fully = total >= rating_runs
        if fully:
            best = best_rating(best, current, objective)
        db.execute(
            "UPDATE agents SET total_runs = ?, rating = ?, best_rating = ?, fully_evaluated = ? "
            "WHERE env = ? AND name = ?",
            (total, current, best, int(fully), env, agent),
        )
