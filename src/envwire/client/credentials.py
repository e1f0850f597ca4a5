"""What a client presents and whom it trusts: its token, and the CAs that vouch for servers.

Every client transport takes ``token=`` and ``ca=``; when they are not given, the environment
variables ``ENVWIRE_TOKEN`` and ``ENVWIRE_CA`` supply them. TLS always verifies the server's
certificate and name: against ``ca`` (a PEM file) when there is one, else against the system's
CAs. There is no switch to turn verification off.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from envwire.sockets.tls import client_context

__all__ = ["CA_VARIABLE", "TOKEN_VARIABLE", "Credentials"]

TOKEN_VARIABLE = "ENVWIRE_TOKEN"
CA_VARIABLE = "ENVWIRE_CA"


@dataclass(frozen=True, slots=True)
class Credentials:
    """A client's token (None: send none) and CA file (None: the system's CAs)."""

    token: str | None = None
    ca: str | None = None

    @classmethod
    def resolve(cls, token: str | None = None, ca: str | None = None) -> Credentials:
        """The given values, else those of ``ENVWIRE_TOKEN`` and ``ENVWIRE_CA``."""
        return cls(
            token or os.environ.get(TOKEN_VARIABLE) or None,
            ca or os.environ.get(CA_VARIABLE) or None,
        )

    def __repr__(self) -> str:  # never show the token
        shown = "set" if self.token else "none"
        return f"Credentials(token={shown}, ca={self.ca!r})"

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the token."""
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def grpc_metadata(self) -> tuple[tuple[str, str], ...]:
        """gRPC call metadata carrying the token."""
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS client context that verifies servers (see the module docstring).

        Raises:
            ConfigError: the CA file cannot be read.
        """
        return client_context(self.ca)
