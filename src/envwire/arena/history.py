"""What the arena's pages read of the past: finished runs in the order they finished, the
ratings they gave, and what is known of runs carried over from another server.

The ratings drawn are the ones the arena computed: an agent's rating after a finished run is
the average outcome of its last ``rating_runs`` finished runs (:mod:`envwire.arena.rules`). A
chart that shows only the last N runs must still average over the runs before them, so
:func:`rating_points` reads ``rating_runs - 1`` more runs than it shows; ratings carried over
from another server begin with the outcomes that server averaged (``carried_outcomes``), which
stand in for the runs it deleted.

Runs carried over (``envwire arena migrate``) have no times: the AISysProj server did not store
any. They keep their order (``finish_seq`` <= 0, before every run finished here), their
``ended`` is NULL, and :func:`carried_run` tells whether the percepts of their actions are
known (rebuilt by replaying the run through its plugin) or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envwire.arena.store import Store
from envwire.protocols.arena import RawJSON

__all__ = [
    "CarriedRun",
    "OutcomeRow",
    "carried_run",
    "count_outcomes",
    "extras",
    "migrated_at",
    "outcomes",
    "rating_points",
    "rolling_ratings",
]

#: The meta key that holds when a migration wrote the database (a Unix time, as text).
MIGRATED_AT = "migrated_at"


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    """A finished run with a numeric outcome; ``carried``: carried over from another server
    (``ended`` is then None when that server kept no times)."""

    run: int
    agent: str
    ended: float | None
    value: float
    carried: bool = False


@dataclass(frozen=True, slots=True)
class CarriedRun:
    """A run carried over from another server: whether its actions' percepts are known."""

    run: int
    percepts: bool


# Finish order: runs carried over (finish_seq <= 0, or NULL from an older migration) first,
# in their order, then ours; ties (older migrations) by id.
_ORDER = "COALESCE(finish_seq, -9223372036854775807)"


def outcomes(
    store: Store, env: str, agent: str | None = None, *, limit: int = 2000
) -> list[OutcomeRow]:
    """The last ``limit`` finished runs with a numeric outcome, oldest first."""
    where, args = "env = ? AND finished = 1 AND outcome_value IS NOT NULL", [env]
    if agent is not None:
        where += " AND agent = ?"
        args.append(agent)
    rows = store.query(
        "SELECT id, agent, ended, outcome_value, finish_seq IS NULL OR finish_seq <= 0 "
        f"FROM runs WHERE {where} "
        f"ORDER BY {_ORDER} DESC, id DESC LIMIT ?",
        (*args, limit),
    )
    return [
        OutcomeRow(int(i), str(a), None if e is None else float(e), float(v), bool(c))
        for i, a, e, v, c in reversed(rows)
    ]


def count_outcomes(store: Store, env: str) -> int:
    """How many finished runs of ``env`` have a numeric outcome."""
    row = store.query_one(
        "SELECT COUNT(*) FROM runs WHERE env = ? AND finished = 1 AND outcome_value IS NOT NULL",
        (env,),
    )
    return 0 if row is None else int(row[0])


def rolling_ratings(
    values: Sequence[float], window: int, initial: float, before: Sequence[float] = ()
) -> list[float]:
    """The rating after each of ``values``: the average of the last ``window`` outcomes,
    counting the outcomes ``before`` them (oldest first) as earlier ones."""
    recent = list(before[-window:]) if window > 0 else []
    ratings = []
    for value in values:
        recent.append(value)
        del recent[:-window]
        ratings.append(sum(recent) / len(recent) if recent else initial)
    return ratings


def rating_points(
    store: Store, env: str, agent: str, *, rating_runs: int, initial: float, shown: int
) -> list[tuple[OutcomeRow, float]]:
    """The agent's last ``shown`` finished runs (with numeric outcomes), oldest first, each with
    the agent's rating after it, as the arena computed it (see the module docstring)."""
    lead = max(rating_runs - 1, 0)
    limit = shown + lead
    rows = outcomes(store, env, agent, limit=limit)
    before: list[float] = []
    if len(rows) < limit:  # every run the agent finished here is read: begin with the carried
        carried = [
            float(r[0])
            for r in store.query(
                "SELECT value FROM carried_outcomes WHERE env = ? AND agent = ? ORDER BY seq",
                (env, agent),
            )
        ]
        # carried_outcomes end with the outcomes of the carried runs still here; the rest are
        # those of runs the other server had deleted, which came before them
        present = sum(r.carried for r in rows)
        before = carried[: max(len(carried) - present, 0)]
    ratings = rolling_ratings([r.value for r in rows], rating_runs, initial, before)
    points = list(zip(rows, ratings, strict=True))
    return points[-shown:] if shown > 0 else []


def carried_run(store: Store, run_id: int) -> CarriedRun | None:
    """What is known of a run carried over from another server, or None for a run of ours."""
    row = store.query_one("SELECT percepts FROM carried_runs WHERE run = ?", (run_id,))
    return None if row is None else CarriedRun(run_id, bool(row[0]))


def migrated_at(store: Store) -> float | None:
    """When a migration wrote this database, or None."""
    text = store.meta(MIGRATED_AT)
    return None if text is None else float(text)


def extras(store: Store, run_id: int) -> dict[int, RawJSON]:
    """The extra information a plugin env kept with each action of a run (the AISysProj
    interface's ``action_extra_info``: an opponent's move, say), by action number; only the
    actions that have one."""
    rows = store.query(
        "SELECT act_no, extra FROM step_extras WHERE run = ? AND extra != 'null' ORDER BY act_no",
        (run_id,),
    )
    return {int(n): RawJSON(str(x)) for n, x in rows}
