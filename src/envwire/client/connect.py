"""URL -> connected env, one function per scheme (see ``envwire.client.SCHEMES``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from envwire.adapters.gym import RemoteEnv
from envwire.errors import InvalidArgumentError

__all__ = ["gym_socket", "gym_socket_vector", "split_url"]


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


def gym_socket(url: str, *, timeout: float = 30.0, **kwargs: Any) -> RemoteEnv:
    """``gym-socket://host:port/<env id>`` as a ``gymnasium.Env``."""
    from envwire.client.gymsocket import GymSocketTransport

    host, port, env_id = split_url(url, 5001)
    return RemoteEnv(GymSocketTransport(host, port, env_id, timeout=timeout, **kwargs), url)


def gym_socket_vector(
    url: str,
    *,
    num_envs: int,
    autoreset_mode: str = "NextStep",
    workers: int = 1,
    timeout: float = 30.0,
    **kwargs: Any,
) -> Any:
    """``gym-socket://host:port/<env id>`` as a ``gymnasium.vector.VectorEnv`` of N copies."""
    from envwire.adapters.vector import RemoteVectorEnv
    from envwire.client.gymsocket import GymSocketTransport
    from envwire.runtime.vector import autoreset_mode as parse_mode

    mode = parse_mode(autoreset_mode).value
    host, port, env_id = split_url(url, 5001)
    vector = {"num_envs": num_envs, "autoreset_mode": mode, "workers": workers}
    transport = GymSocketTransport(host, port, env_id, timeout=timeout, vector=vector, **kwargs)
    return RemoteVectorEnv(transport, num_envs, mode, url)
