"""OpenEnv's WebSocket error codes, and the one table of the code each envwire error class
reports with (:data:`ERROR_TABLE`, looked up by :func:`code_of`)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from envwire.errors import (
    CapacityError,
    EnvError,
    EnvwireError,
    ForbiddenError,
    ProtocolError,
    StateError,
    UnauthenticatedError,
    UnknownEnvError,
    UsageError,
    lookup,
)

__all__ = ["ERROR_CODES", "ERROR_TABLE", "ErrorCode", "code_of"]


class ErrorCode(StrEnum):
    """openenv-core's WebSocket error codes."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


ERROR_CODES = frozenset(ErrorCode)

#: error class -> the OpenEnv error code that reports it (:func:`code_of`), built once (read
#: only); a front end whose errors must report differently from their parents builds its own
#: table from this one's rows and theirs, and passes it to :func:`code_of`.
ERROR_TABLE: Final[Mapping[type[EnvwireError], ErrorCode]] = MappingProxyType(
    {
        EnvwireError: ErrorCode.EXECUTION_ERROR,
        ProtocolError: ErrorCode.INVALID_JSON,
        UsageError: ErrorCode.VALIDATION_ERROR,
        UnknownEnvError: ErrorCode.FACTORY_ERROR,
        StateError: ErrorCode.SESSION_ERROR,
        CapacityError: ErrorCode.CAPACITY_REACHED,
        UnauthenticatedError: ErrorCode.SESSION_ERROR,
        ForbiddenError: ErrorCode.SESSION_ERROR,
        EnvError: ErrorCode.EXECUTION_ERROR,
    }
)


def code_of(
    error: EnvwireError | type[EnvwireError],
    table: Mapping[type[EnvwireError], ErrorCode] = ERROR_TABLE,
) -> ErrorCode:
    """The OpenEnv error code that reports ``error`` (an instance or a class): its class's row
    in ``table``, or its nearest ancestor's."""
    return lookup(table, error)
