"""The HTTP status of every envwire error, in one table.

Everything that answers over HTTP (OpenEnv's routes, the arena's act protocol and pages) reports
an error with :func:`status_of`. :data:`STATUS` has rows for the core tree of
:mod:`envwire.errors`; a class without a row answers with its nearest ancestor's status, so
every error has one (:class:`~envwire.errors.EnvwireError`'s 500 at worst).

A module that defines an error of its own which must answer differently from its parent (the
arena's, a front end's) adds that row here, next to the class: the row then exists whenever the
class does, and this module never imports the layers above it.
"""

from __future__ import annotations

from typing import Final

from envwire.errors import (
    CapacityError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
    ForbiddenError,
    InvalidActionError,
    InvalidArgumentError,
    ProtocolError,
    RateLimitedError,
    StateError,
    TooLargeError,
    UnauthenticatedError,
    UnknownEnvError,
    UnsupportedError,
    UsageError,
    lookup,
)

__all__ = ["STATUS", "status_of"]

#: error class -> HTTP status; the rows of other modules' classes are added by those modules.
STATUS: Final[dict[type[EnvwireError], int]] = {
    EnvwireError: 500,
    ProtocolError: 400,
    TooLargeError: 413,
    UsageError: 400,
    UnknownEnvError: 404,
    InvalidActionError: 422,
    InvalidArgumentError: 422,
    StateError: 409,
    CapacityError: 503,
    RateLimitedError: 429,
    UnauthenticatedError: 401,
    ForbiddenError: 403,
    UnsupportedError: 501,
    EnvError: 500,
    EnvTimeoutError: 504,
}


def status_of(error: EnvwireError | type[EnvwireError]) -> int:
    """The HTTP status that reports ``error`` (an instance or a class): its class's row in
    :data:`STATUS`, or its nearest ancestor's."""
    return lookup(STATUS, error)
