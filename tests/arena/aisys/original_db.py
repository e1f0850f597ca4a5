"""Databases in the AISysProj server's schema, written by the tests.

The DDL follows that server's published models (table and column names, types); the rows are
what the tests say. :class:`OriginalDB` writes one with the helpers the tests need.

What that schema holds, and so all a migration can read: no time of any kind (no column for
when a run started or finished, or when an account was made), no percepts (only a run's current
``state``, from which its plugin computes the next one), and per run a ``history`` of
``[action, extra info]`` pairs. The order runs finished in is kept only for each agent's last 20
(``agents.recently_finished_runs``) and the env's last 20 (``keyval`` ``"<env>#recentruns"``).
:meth:`OriginalDB.finish` keeps these, and an agent's ratings, the way that server does when a
run finishes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["OriginalDB", "sha256_hash"]

SCHEMA = """
CREATE TABLE accounts (identifier VARCHAR PRIMARY KEY, environment VARCHAR,
                       password VARCHAR, status INTEGER);
CREATE TABLE agents (identifier VARCHAR PRIMARY KEY, environment VARCHAR,
                     fully_evaluated BOOLEAN, total_runs INTEGER, recently_finished_runs TEXT,
                     recent_results TEXT, best_rating FLOAT, current_rating FLOAT);
CREATE TABLE runs (identifier INTEGER PRIMARY KEY, environment VARCHAR, agent VARCHAR,
                   finished BOOLEAN, outstanding_action BOOLEAN, state TEXT, history TEXT,
                   outcome VARCHAR);
CREATE TABLE active_environments (identifier VARCHAR PRIMARY KEY, env_class VARCHAR,
                                  displayname VARCHAR, displaygroup VARCHAR, config VARCHAR,
                                  signup VARCHAR, status VARCHAR);
CREATE TABLE keyval ("key" VARCHAR PRIMARY KEY, val TEXT);
CREATE TABLE groups (identifier VARCHAR PRIMARY KEY, displayname VARCHAR,
                     description_html TEXT);
CREATE TABLE group_entries ("group" VARCHAR, entry_type INTEGER, entry VARCHAR,
                            CONSTRAINT group_entry_pk PRIMARY KEY ("group", entry_type, entry));
"""


def sha256_hash(password: str) -> str:
    """A password as that server stores it."""
    return "sha256:" + hashlib.sha256(password.encode()).hexdigest()


def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class OriginalDB:
    """An original-schema database file under construction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.executescript(SCHEMA)

    def env(self, name: str, env_class: str, config: Any, display: str = "") -> None:
        self.db.execute(
            "INSERT INTO active_environments VALUES (?, ?, ?, '', ?, 'restricted', 'active')",
            (name, env_class, display or name, _j(config)),
        )

    def account(self, env: str, agent: str, password: str, *, locked: bool = False) -> None:
        self.db.execute(
            "INSERT INTO accounts VALUES (?, ?, ?, ?)",
            (f"{env}/{agent}", env, sha256_hash(password), 0 if locked else 1),
        )

    def ratings(
        self,
        env: str,
        agent: str,
        results: list[Any],
        *,
        total: int,
        best: float,
        current: float,
        fully: bool,
        recent_runs: Sequence[int] = (),
    ) -> None:
        self.db.execute(
            "INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (f"{env}/{agent}", env, fully, total, _j(list(recent_runs)), _j(results), best,
             current),
        )  # fmt: skip

    def run(
        self,
        run_id: int,
        env: str,
        agent: str,
        state: Any,
        history: list[tuple[Any, Any]],
        *,
        outcome: Any = None,
        finished: bool = False,
        outstanding: bool = False,
    ) -> None:
        self.db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, env, f"{env}/{agent}", finished, outstanding, _j(state),
             _j([list(h) for h in history]), _j(outcome)),
        )  # fmt: skip

    def finish(
        self,
        run_id: int,
        env: str,
        agent: str,
        state: Any,
        history: list[tuple[Any, Any]],
        *,
        outcome: Any,
        window: int,
        initial: float = 0.0,
    ) -> None:
        """Write a finished run and do that server's bookkeeping of a finished run: the
        agent's total, the outcomes its rating averages (the last ``window``, its
        ``MIN_RUNS_FOR_FULLY_EVALUATED``), its current and best rating (``max`` objective), and
        the agent's and env's last 20 finished runs."""
        self.run(run_id, env, agent, state, history, outcome=outcome, finished=True)
        ident = f"{env}/{agent}"
        row = self.db.execute(
            "SELECT total_runs, recent_results, recently_finished_runs, best_rating "
            "FROM agents WHERE identifier = ?",
            (ident,),
        ).fetchone()
        total, results, recent, best = row if row else (0, "[]", "[]", initial)
        total += 1
        results = [*json.loads(results), outcome][-window:]
        current = sum(results) / len(results)
        fully = total >= window
        if fully:
            best = max(best, current)
        recent = [*json.loads(recent), run_id][-20:]
        self.db.execute(
            "INSERT OR REPLACE INTO agents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (ident, env, fully, total, _j(recent), _j(results), best, current),
        )
        key = f"{env}#recentruns"
        kept = self.db.execute('SELECT val FROM keyval WHERE "key" = ?', (key,)).fetchone()
        env_recent = [*json.loads(kept[0] if kept else "[]"), run_id][-20:]
        self.db.execute("INSERT OR REPLACE INTO keyval VALUES (?, ?)", (key, _j(env_recent)))

    def delete_nonrecent_runs(self, env: str, agent: str) -> None:
        """That server's cleanup: delete the agent's finished runs but its last 20."""
        kept = json.loads(
            self.db.execute(
                "SELECT recently_finished_runs FROM agents WHERE identifier = ?",
                (f"{env}/{agent}",),
            ).fetchone()[0]
        )
        marks = ",".join("?" * len(kept)) or "NULL"
        self.db.execute(
            f"DELETE FROM runs WHERE agent = ? AND finished = 1 AND identifier NOT IN ({marks})",
            (f"{env}/{agent}", *kept),
        )

    def group(
        self,
        name: str,
        title: str,
        description: str,
        envs: Sequence[str] = (),
        subgroups: Sequence[str] = (),
    ) -> None:
        self.db.execute("INSERT INTO groups VALUES (?, ?, ?)", (name, title, description))
        for env in envs:
            self.db.execute("INSERT INTO group_entries VALUES (?, 1, ?)", (name, env))
        for sub in subgroups:
            self.db.execute("INSERT INTO group_entries VALUES (?, 0, ?)", (name, sub))

    def close(self) -> None:
        self.db.close()
