"""dm_env_rpc errors: envwire errors as ``google.rpc.Status`` (with an ``ErrorInfo`` detail
carrying envwire's error code) and back, and the errors only this protocol has."""

from __future__ import annotations

from typing import Any, Final

from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from google.rpc import error_details_pb2, status_pb2

from envwire.errors import EnvwireError, RemoteError, UsageError, error_class_for_code

__all__ = [
    "ERROR_DOMAIN",
    "PropertyPermissionError",
    "UnknownPropertyError",
    "UnknownWorldError",
    "error_from_status",
    "error_response",
    "status_of",
]

#: ``ErrorInfo.domain`` of the detail envwire attaches to every error ``Status``.
ERROR_DOMAIN: Final = "envwire"


# google.rpc.Code numbers of the errors below.
_NOT_FOUND = 5
_PERMISSION_DENIED = 7


class UnknownWorldError(UsageError):
    """No world of that name exists on this server."""

    code = "unknown_world"
    http_status = 404
    grpc_code = _NOT_FOUND


class UnknownPropertyError(UsageError):
    """The properties extension has no property with that key."""

    code = "unknown_property"
    http_status = 404
    grpc_code = _NOT_FOUND


class PropertyPermissionError(UsageError):
    """The property exists but cannot be read, written or listed that way."""

    code = "permission_denied"
    http_status = 403
    grpc_code = _PERMISSION_DENIED


def status_of(error: EnvwireError) -> Any:
    """A ``google.rpc.Status`` for ``error``: its gRPC code, its message and an ``ErrorInfo``
    detail whose ``reason`` is the error's envwire ``code``."""
    status = status_pb2.Status(code=error.grpc_code, message=str(error))
    info = error_details_pb2.ErrorInfo(reason=error.code, domain=ERROR_DOMAIN)
    status.details.add().Pack(info)
    return status


def error_response(error: EnvwireError) -> Any:
    """An ``EnvironmentResponse`` carrying ``error`` in its ``error`` field."""
    return pb.EnvironmentResponse(error=status_of(error))


def error_from_status(status: Any) -> EnvwireError:
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
