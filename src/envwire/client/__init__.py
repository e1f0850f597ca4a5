"""Client transports, one per protocol, and :func:`make` that picks one from a URL."""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from envwire.errors import InvalidArgumentError

__all__ = ["SCHEMES", "VECTOR_SCHEMES", "make", "make_vec"]

#: URL scheme -> "module:function" taking (url, **kwargs) and returning an env.
SCHEMES: dict[str, str] = {
    "gym-socket": "envwire.client.connect:gym_socket",
    "ws": "envwire.client.openenv:connect",
    "wss": "envwire.client.openenv:connect",
    "http": "envwire.client.openenv:connect",
    "https": "envwire.client.openenv:connect",
    "grpc": "envwire.client.dmenvrpc:connect",
}


#: URL scheme -> "module:function" taking (url, num_envs=..., **kwargs), returning a VectorEnv.
VECTOR_SCHEMES: dict[str, str] = {
    "gym-socket": "envwire.client.connect:gym_socket_vector",
    "grpc": "envwire.client.dmenvrpc_vector:connect_vector",
}


def make(url: str, **kwargs: Any) -> Any:
    """Connect to a served env by URL and return it as a ``gymnasium.Env``.

    ``gym-socket://host:port/<env id>``; other schemes as their front ends add them.

    Raises:
        InvalidArgumentError: unknown scheme or malformed URL.
        TransportError: the server cannot be reached, or refused the env.
    """
    return _connector(SCHEMES, url)(url, **kwargs)


def make_vec(
    url: str, num_envs: int, *, autoreset_mode: str = "NextStep", workers: int = 1, **kwargs: Any
) -> Any:
    """Connect to a served env and step ``num_envs`` copies of it as one
    ``gymnasium.vector.VectorEnv``: one message each way per step, whatever N is.

    ``autoreset_mode`` is Gymnasium's ('NextStep', 'SameStep' or 'Disabled'); ``workers`` asks
    the server to split the copies over that many worker processes (capped by the server).

    Raises:
        InvalidArgumentError: unknown scheme, a scheme without a batched path, bad options.
        TransportError: the server cannot be reached, or refused the env.
    """
    connect = _connector(VECTOR_SCHEMES, url)
    return connect(url, num_envs=num_envs, autoreset_mode=autoreset_mode, workers=workers, **kwargs)


def _connector(table: dict[str, str], url: str) -> Any:
    scheme = urlsplit(url).scheme
    if scheme not in table:
        known = ", ".join(f"{s}://" for s in table)
        raise InvalidArgumentError(f"unknown URL scheme in {url!r}; known here: {known}")
    module_name, _, name = table[scheme].partition(":")
    return getattr(importlib.import_module(module_name), name)
