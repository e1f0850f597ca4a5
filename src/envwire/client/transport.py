"""What every client transport offers the adapters above it, and how URLs name a served env.

A transport is one connection to one env (or one vector session) on a server, speaking
envwire's messages: :meth:`Transport.request` sends a request and waits for its reply;
:meth:`Transport.send` and :meth:`Transport.receive` split that in two, so that several
requests can be in flight on one connection (replies come back in request order). The gym-socket,
dm_env_rpc and OpenEnv WebSocket transports pipeline; the OpenEnv HTTP transport answers
``receive`` in order too, one request at a time.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from gymnasium import spaces

from envwire import messages as m
from envwire.errors import InvalidArgumentError

__all__ = ["Transport", "VectorTransport", "split_url"]


@runtime_checkable
class Transport(Protocol):
    """One connection to one env, in envwire's messages.

    Attributes:
        action_space, observation_space: the env's spaces (a vector transport's: one copy's).
    """

    action_space: spaces.Space[Any]
    observation_space: spaces.Space[Any]

    def send(self, request: m.Request) -> None:
        """Send a request without waiting; its reply comes from :meth:`receive`, in order."""
        ...

    def receive(self) -> m.Reply:
        """The reply to the oldest unanswered request (an error reply raises its error)."""
        ...

    def request(self, request: m.Request) -> m.Reply:
        """Send a request and wait for its reply (errors raise)."""
        ...

    def close(self) -> None:
        """Close the connection; the server frees the session."""
        ...


@runtime_checkable
class VectorTransport(Transport, Protocol):
    """A transport to a vector session: ``num_envs`` copies stepped together."""

    num_envs: int
    autoreset_mode: str


def split_url(url: str, default_port: int) -> tuple[str, int, str]:
    """(host, port, env id) of ``scheme://host:port/<env id>`` (the id may contain '/').

    Raises:
        InvalidArgumentError: no host, bad port, or no env id.
    """
    parts = urlsplit(url)
    try:
        port = parts.port or default_port
    except ValueError as exc:
        raise InvalidArgumentError(f"bad port in {url!r}: {exc}") from None
    env_id = unquote(parts.path.lstrip("/"))
    if not parts.hostname:
        raise InvalidArgumentError(f"no host in {url!r}")
    if not env_id:
        raise InvalidArgumentError(
            f"no env id in {url!r} (expected {parts.scheme}://host:port/ENV_ID)"
        )
    return parts.hostname, port, env_id
