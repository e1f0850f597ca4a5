"""One exception tree for all of envwire.

Every error envwire raises derives from :class:`EnvwireError`::

    EnvwireError                     base; never raised itself
    ├── ProtocolError                the peer sent bytes or JSON that break the protocol (remote)
    │   └── TooLargeError            a packet, message or body is over a size limit, or the
    │                                server's receive buffers are full
    ├── UsageError                   a well-formed request that cannot be honoured (remote)
    │   ├── UnknownEnvError          no such env id here (did-you-mean in the message)
    │   ├── InvalidActionError       action not in the action space
    │   ├── InvalidArgumentError     bad seed, options, settings, field values
    │   ├── StateError               request not allowed in the session's state (step before reset)
    │   ├── CapacityError            the server is at its session limit
    │   │   ├── EnvCapacityError     one env is at its own limit (``EnvSpec.max_sessions``)
    │   │   └── RateLimitedError     too many failed attempts: wait ``retry_after`` seconds
    │   ├── UnsupportedError         the request names a feature that does not exist (Upload)
    │   ├── UnauthenticatedError     no token, or a token the server does not accept
    │   └── ForbiddenError           a request the server refuses whoever sends it (foreign Origin)
    ├── EnvError                     the environment's code failed (local to the server)
    │   ├── EnvCrashedError          the env's worker process died (segfault, os._exit, ...)
    │   └── EnvTimeoutError          an env call ran past its timeout
    ├── ConfigError                  the server's own configuration is wrong (bad entry point)
    └── TransportError               client side: the connection failed, closed or timed out
        └── RemoteError              client side: the server answered with an error

Each class carries ``code`` (a stable machine-readable name) and ``remote`` (whose fault it
is), and nothing about any wire. Each protocol maps the tree to its own codes at its boundary,
in one table that lives with its codec in :mod:`envwire.protocols`, keyed by class and read
with :func:`lookup`: a class without a row of its own reports as its nearest ancestor does, so
a new subclass needs a row only where it should differ from its parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = [
    "CapacityError",
    "ConfigError",
    "EnvCapacityError",
    "EnvCrashedError",
    "EnvError",
    "EnvTimeoutError",
    "EnvwireError",
    "ForbiddenError",
    "InvalidActionError",
    "InvalidArgumentError",
    "ProtocolError",
    "RateLimitedError",
    "RemoteError",
    "StateError",
    "TooLargeError",
    "TransportError",
    "UnauthenticatedError",
    "UnknownEnvError",
    "UnsupportedError",
    "UsageError",
    "clip",
    "error_class_for_code",
    "lookup",
]

_Row = TypeVar("_Row")


def clip(text: object, limit: int = 80) -> str:
    """``repr(text)`` cut to about ``limit`` characters, saying how long it was: for echoing
    client input in error messages, which must never grow with what a client sends."""
    shown = repr(text) if isinstance(text, str) else repr(str(text))
    if len(shown) <= limit:
        return shown
    size = len(text) if isinstance(text, str | bytes) else len(str(text))
    return f"{shown[: limit - 1]}... ({size} characters)"


class EnvwireError(Exception):
    """Base of every envwire error.

    Attributes:
        code: stable machine-readable name of the error kind (``"invalid_action"``, ...).
        remote: True when the peer is at fault, False when this side is.
        observed: set once the server's metrics counted the error (a front end reports every
            error it answers; one raised by a session was counted there already).
    """

    code = "internal"
    remote = False
    observed = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ProtocolError(EnvwireError):
    """The peer broke the wire protocol: malformed bytes, bad JSON, unknown packet or type."""

    code = "protocol_error"
    remote = True


class TooLargeError(ProtocolError):
    """The peer sent (or declared) more bytes than a limit allows, or the receive buffers that
    all connections share are full. The connection ends after the error is reported."""

    code = "too_large"


class UsageError(EnvwireError):
    """A well-formed request that cannot be honoured."""

    code = "bad_request"
    remote = True


class UnknownEnvError(UsageError):
    """No env with that id is served here."""

    code = "unknown_env"


class InvalidActionError(UsageError):
    """The action is not a member of the env's action space."""

    code = "invalid_action"


class InvalidArgumentError(UsageError):
    """A seed, option, setting or field has the wrong type or value."""

    code = "invalid_argument"


class StateError(UsageError):
    """The request is not allowed in the session's current state."""

    code = "bad_state"


class CapacityError(UsageError):
    """The server holds as many sessions as it is configured to."""

    code = "capacity_reached"


