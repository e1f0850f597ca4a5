"""dm_env_rpc vector worlds from the client side: N env copies per message, and ``make_vec``.

:class:`DmEnvRpcVectorTransport` creates (or joins) a vector world (CreateWorld ``num_envs``, see
``docs/protocols/dm_env_rpc.md``) and speaks envwire's messages over it: a batch of N actions goes
out in one StepRequest, and the batch of observations, rewards, terminations, truncations and the
vector info comes back in one StepResponse. :func:`open_vector_url` opens one from a URL;
``envwire.make_vec("grpc://...", num_envs=N)`` wraps it in a
:class:`~envwire.adapters.vector.RemoteVectorEnv`, a ``gymnasium.vector.VectorEnv`` whose batches
equal Gymnasium's ``SyncVectorEnv``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

import numpy as np
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire import jsonio
from envwire import messages as m
from envwire.client.dmenvrpc.stream import DEFAULT_PORT, DmEnvRpcTransport, security
from envwire.client.transport import split_url
from envwire.errors import EnvError, InvalidArgumentError, StateError
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import VECTOR_OBSERVATIONS, Layout

__all__ = ["DmEnvRpcVectorTransport", "open_vector_url"]


class _Options(TypedDict, total=False):
    """The keyword arguments :func:`open_vector_url` passes on to
    :class:`DmEnvRpcVectorTransport`."""

    world: str | None
    join_settings: Mapping[str, Any] | None


class DmEnvRpcVectorTransport(DmEnvRpcTransport):
    """A vector world on a dm_env_rpc server (CreateWorld ``num_envs``), as envwire messages.

    Takes the arguments of :class:`DmEnvRpcTransport`; ``world_settings`` should hold
    ``num_envs`` (and ``autoreset_mode``, ``workers``) unless ``world`` names an existing vector
    world. Spaces are the single copy's; ``Reset`` takes an int seed, one seed per copy (None
    = unseeded) and the option ``reset_mask``; ``Step`` takes a batch and answers a
    :class:`~envwire.messages.VectorStepReply`.

    Raises (from the constructor): as :class:`DmEnvRpcTransport`, and
        InvalidArgumentError: ``world`` names a world of one env.
    """

    _properties = ("world.num_envs", "world.autoreset_mode")

    def _lay_out(self, values: Mapping[str, str]) -> None:
        self.autoreset_mode = values["world.autoreset_mode"]
        if not self.autoreset_mode:
            raise InvalidArgumentError(
                f"{self.where}: world {self.world_name} has one env, not copies stepped "
                "together; use envwire.make() for it"
            )
        self.num_envs = n = int(values["world.num_envs"])
        self._actions = Layout(self.action_space, "action", batch=n).matched(
            self.specs.actions, "action"
        )
        self._observations = Layout(
            self.observation_space, "observation", reserved=VECTOR_OBSERVATIONS, batch=n
        ).matched(self.specs.observations, "observation")
        uids = {spec.name: uid for uid, spec in self.specs.observations.items()}
        self._requested = sorted(uids.values())
        self._reward, self._terminated, self._truncated, self._info = (
            uids[name] for name in ("reward", "terminated", "truncated", "envwire.info")
        )

    def _reset_settings(self, seed: object, options: Mapping[str, Any] | None) -> dict[str, Any]:
        unknown = sorted(set(options or ()) - {"reset_mask"})
        if unknown:
            raise InvalidArgumentError(
                f"reset options {unknown} have no place in a ResetRequest (only reset_mask)"
            )
        settings: dict[str, Any] = {}
        if isinstance(seed, list | tuple):
            settings["seed"] = np.array([-1 if s is None else s for s in seed], np.int64)
        elif seed is not None:
            settings["seed"] = seed
        if options:
            settings["reset_mask"] = np.asarray(options["reset_mask"], np.bool_).reshape(-1)
        return settings

    def _step_reply(self) -> m.VectorStepReply:  # type: ignore[override]
        try:
            response = self._take("step")
        except EnvError:  # the env failed: the server ends the sequence
            self._ended = True
            raise
        if self._ended:
            raise StateError(f"step after the sequence ended on {self.where}: reset first")
        if response.state != pb.RUNNING:  # someone else's ResetWorld ended it
            self._ended = True
            raise StateError(f"{self.where}: the world interrupted the sequence: reset first")
        observations = response.observations
        return m.VectorStepReply(
            self._observe(observations),
            dmenvrpc.unpack(observations[self._reward]),
            dmenvrpc.unpack(observations[self._terminated]),
            dmenvrpc.unpack(observations[self._truncated]),
            jsonio.loads_info(observations[self._info].strings.array[0]),
        )

    def __repr__(self) -> str:
        return f"DmEnvRpcVectorTransport({self.where}, world {self.world_name!r})"


def open_vector_url(
    url: str,
    *,
    num_envs: int,
    autoreset_mode: str = "NextStep",
    workers: int = 1,
    timeout: float = 30.0,
    world_settings: Mapping[str, Any] | None = None,
    token: str | None = None,
    ca: str | None = None,
    **kwargs: Unpack[_Options],
) -> DmEnvRpcVectorTransport:
    """A transport to a vector world of ``num_envs`` copies of the env at
    ``grpc://host:port/<env id>``, stepped together (other keyword arguments go to
    :class:`DmEnvRpcVectorTransport`).

    Raises:
        InvalidArgumentError: a bad autoreset mode, or the server refused the settings.
        TransportError: the server cannot be reached.
    """
    host, port, env_id = split_url(url, DEFAULT_PORT)
    settings = {
        "num_envs": num_envs,
        "autoreset_mode": m.autoreset_mode(autoreset_mode).value,
        "workers": workers,
        **(world_settings or {}),
    }
    return DmEnvRpcVectorTransport(
        host,
        port,
        env_id,
        timeout=timeout,
        world_settings=settings,
        **security(url, token, ca),
        **kwargs,
    )
