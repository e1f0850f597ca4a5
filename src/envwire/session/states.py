"""A session's states, the requests each allows (and the words of a refusal), and the checks
of a request's arguments: seeds, and the monitor directories' confinement."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from enum import Enum
from typing import TypeGuard

from envwire import messages as m
from envwire.errors import InvalidArgumentError

__all__ = ["ALLOWED", "ENV_STEPS_ALLOWED", "State", "checked_seed", "confine", "refusal"]


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


def refusal(request: m.Request, where: str, state: State, episode: int, step_count: int) -> str:
    """Why a session (``where``: its name for people) in ``state`` refuses ``request``, and
    what to do about it: the text of the ``StateError``."""
    name = type(request).__name__
    match state:
        case State.NEW if isinstance(request, m.Step):
            return f"{name} before the first Reset in {where}: reset first"
        case State.ENDED:
            return (
                f"{name} after episode {episode} ended at step {step_count} in {where}: reset first"
            )
        case State.BROKEN:
            return f"{name} in {where}, whose env crashed or hung: Reset makes a fresh env"
        case State.NO_ENV:
            return f"{name} in {where}: it was opened without an env"
    return f"{name} is not allowed in {where} while it is {state.value}"


def _seed(value: object) -> TypeGuard[int | None]:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def checked_seed(seed: object, copies: int | None) -> int | Sequence[int | None] | None:
    """A Reset's ``seed`` once checked: None, a non-negative int, or, for a vector session of
    ``copies`` copies (None for a one-env session), one of those per copy.

    Raises:
        InvalidArgumentError: any other seed.
    """
    if _seed(seed):
        return seed
    if copies is not None and isinstance(seed, list | tuple):
        if len(seed) == copies and all(_seed(s) for s in seed):
            return seed
        raise InvalidArgumentError(
            f"a list of seeds needs {copies} non-negative integers or nulls, got {seed!r}"
        )
    raise InvalidArgumentError(f"seed must be a non-negative integer or null, got {seed!r}")
