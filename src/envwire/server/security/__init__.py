"""What every front end checks before a session exists: tokens, TLS, hosts, and client limits.

One :class:`Security` per server holds the accepted tokens (:mod:`.tokens`), the TLS server
context (:mod:`envwire.sockets.tls`) and the Host/Origin allow-list (:mod:`.origins`); each front
end applies them in its own protocol's terms. :mod:`.addresses` bounds what one client address may
hold, and :mod:`.admission` decides which connections of the threaded front ends get a thread.
The settings they read are :class:`~envwire.settings.SecuritySettings` (tokens, TLS, names,
connection bounds), with their defaults in ``docs/guides/serving.md``'s settings table.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from envwire.errors import ConfigError
from envwire.server.security.admission import ConnectionLimits
from envwire.server.security.origins import HostPolicy, is_loopback
from envwire.server.security.tokens import TokenSet
from envwire.settings import SecuritySettings
from envwire.sockets.tls import server_context

__all__ = ["Security", "connection_limits"]


def connection_limits(
    settings: SecuritySettings, max_connections: int | None, host: str
) -> ConnectionLimits:
    """The bounds of one threaded front end bound to ``host`` that holds at most
    ``max_connections``.

    Per-address caps are there against strangers: ``auto`` leaves them off on a loopback bind
    (every client is on this machine: one trainer may hold the whole front end), and is half of
    the front end's connections (pending ones: 16) on any other. A client that shows a token
    counts against ``max_connections_per_token`` instead (``auto``: the front end's total).
    The handshake deadline's ``auto`` is 60 s on a loopback bind without tokens (a burst of
    thousands of clients on this machine, starved of CPU, may be slow to send their first
    bytes) and 10 s otherwise.
    """
    local = is_loopback(host)
    per_address = settings.max_connections_per_address
    if per_address == "auto":
        per_address = None if local or max_connections is None else max(max_connections // 2, 1)
    pending_per_address = settings.max_pending_per_address
    if pending_per_address == "auto":
        pending_per_address = None if local else 16
    per_token = settings.max_connections_per_token
    if per_token == "auto":
        per_token = None
    assert not isinstance(per_address, str) and not isinstance(pending_per_address, str)
    handshake_timeout = settings.handshake_timeout
    if handshake_timeout == "auto":
        handshake_timeout = 60.0 if local and settings.token_file is None else 10.0
    assert not isinstance(per_token, str) and not isinstance(handshake_timeout, str)
    return ConnectionLimits(
        max_connections=max_connections,
        per_address=per_address,
        max_pending=settings.max_pending,
        pending_per_address=pending_per_address,
        handshake_timeout=handshake_timeout,
        per_token=per_token,
    )


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
    def from_settings(cls, settings: SecuritySettings) -> Security:
        """Load the token file and TLS files the settings name.

        Raises:
            ConfigError: a file cannot be used.
        """
        cert, key = settings.tls_cert, settings.tls_key
        return cls(
            tokens=TokenSet(settings.token_file) if settings.token_file else None,
            tls=server_context(cert, key) if cert and key else None,
            cert_file=cert,
            key_file=key,
            allowed_hosts=settings.allowed_hosts,
            allowed_origins=settings.allowed_origins,
            insecure=settings.insecure,
            public_metrics=settings.public_metrics,
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
