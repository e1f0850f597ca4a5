"""dm_env_rpc errors: envwire errors as ``google.rpc.Status`` (with an ``ErrorInfo`` detail
carrying envwire's error code) and back, and the errors only this protocol has.

:data:`CODES` is the one table of the ``google.rpc.Code`` each error class reports with; a class
without a row reports its nearest ancestor's code (:func:`code_of`).
"""

from __future__ import annotations

from typing import Final

from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from google.rpc import code_pb2, error_details_pb2, status_pb2

from envwire.errors import (
    CapacityError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
    ForbiddenError,
    ProtocolError,
    RemoteError,
    StateError,
    TooLargeError,
    TransportError,
    UnauthenticatedError,
    UnknownEnvError,
    UnsupportedError,
    UsageError,
    error_class_for_code,
    lookup,
)

__all__ = [
    "CODES",
    "ERROR_DOMAIN",
    "PropertyPermissionError",
    "UnknownPropertyError",
    "UnknownWorldError",
    "code_of",
    "error_from_status",
    "error_response",
    "status_of",
]

#: ``ErrorInfo.domain`` of the detail envwire attaches to every error ``Status``.
ERROR_DOMAIN: Final = "envwire"


class UnknownWorldError(UsageError):
    """No world of that name exists on this server."""

    code = "unknown_world"


class UnknownPropertyError(UsageError):
    """The properties extension has no property with that key."""

    code = "unknown_property"


class PropertyPermissionError(UsageError):
    """The property exists but cannot be read, written or listed that way."""

    code = "permission_denied"


#: error class -> ``google.rpc.Code`` number.
CODES: Final[dict[type[EnvwireError], int]] = {
    EnvwireError: code_pb2.INTERNAL,
    ProtocolError: code_pb2.INVALID_ARGUMENT,
    TooLargeError: code_pb2.RESOURCE_EXHAUSTED,
    UsageError: code_pb2.INVALID_ARGUMENT,
    UnknownEnvError: code_pb2.NOT_FOUND,
    StateError: code_pb2.FAILED_PRECONDITION,
    CapacityError: code_pb2.RESOURCE_EXHAUSTED,
    UnauthenticatedError: code_pb2.UNAUTHENTICATED,
    ForbiddenError: code_pb2.PERMISSION_DENIED,
    UnsupportedError: code_pb2.UNIMPLEMENTED,
    EnvError: code_pb2.INTERNAL,
    EnvCrashedError: code_pb2.UNAVAILABLE,
    EnvTimeoutError: code_pb2.DEADLINE_EXCEEDED,
    TransportError: code_pb2.UNAVAILABLE,
    UnknownWorldError: code_pb2.NOT_FOUND,
    UnknownPropertyError: code_pb2.NOT_FOUND,
    PropertyPermissionError: code_pb2.PERMISSION_DENIED,
}


def code_of(error: EnvwireError | type[EnvwireError]) -> int:
    """The ``google.rpc.Code`` that reports ``error`` (an instance or a class): its class's row
    in :data:`CODES`, or its nearest ancestor's."""
    return lookup(CODES, error)


def status_of(error: EnvwireError) -> status_pb2.Status:
    """A ``google.rpc.Status`` for ``error``: its gRPC code, its message and an ``ErrorInfo``
    detail whose ``reason`` is the error's envwire ``code``."""
    status = status_pb2.Status(code=code_of(error), message=str(error))
    info = error_details_pb2.ErrorInfo(reason=error.code, domain=ERROR_DOMAIN)
    status.details.add().Pack(info)
    return status


def error_response(error: EnvwireError) -> pb.EnvironmentResponse:
    """An ``EnvironmentResponse`` carrying ``error`` in its ``error`` field."""
    return pb.EnvironmentResponse(error=status_of(error))


def error_from_status(status: status_pb2.Status) -> EnvwireError:
    """The envwire error a ``Status`` stands for (client side).

    An ``ErrorInfo`` detail from envwire names the exact class; otherwise (or when that class
    is not built from a message alone) the result is a :class:`~envwire.errors.RemoteError`.
    """
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            cls = error_class_for_code(info.reason)
            if cls is not RemoteError:
                try:
                    return cls(status.message)
                except TypeError:  # a class with a constructor of its own
                    pass
            return RemoteError(status.message, info.reason)
    return RemoteError(f"{status.message} (gRPC code {status.code})")
