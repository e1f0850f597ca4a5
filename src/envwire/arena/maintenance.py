"""Housekeeping of an arena database: old runs, unused agents, disk usage.

- :func:`prune_runs` deletes finished runs (with their steps, messages and states) except each
  agent's newest ``keep`` finished runs, then compacts the file. Ratings do not suffer: ``keep``
  is never below the env's ``rating_runs``, the runs a rating averages.
- :func:`delete_unused_agents` deletes the agents of an env that never finished a run, with
  their unfinished runs.
- :func:`disk_usage` describes the database files and the plugins folder.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from envwire.arena.store import Store

__all__ = ["KEEP_RUNS", "delete_unused_agents", "disk_usage", "prune_runs"]

#: Finished runs kept per agent by :func:`prune_runs`, at least (the AISysProj server keeps 20).
KEEP_RUNS = 20

_RUN_TABLES = ("steps", "messages", "run_states", "step_extras", "carried_runs")


def _delete_runs(db: sqlite3.Connection, where: str, args: tuple[object, ...]) -> int:
    execute = db.execute
    ids = [r[0] for r in execute(f"SELECT id FROM runs WHERE {where}", args)]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for table in _RUN_TABLES:
            execute(f"DELETE FROM {table} WHERE run IN ({marks})", chunk)
        execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return len(ids)


def prune_runs(store: Store, *, keep: int = KEEP_RUNS, vacuum: bool = True) -> int:
    """Delete old finished runs (see the module docstring); how many were deleted."""
    deleted = 0
    for env in store.envs():
        keep_here = max(keep, int(env.settings.get("rating_runs", 50)))
        for agent in store.agents(env.name):
            with store.transaction() as db:
                deleted += _delete_runs(
                    db,
                    "env = ? AND agent = ? AND finished = 1 AND id NOT IN (SELECT id FROM runs "
                    "WHERE env = ? AND agent = ? AND finished = 1 "
                    "ORDER BY finish_seq IS NULL, finish_seq DESC, id DESC LIMIT ?)",
                    (env.name, agent.name, env.name, agent.name, keep_here),
                )
    if vacuum:
        store.vacuum()
    return deleted


def delete_unused_agents(store: Store, env: str) -> list[str]:
    """Delete the agents of ``env`` without finished runs (and their runs); their names."""
    with store.transaction() as db:
        names = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM agents WHERE env = ? AND total_runs = 0 ORDER BY name", (env,)
            )
        ]
        for name in names:
            _delete_runs(db, "env = ? AND agent = ?", (env, name))
            db.execute("DELETE FROM carried_outcomes WHERE env = ? AND agent = ?", (env, name))
            db.execute("DELETE FROM agents WHERE env = ? AND name = ?", (env, name))
    return names


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return 0


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def disk_usage(store: Store, plugins: Path | None = None) -> str:
    """The sizes of the database files (and of the plugins folder), one per line."""
    if store.path == ":memory:":
        return "database: in memory\n"
    db = Path(store.path)
    lines = [f"{_human(_size(p))}\t{p}" for p in (db, db.with_name(db.name + "-wal")) if p.exists()]
    if plugins is not None:
        lines.append(f"{_human(_size(plugins))}\t{plugins}/")
    return "\n".join(lines) + "\n"
