"""The HTTP status of every envwire error, in one table.

Everything that answers over HTTP (OpenEnv's routes, the arena's act protocol and pages) reports
an error with :func:`status_of`. :data:`STATUS` has rows for the core tree of
:mod:`envwire.errors`; a class without a row answers with its nearest ancestor's status, so
every error has one (:class:`~envwire.errors.EnvwireError`'s 500 at worst).

Every table is built once and never changes, so an answer never depends on what was imported.
A layer above this one whose errors must answer differently from their parents (the arena's, a
front end's) builds its answerers' table with :func:`statuses`: this table's rows and its own,
next to its classes, and passes it to :func:`status_of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
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

__all__ = ["STATUS", "StatusTable", "status_of", "statuses"]

#: error class -> HTTP status (read-only).
StatusTable = Mapping[type[EnvwireError], int]

#: The core tree's statuses.
STATUS: Final[StatusTable] = MappingProxyType(
    {
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
)


def statuses(*tables: StatusTable) -> StatusTable:
    """One read-only table of the rows of ``tables``, a later table's row winning."""
    merged: dict[type[EnvwireError], int] = {}
    for table in tables:
        merged.update(table)
    return MappingProxyType(merged)


def status_of(error: EnvwireError | type[EnvwireError], table: StatusTable = STATUS) -> int:
    """The HTTP status that reports ``error`` (an instance or a class): its class's row in
    ``table``, or its nearest ancestor's."""
    return lookup(table, error)
