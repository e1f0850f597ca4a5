"""Which ``Host`` and ``Origin`` headers an HTTP front end answers (DNS rebinding, CSRF and
cross-site WebSocket hijacking).

A web page the operator visits can make the browser send requests to any address, loopback
included. Two checks stop it from driving the server:

- ``Host``: a page served from ``http://evil.example`` whose name the attacker re-points at
  127.0.0.1 (DNS rebinding) makes requests whose ``Host`` is ``evil.example``. Allowed are: IP
  literals (a page can only reach an address as an IP literal if it was itself served from
  there), ``localhost``, the bound host and the configured names (``allowed_hosts``; ``*``
  allows every name).
- ``Origin``: browsers send it with every WebSocket handshake and every cross-site request;
  non-browser clients usually send none. A request with an ``Origin`` is allowed only when the
  origin is the server itself (its host and port equal the request's ``Host``), or is listed in
  ``allowed_origins`` (``*`` allows all). ``Origin: null`` (sandboxed frames, files) never is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["HostPolicy", "is_loopback", "split_authority"]

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def is_loopback(host: str) -> bool:
    """Whether a bind address is loopback only (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.partition("%")[0]).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    return True


def split_authority(authority: str) -> tuple[str, int | None]:
    """(lower-case host, port or None) of a ``Host`` header value; ("", None) if malformed."""
    text = authority.strip().lower()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return "", None
        port_text = rest[1:]
    else:
        host, _, port_text = text.partition(":")
        if ":" in port_text:
            return "", None
    if port_text:
        if not port_text.isdigit() or len(port_text) > 5:
            return "", None
        return host, int(port_text)
    return host, None


class HostPolicy:
    """The Host and Origin allow-list of one front end (see the module docstring).

    Args:
        bound_host: the address the front end binds.
        names: more host names clients use to reach the server (``*``: any name).
        origins: more origins browsers may send requests from (``https://app.example``;
            ``*``: any origin).
        scheme: ``http`` or ``https``, for the server's own origin's default port.
    """

    def __init__(
        self,
        bound_host: str,
        names: Iterable[str] = (),
        origins: Iterable[str] = (),
        *,
        scheme: str = "http",
    ) -> None:
        self.names = {n.strip().lower().rstrip(".") for n in names if n.strip()}
        self.names |= {"localhost", bound_host.strip("[]").lower()}
        self.any_name = "*" in self.names
        self.origins = {o.strip().lower().rstrip("/") for o in origins if o.strip()}
        self.any_origin = "*" in self.origins
        self.scheme = scheme

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request's ``Host`` names this server (an absent Host is refused)."""
        host, _ = split_authority(host_header)
        if not host:
            return False
        return self.any_name or _is_ip(host) or host.rstrip(".") in self.names

    def origin_allowed(self, origin: str | None, host_header: str) -> bool:
        """Whether a request with this ``Origin`` (None: no header) may be answered."""
        if origin is None:
            return True
        text = origin.strip().lower().rstrip("/")
        if self.any_origin or text in self.origins:
            return True
        if text == "null":
            return False
        parts = urlsplit(text)
        try:
            origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if not parts.hostname or parts.scheme not in _DEFAULT_PORTS:
            return False
        host, port = split_authority(host_header)
        own_port = port or _DEFAULT_PORTS[self.scheme]
        return parts.hostname == host and origin_port == own_port and self.host_allowed(host_header)
