"""Opening a gym-socket client transport from a URL: its credentials, and a SameStep vector
session's flag fallback for servers from before the FINAL_OBS flag."""

from __future__ import annotations

import ssl
from typing import Any, TypedDict, Unpack

from envwire import messages as m
from envwire.client.credentials import Credentials
from envwire.client.gymsocket.sockettransport import DEFAULT_FLAGS, DEFAULT_PORT, GymSocketTransport
from envwire.client.transport import split_url
from envwire.errors import TransportError
from envwire.protocols.gymsocket import Flags

__all__ = ["open_url", "open_vector_url"]

#: A SameStep vector session's flags: its final observations travel as a tensor.
_FINALS_FLAGS = DEFAULT_FLAGS | Flags.FINAL_OBS
#: How a server that does not know FINAL_OBS refuses it.
_UNKNOWN_FINALS = f"unknown handshake flags 0x{int(Flags.FINAL_OBS):02x} "


class _Security(TypedDict):
    token: str | None
    tls: ssl.SSLContext | None


class _Options(TypedDict, total=False):
    """The keyword arguments :func:`open_url` passes on to :class:`GymSocketTransport`."""

    flags: Flags
    vector: dict[str, Any] | None
    busy_poll_us: float


class _VectorOptions(TypedDict, total=False):
    """The keyword arguments :func:`open_vector_url` passes on to :class:`GymSocketTransport`."""

    flags: Flags
    busy_poll_us: float


def _security(url: str, token: str | None, ca: str | None) -> _Security:
    """The transport's ``token`` and ``tls`` for a URL (``gym-sockets://`` is TLS)."""
    credentials = Credentials.resolve(token, ca)
    tls = credentials.ssl_context() if url.startswith("gym-sockets:") else None
    return _Security(token=credentials.token, tls=tls)


def open_url(
    url: str,
    *,
    timeout: float = 30.0,
    token: str | None = None,
    ca: str | None = None,
    **kwargs: Unpack[_Options],
) -> GymSocketTransport:
    """A transport to ``gym-socket://host:port/<env id>`` (``gym-sockets://``: over TLS).

    ``token`` and ``ca`` default to ``ENVWIRE_TOKEN`` and ``ENVWIRE_CA``; other keyword
    arguments go to :class:`GymSocketTransport`.

    Raises:
        InvalidArgumentError: a malformed URL.
        TransportError: the server cannot be reached, or refused the env.
        UnauthenticatedError: the server wants a token this client does not have.
    """
    host, port, env_id = split_url(url, DEFAULT_PORT)
    security = _security(url, token, ca)
    return GymSocketTransport(host, port, env_id, timeout=timeout, **security, **kwargs)


def open_vector_url(
    url: str,
    *,
    num_envs: int,
    autoreset_mode: str = "NextStep",
    workers: int = 1,
    timeout: float = 30.0,
    token: str | None = None,
    ca: str | None = None,
    **kwargs: Unpack[_VectorOptions],
) -> GymSocketTransport:
    """A transport to a vector session of ``num_envs`` copies of the env at
    ``gym-socket://host:port/<env id>`` (``gym-sockets://``: over TLS).

    Raises:
        InvalidArgumentError: a malformed URL or an unknown autoreset mode.
        TransportError: the server cannot be reached, or refused the env.
        UnauthenticatedError: the server wants a token this client does not have.
    """
    mode = m.autoreset_mode(autoreset_mode).value
    vector = {"num_envs": num_envs, "autoreset_mode": mode, "workers": workers}
    host, port, env_id = split_url(url, DEFAULT_PORT)
    security = _security(url, token, ca)
    flags, busy_poll_us = kwargs.get("flags"), kwargs.get("busy_poll_us", 0.0)

    def opened(flags: Flags) -> GymSocketTransport:
        return GymSocketTransport(
            host,
            port,
            env_id,
            timeout=timeout,
            vector=vector,
            flags=flags,
            busy_poll_us=busy_poll_us,
            **security,
        )

    if flags is not None or mode != "SameStep":
        return opened(DEFAULT_FLAGS if flags is None else flags)
    # SameStep's final observations travel as a tensor (FINAL_OBS); a server from before that
    # flag refuses it as unknown, and is asked again without it
    try:
        return opened(_FINALS_FLAGS)
    except TransportError as exc:
        if _UNKNOWN_FINALS not in str(exc):
            raise
    return opened(DEFAULT_FLAGS)