class EnvCapacityError(CapacityError):
    """One env holds as many sessions as it may (``EnvSpec.max_sessions``).

    Attributes:
        env_id: the env.
        active: its sessions open now.
        limit: the most it may have.
    """

    def __init__(self, env_id: str, active: int, limit: int) -> None:
        super().__init__(
            f"Server at capacity: {active}/{limit} sessions of {env_id} active. "
            "Cannot accept new connections."
        )
        self.env_id, self.active, self.limit = env_id, active, limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.env_id, self.active, self.limit))


class RateLimitedError(CapacityError):
    """Too many failed attempts (logins) from a client or for an account.

    Attributes:
        retry_after: seconds until the next attempt may succeed (a front end tells the
            client to wait that long where its protocol can say so).
    """

    code = "rate_limited"
    retry_after: float = 1.0


class UnauthenticatedError(UsageError):
    """The request carries no token, or one the server does not accept."""

    code = "unauthenticated"


class ForbiddenError(UsageError):
    """The server refuses the request whoever sends it (a foreign ``Origin`` or ``Host``)."""

    code = "forbidden"


class UnsupportedError(UsageError):
    """The request names a feature that does not exist or no longer exists."""

    code = "unsupported"


class EnvError(EnvwireError):
    """The environment's own code raised an exception.

    Construct it from a message alone (clients rebuild errors from their code and message:
    :func:`error_class_for_code`); :meth:`wrapping` also keeps the env's exception's own text.
    """

    code = "env_error"
    #: The env's exception's own text, when this error wraps one (see :attr:`env_message`).
    own_text: str | None = None

    @classmethod
    def wrapping(cls, message: str, exc: BaseException) -> EnvError:
        """The error for ``exc``, raised by the env: ``message`` names the env and the call,
        and :attr:`env_message` is ``str(exc)``."""
        error = cls(message)
        # An attribute, not an argument: pickling (the worker process's pipe) rebuilds the
        # error from its message and then restores its attributes.
        error.own_text = str(exc)
        return error

    @property
    def env_message(self) -> str:
        """The text of the env's own exception, without envwire's naming of the env and the
        call (for front ends that answer as a server reporting only that text would). The whole
        message when there is no such exception (a crash, a timeout)."""
        return self.message if self.own_text is None else self.own_text


class EnvCrashedError(EnvError):
    """The process running the env died (segfault, ``os._exit``, killed)."""

    code = "env_crashed"


class EnvTimeoutError(EnvError):
    """An env call ran past its timeout; the env was abandoned."""

    code = "env_timeout"


class ConfigError(EnvwireError):
    """The server's configuration is wrong (bad entry point, bad config file)."""

    code = "config_error"


class TransportError(EnvwireError):
    """Client side: the connection could not be made, was closed, or timed out."""

    code = "transport_error"


class RemoteError(TransportError):
    """Client side: the server reported an error.

    Attributes:
        remote_code: the error ``code`` the server reported, when the protocol carries one.
    """

    code = "remote_error"

    def __init__(self, message: str, remote_code: str | None = None) -> None:
        super().__init__(message)
        self.remote_code = remote_code


def _all_subclasses(cls: type[EnvwireError]) -> list[type[EnvwireError]]:
    found: list[type[EnvwireError]] = [cls]
    for sub in cls.__subclasses__():
        found.extend(_all_subclasses(sub))
    return found


def error_class_for_code(code: str) -> type[EnvwireError]:
    """The error class that defines ``code`` (subclasses that only add data share their
    parent's code), constructible from a message alone; :class:`RemoteError` if none matches."""
    for cls in _all_subclasses(EnvwireError):
        if "code" in vars(cls) and cls.code == code and cls.__init__ is EnvwireError.__init__:
            return cls
    return RemoteError


def lookup(
    table: Mapping[type[EnvwireError], _Row], error: EnvwireError | type[EnvwireError]
) -> _Row:
    """The row of ``table`` for ``error`` (an instance or a class): its class's own row, or else
    that of its nearest ancestor in method resolution order.

    Raises:
        KeyError: no class in ``error``'s MRO has a row; a table with a row for
            :class:`EnvwireError` answers for every error.
    """
    cls = error if isinstance(error, type) else type(error)
    for ancestor in cls.__mro__:
        if issubclass(ancestor, EnvwireError) and ancestor in table:
            return table[ancestor]
    raise KeyError(f"expected a row for {cls.__name__} or one of its bases, found none")
