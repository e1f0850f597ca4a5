"""A session's states, the requests each allows, and the monitor directories' confinement."""

from __future__ import annotations

import posixpath
from enum import Enum

from envwire import messages as m
from envwire.errors import InvalidArgumentError

__all__ = ["ALLOWED", "ENV_STEPS_ALLOWED", "State", "confine"]


class State(Enum):
    """Where a session is in its life."""

    NEW = "new"  # env made, no episode yet
    RUNNING = "running"  # an episode is under way
    ENDED = "ended"  # the episode terminated or was truncated; reset to go on
    BROKEN = "broken"  # the env crashed or hung; reset makes a fresh one
    NO_ENV = "no env"  # opened without an env (a client that named none): only Close
    CLOSED = "closed"


_ANY_TIME = frozenset({m.GetSpace, m.SampleAction, m.Close, m.Monitor, m.Render})

#: Which request types each state accepts.
ALLOWED: dict[State, frozenset[type]] = {
    State.NEW: _ANY_TIME | {m.Reset},
    State.RUNNING: _ANY_TIME | {m.Reset, m.Step},
    State.ENDED: _ANY_TIME | {m.Reset},
    State.BROKEN: frozenset({m.Reset, m.GetSpace, m.SampleAction, m.Close}),
    State.NO_ENV: frozenset({m.Close}),
    State.CLOSED: frozenset(),
}

#: For an env that decides for itself what a step before the first reset, or after the episode
#: ended, means (``EnvSpec.decides_steps``): the same table, with Step allowed in NEW and ENDED.
ENV_STEPS_ALLOWED: dict[State, frozenset[type]] = {
    **ALLOWED,
    State.NEW: ALLOWED[State.NEW] | {m.Step},
    State.ENDED: ALLOWED[State.ENDED] | {m.Step},
}


def confine(root: str, requested: str) -> str:
    """``requested`` re-rooted under ``root``: absolute paths and ``..`` cannot leave it.

    Raises:
        InvalidArgumentError: the path is empty or climbs above the root.
    """
    if not requested or "\x00" in requested:
        raise InvalidArgumentError(f"monitor directory {requested!r} is not a usable path")
    relative = posixpath.normpath("/" + requested.replace("\\", "/")).lstrip("/")
    if relative.startswith(".."):
        raise InvalidArgumentError(f"monitor directory {requested!r} climbs out of the root")
    return posixpath.join(root, relative) if relative not in ("", ".") else root
