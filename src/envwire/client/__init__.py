"""Client transports, one per protocol, and :func:`make` that picks one from a URL."""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from envwire.errors import InvalidArgumentError

__all__ = ["SCHEMES", "make"]

#: URL scheme -> "module:function" taking (url, **kwargs) and returning an env.
SCHEMES: dict[str, str] = {
    "gym-socket": "envwire.client.connect:gym_socket",
}


def make(url: str, **kwargs: Any) -> Any:
    """Connect to a served env by URL and return it as a ``gymnasium.Env``.

    ``gym-socket://host:port/<env id>``; other schemes as their front ends add them.

    Raises:
        InvalidArgumentError: unknown scheme or malformed URL.
        TransportError: the server cannot be reached, or refused the env.
    """
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise InvalidArgumentError(f"unknown URL scheme in {url!r}; known: {known}")
    module_name, _, name = SCHEMES[scheme].partition(":")
    connect = getattr(importlib.import_module(module_name), name)
    return connect(url, **kwargs)
