"""The arena's errors: envwire errors with the HTTP statuses the arena protocol uses.

They extend :mod:`envwire.errors` (so front ends and ``error_class_for_code`` know them);
:data:`ARENA_STATUS` is the table the arena answers with (the act protocol's and their rows). The
request errors (``ProtocolError`` subclasses) belong to the act protocol's codec,
:mod:`envwire.protocols.arena`, and are re-exported here::

    ProtocolError
    ├── MalformedRequestError      400  a field is missing or has the wrong type (names the field)
    ├── UnsupportedVersionError    400  protocol_version is neither 0 nor 1
    ├── BodyTooLargeError          413  the request body is over the limit
    └── NotJSONError               415  the body is not declared as JSON
    UsageError
    ├── UnknownArenaEnvError       400  no arena env of that name (the protocol's choice: 400)
    ├── AuthenticationError        401  unknown agent, wrong password, blocked agent, admin token
    ├── ForbiddenError             403  an operation this server is not set up to allow (uploads)
    ├── NotFoundError              404  pages and admin API: no such env, agent or run
    ├── ConflictError              409  admin API: the env or agent exists already
    └── ArenaBusyError             503  the arena could not save; the client retries

Per-run problems (a bad action, a wrong action number, someone else's run) are never errors of
the request: they travel as messages in the reply.
"""

from __future__ import annotations

from typing import Final

from envwire import errors
from envwire.errors import UsageError
from envwire.protocols.arena import (
    ACT_STATUS,
    BodyTooLargeError,
    MalformedRequestError,
    NotJSONError,
    UnsupportedVersionError,
)
from envwire.protocols.http.status import StatusTable, statuses

__all__ = [
    "ARENA_STATUS",
    "ArenaBusyError",
    "AuthenticationError",
    "BodyTooLargeError",
    "ConflictError",
    "ForbiddenError",
    "MalformedRequestError",
    "NotFoundError",
    "NotJSONError",
    "UnknownArenaEnvError",
    "UnsupportedVersionError",
]


class UnknownArenaEnvError(UsageError):
    """No arena env has that name. The arena protocol answers 400 here, not 404."""

    code = "unknown_arena_env"


class AuthenticationError(UsageError):
    """Unknown agent, wrong password, blocked agent, or a missing or wrong admin token."""

    code = "unauthorized"


class ForbiddenError(errors.ForbiddenError):
    """An operation the server's options do not allow (plugin uploads without
    ``--arena-plugin-upload``): envwire's ``forbidden`` (403)."""


class NotFoundError(UsageError):
    """A page or admin resource that does not exist."""

    code = "not_found"


class ConflictError(UsageError):
    """An admin request would overwrite an env or agent without being asked to."""

    code = "conflict"


class ArenaBusyError(UsageError):
    """The arena could not complete the request now (the database was busy or failed)."""

    code = "arena_busy"


#: The statuses the arena answers with: the act protocol's and the tree above's.
#: UnknownArenaEnvError would answer UsageError's 400 without a row; the row records that 400,
#: not 404, is the protocol's choice.
ARENA_STATUS: Final[StatusTable] = statuses(
    ACT_STATUS,
    {
        UnknownArenaEnvError: 400,
        AuthenticationError: 401,
        NotFoundError: 404,
        ConflictError: 409,
        ArenaBusyError: 503,
    },
)
