"""The arena's rules as pure functions: which runs a reply asks about, and how agents are rated.

Scheduling (PROTOCOLS.md §4):

- a reply asks for at most N actions (the arena env's ``requests_per_reply``, 5 by default; 1
  when the client turned parallel runs off);
- runs that were asked about and not answered (an action was missing or rejected) come first,
  with the same percept and the same action number;
- while any such run exists, no new run starts; otherwise new runs start until the agent has N
  active runs;
- the remaining places go to the agent's other active runs, oldest first.

Ratings: an agent's rating is the average outcome of its last N finished runs (N is the arena
env's ``rating_runs``, 50 by default); it is "fully evaluated" once it finished N runs, and from
then on the best rating it ever had is kept beside the current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Objective", "RunSlot", "Schedule", "best_rating", "rating", "request_limit", "schedule"]

Objective = Literal["max", "min"]


@dataclass(frozen=True, slots=True)
class RunSlot:
    """An active run as the scheduler sees it."""

    id: int
    outstanding: bool  # asked about and not answered yet


@dataclass(frozen=True, slots=True)
class Schedule:
    """The runs to ask about (ids, in order) and how many new runs to start first."""

    send: tuple[int, ...]
    new_runs: int


def request_limit(requests_per_reply: int, parallel_runs: bool) -> int:
    """N: the most action requests one reply may carry."""
    return requests_per_reply if parallel_runs else 1


def schedule(active: Sequence[RunSlot], limit: int) -> Schedule:
    """Choose the runs of a reply (see the module docstring).

    New runs are started by the caller and asked about after the runs listed in ``send``; they
    never push an outstanding run out of the reply, since they only start when none is left.
    """
    ordered = sorted(active, key=lambda r: r.id)
    waiting = [r.id for r in ordered if r.outstanding]
    others = [r.id for r in ordered if not r.outstanding]
    send = (waiting + others)[:limit]
    new_runs = 0 if waiting else max(0, limit - len(ordered))
    return Schedule(tuple(send), new_runs)


def rating(outcomes: Sequence[float], initial: float) -> float:
    """The average of ``outcomes`` (the last N, newest first or last), or ``initial``."""
    return sum(outcomes) / len(outcomes) if outcomes else initial


def best_rating(previous: float | None, current: float, objective: Objective) -> float:
    """The better of the two ratings for the env's objective."""
    if previous is None:
        return current
    return max(previous, current) if objective == "max" else min(previous, current)
