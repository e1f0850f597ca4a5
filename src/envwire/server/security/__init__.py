"""What every front end checks before a session exists: tokens, TLS, hosts, and client limits.

One :class:`Security` per server holds the accepted tokens (:mod:`.tokens`), the TLS server
context (:mod:`.tls`) and the Host/Origin allow-list settings (:mod:`.hosts`); each front end
applies them in its own protocol's terms. :mod:`.limits` bounds what one client address may
hold, and :mod:`.admission` decides which connections of the threaded front ends get a thread.

Server settings read here (``[server]`` table, or ``envwire serve`` flags):

=================================  =========  =================================================
``token_file``                     none       tokens every front end requires (``--token-file``)
``tls_cert``, ``tls_key``          none       serve every front end over TLS (``--tls-cert``...)
``insecure``                       false      serve a non-loopback address without tokens
``public_metrics``                 false      ``/metrics`` without a token when tokens are on
                                              (``--public-metrics``; the dashboard never)
``allowed_hosts``                  []         more ``Host`` names HTTP clients may use (``*``:
                                              any)
``allowed_origins``                []         more browser origins allowed (``*``: any)
``max_connections``                1024       connections one threaded front end holds
``max_connections_per_address``    1/2 of it  of those, from one client address
``max_pending``                    64         connections in their handshake at once (a
                                              thread each); the others wait without a thread
``max_pending_per_address``        16         of those, from one client address
``handshake_timeout``              10.0       seconds for a connection's whole handshake (TLS
                                              included), counted from the accept
=================================  =========  =================================================
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from envwire.errors import ConfigError
from envwire.server.security.admission import ConnectionLimits
from envwire.server.security.hosts import HostPolicy, is_loopback
from envwire.server.security.tokens import TokenSet
from envwire.sockets.tls import server_context

__all__ = ["Security", "connection_limits", "setting", "setting_seconds"]


def setting(options: Mapping[str, Any], key: str, default: int | None) -> int | None:
    """An integer server setting >= 0; ``None`` (``"none"`` in a file) turns the bound off.

    Raises:
        ConfigError: not an integer >= 0.
    """
    value = options.get(key, default)
    if value is None or (isinstance(value, str) and value.lower() == "none"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{key} must be an integer, got {value!r}") from None
    if number < 0:
        raise ConfigError(f"{key} must be >= 0, got {number}")
    return number


def setting_seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    """A positive number of seconds.

    Raises:
        ConfigError: not a positive number.
    """
    value = options.get(key, default)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number of seconds, got {value!r}") from None
    if not seconds > 0:
        raise ConfigError(f"{key} must be > 0 seconds, got {value!r}")
    return seconds


def connection_limits(options: Mapping[str, Any], *, default_max: int = 1024) -> ConnectionLimits:
    """The threaded front ends' connection bounds from the server settings.

    Raises:
        ConfigError: a setting has the wrong type.
    """
    total = setting(options, "max_connections", default_max)
    per_address = setting(
        options, "max_connections_per_address", None if total is None else max(total // 2, 1)
    )
    return ConnectionLimits(
        max_connections=total,
        per_address=per_address,
        max_pending=setting(options, "max_pending", 64),
        pending_per_address=setting(options, "max_pending_per_address", 16),
        handshake_timeout=setting_seconds(options, "handshake_timeout", 10.0),
    )


def _names(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class Security:
    """A server's tokens, TLS and allowed names (see the module docstring)."""

    tokens: TokenSet | None = None
    tls: ssl.SSLContext | None = None
    cert_file: str | None = None
    key_file: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    insecure: bool = False
    public_metrics: bool = False  # /metrics without a token even when tokens are on

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Security:
        """Load the token file and TLS files the settings name.

        Raises:
            ConfigError: a file cannot be used, or only one of ``tls_cert``/``tls_key`` is set.
        """
        token_file = options.get("token_file")
        cert, key = options.get("tls_cert"), options.get("tls_key")
        if bool(cert) != bool(key):
            raise ConfigError("TLS needs both a certificate and its key (--tls-cert, --tls-key)")
        return cls(
            tokens=TokenSet(token_file) if token_file else None,
            tls=server_context(str(cert), str(key)) if cert else None,
            cert_file=str(cert) if cert else None,
            key_file=str(key) if key else None,
            allowed_hosts=_names(options.get("allowed_hosts"), "allowed_hosts"),
            allowed_origins=_names(options.get("allowed_origins"), "allowed_origins"),
            insecure=bool(options.get("insecure", False)),
            public_metrics=bool(options.get("public_metrics", False)),
        )

    def check_exposure(self, host: str) -> None:
        """Refuse to serve a non-loopback address without tokens, unless ``insecure``.

        Raises:
            ConfigError: saying why, and how to override.
        """
        if self.tokens is None and not self.insecure and not is_loopback(host):
            raise ConfigError(
                f"refusing to serve {host} without authentication: anyone who can reach it "
                "could run envs (and code) here. Give --token-file FILE (one token per line), "
                "or bind 127.0.0.1, or pass --insecure if the network itself is trusted"
            )

    def authenticated(self, token: str | bytes | None) -> bool:
        """Whether a client presenting ``token`` may go on (always, without tokens)."""
        return self.tokens is None or self.tokens.check(token)

    def host_policy(self, bound_host: str) -> HostPolicy:
        """The Host/Origin allow-list of an HTTP front end bound to ``bound_host`` (the
        machine's own host name is allowed too)."""
        return HostPolicy(
            bound_host,
            (*self.allowed_hosts, socket.gethostname()),
            self.allowed_origins,
            scheme="https" if self.tls is not None else "http",
        )
