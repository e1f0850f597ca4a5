"""A remote env as a ``dm_env.Environment``, over any envwire client transport.

:class:`RemoteDmEnv` keeps the shape of the Gymnasium spaces (a Box env's observation is one
array, a Dict env's a dict, a Tuple's a tuple) and gives each leaf a ``dm_env`` spec: Box,
MultiBinary and MultiDiscrete are ``BoundedArray`` (``Array`` for bool boxes), Discrete is a
``DiscreteArray`` when it starts at 0 (else a scalar ``BoundedArray``), in the dtype the leaf
travels as over dm_env_rpc (float16/int16/uint16 widened); Text is a ``StringArray``; anything
else (Sequence, Graph, OneOf, typed models) is a ``StringArray`` holding the sample's JSON.

Time steps follow dm_env: ``reset`` gives FIRST (no reward, no discount); a step that ends the
episode gives LAST with discount 0.0 when it terminated and 1.0 when it was truncated; a step on
a fresh environment or after LAST resets and ignores its action.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import dm_env
import numpy as np
from dm_env import specs

from envwire import messages as m
from envwire import spacecodec
from envwire.adapters.connect import make
from envwire.adapters.gymenv import RemoteEnv
from envwire.client.transport import Transport
from envwire.errors import ProtocolError, UnsupportedError
from envwire.protocols.dmenvrpc import Array, Layout, Leaf

__all__ = ["RemoteDmEnv", "leaf_spec", "make_dm_env"]


def leaf_spec(leaf: Leaf) -> specs.Array:
    """The ``dm_env`` spec of one leaf (see the module docstring)."""
    if leaf.kind in ("array", "scalar") and leaf.row.numpy is not None:
        dtype = leaf.row.numpy
        if leaf.low is None or leaf.high is None:
            return specs.Array(leaf.shape, dtype, name=leaf.name)
        if leaf.kind == "scalar" and leaf.low.item() == 0:
            return specs.DiscreteArray(int(leaf.high.item()) + 1, dtype, name=leaf.name)
        return specs.BoundedArray(leaf.shape, dtype, leaf.low, leaf.high, name=leaf.name)
    return specs.StringArray((), name=leaf.name)


class RemoteDmEnv(dm_env.Environment):  # type: ignore[misc]  # dm_env ships no types
    """A remote env as a ``dm_env.Environment``.

    Args:
        transport: any envwire client transport (``DmEnvRpcTransport``,
            ``GymSocketTransport``, ...), already connected.
        seed: the seed of the first episode (later episodes continue its random stream, as
            Gymnasium's ``reset()`` does).
    """

    def __init__(self, transport: Transport, *, seed: int | None = None) -> None:
        self.transport = transport
        self._seed = seed
        self._actions = Layout(transport.action_space, "action")
        self._observations = Layout(transport.observation_space, "observation")
        self._action_spec = self._nest(self._actions, leaf_spec)
        self._observation_spec = self._nest(self._observations, leaf_spec)
        self._needs_reset = True

    @staticmethod
    def _nest(layout: Layout, value_of: Callable[[Leaf], object]) -> object:
        """The space's nest (a value, or dicts and tuples of them) of each leaf's value."""
        return layout.compose({leaf.uid: value_of(leaf) for leaf in layout.leaves})

    def reset(self) -> dm_env.TimeStep:
        """Start an episode: a FIRST step."""
        seed, self._seed = self._seed, None
        reply = self.transport.request(m.Reset(seed=seed))
        if not isinstance(reply, m.ResetReply):
            raise ProtocolError(f"reset answered with {type(reply).__name__}")
        self._needs_reset = False
        return dm_env.restart(self._convert(reply.observation))

    def step(self, action: object) -> dm_env.TimeStep:
        """Take one step (or reset, on a fresh env or after LAST, ignoring ``action``)."""
        if self._needs_reset:
            return self.reset()
        reply = self.transport.request(m.Step(self._action(action)))
        if not isinstance(reply, m.StepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        observation = self._convert(reply.observation)
        if reply.terminated:
            self._needs_reset = True
            return dm_env.termination(reply.reward, observation)
        if reply.truncated:
            self._needs_reset = True
            return dm_env.truncation(reply.reward, observation)
        return dm_env.transition(reply.reward, observation)

    def _convert(self, observation: object) -> object:
        return self._nest(self._observations, lambda leaf: _to_dm(leaf, leaf.value_of(observation)))

    def _action(self, action: object) -> object:
        values = {leaf.uid: _from_dm(leaf, leaf.value_of(action)) for leaf in self._actions.leaves}
        return self._actions.compose(values)

    # The specs' nest is the env's: Any, as dm_env's own signatures (it ships no types).

    def action_spec(self) -> Any:
        return self._action_spec

    def observation_spec(self) -> Any:
        return self._observation_spec

    def close(self) -> None:
        self.transport.close()


def _to_dm(leaf: Leaf, value: object) -> Array:
    if leaf.kind == "sequence":
        return np.array(json.dumps(spacecodec.to_json(leaf.space, value, arrays="base64")), object)
    return leaf.to_array(value)


def _from_dm(leaf: Leaf, value: object) -> object:
    if leaf.kind == "sequence":
        return spacecodec.from_json(leaf.space, json.loads(str(value)))
    if leaf.row.numpy is not None and leaf.kind in ("array", "scalar"):
        array = np.broadcast_to(np.asarray(value, leaf.row.numpy), leaf.shape).copy()
        return leaf.from_array(array)
    return leaf.from_array(np.array(str(value), dtype=object))


def make_dm_env(url: str, *, seed: int | None = None, **kwargs: object) -> RemoteDmEnv:
    """Connect to a served env by URL (any scheme :func:`envwire.make` knows) and return it
    as a ``dm_env.Environment``; keyword arguments go to the scheme's transport."""
    remote = make(url, **kwargs)
    if not isinstance(remote, RemoteEnv):
        remote.close()
        raise UnsupportedError(f"{url!r} serves a typed env: a dm_env.Environment needs tensors")
    return RemoteDmEnv(remote.transport, seed=seed)
