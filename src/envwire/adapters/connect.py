"""URL -> connected env: :func:`make` and :func:`make_vec`, one opener per URL scheme.

The openers live with their transports in :mod:`envwire.client`, each named by its front end's
row (:data:`envwire.ports.FRONT_ENDS`), and are imported on first use (the gRPC and OpenEnv
clients are heavy imports that ``import envwire`` should not pay for).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import gymnasium

from envwire.adapters.gymenv import RemoteEnv
from envwire.adapters.vector import RemoteVectorEnv
from envwire.client.transport import Transport, VectorTransport
from envwire.errors import InvalidArgumentError, ProtocolError
from envwire.ports import FRONT_ENDS

if TYPE_CHECKING:
    from envwire.client.openenv import TypedClient

__all__ = ["SCHEMES", "VECTOR_SCHEMES", "make", "make_vec"]

#: URL scheme -> "module:function" taking (url, **kwargs) and returning a transport (or, for a
#: typed env over OpenEnv, a ``TypedClient``): each front end's opener, under its schemes.
SCHEMES: dict[str, str] = {
    scheme: row.opener
    for row in FRONT_ENDS
    if row.opener is not None
    for pair in row.schemes
    for scheme in pair
}

#: URL scheme -> "module:function" taking (url, num_envs=..., autoreset_mode=..., workers=...,
#: **kwargs) and returning a vector transport: the front ends' with a batched path.
VECTOR_SCHEMES: dict[str, str] = {
    scheme: row.vector_opener
    for row in FRONT_ENDS
    if row.vector_opener is not None
    for pair in row.schemes
    for scheme in pair
}


def make(url: str, **kwargs: object) -> gymnasium.Env[Any, Any] | TypedClient:
    """Connect to a served env by URL and return it as a ``gymnasium.Env``: ``gym-socket://``,
    ``grpc://``, ``ws://``/``http://`` (over OpenEnv, a typed env comes back as a
    :class:`~envwire.client.openenv.TypedClient` instead). Keyword arguments go to the scheme's
    transport.

    Raises:
        InvalidArgumentError: unknown scheme or malformed URL.
        TransportError: the server cannot be reached, or refused the env.
    """
    opened = _opener(SCHEMES, url)(url, **kwargs)
    return RemoteEnv(opened, url) if isinstance(opened, Transport) else opened


def make_vec(
    url: str,
    num_envs: int,
    *,
    autoreset_mode: str = "NextStep",
    workers: int = 1,
    **kwargs: object,
) -> RemoteVectorEnv:
    """Connect to a served env and step ``num_envs`` copies of it as one
    ``gymnasium.vector.VectorEnv``: one message each way per step, whatever N is.

    ``autoreset_mode`` is Gymnasium's ('NextStep', 'SameStep' or 'Disabled'); ``workers`` asks
    the server to split the copies over that many worker processes (capped by the server).

    Raises:
        InvalidArgumentError: unknown scheme, a scheme without a batched path, bad options.
        TransportError: the server cannot be reached, or refused the env.
    """
    opener = _opener(VECTOR_SCHEMES, url)
    transport = opener(
        url, num_envs=num_envs, autoreset_mode=autoreset_mode, workers=workers, **kwargs
    )
    if not isinstance(transport, VectorTransport):  # pragma: no cover - the table's contract
        raise ProtocolError(f"{url!r} did not open a vector transport")
    return RemoteVectorEnv(transport, transport.num_envs, transport.autoreset_mode, url)


def _opener(table: dict[str, str], url: str) -> Callable[..., Transport | TypedClient]:
    """The opener of ``url``'s scheme in ``table`` (its keyword arguments are the transport's).

    Raises:
        InvalidArgumentError: the table has no such scheme.
    """
    scheme = urlsplit(url).scheme
    if scheme not in table:
        known = ", ".join(f"{s}://" for s in table)
        raise InvalidArgumentError(f"unknown URL scheme in {url!r}; known here: {known}")
    module_name, _, name = table[scheme].partition(":")
    opener: Callable[..., Transport | TypedClient] = getattr(
        importlib.import_module(module_name), name
    )
    return opener
