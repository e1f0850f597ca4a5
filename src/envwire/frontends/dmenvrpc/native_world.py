"""Worlds whose env is a dm_env env: its own specs, rewards, discounts and step types.

A :class:`NativeWorld` is a :class:`~envwire.frontends.dmenvrpc.world.World` whose tensors are laid
out from the env's own dm_env specs (:class:`~envwire.protocols.dmenvrpc.dmspecs.NativeLayout`,
queried from the env's host through :meth:`Session.native_specs`) instead of its Gymnasium
spaces, so that ``DmEnvAdaptor`` sees what the env declares:

- observations and actions: the env's names (mapping keys, "."-joined), dtypes, shapes and
  bounds; actions reach the env in the structure and dtypes of its action spec;
- ``reward``: a tensor of the env's reward spec;
- ``discount`` (JoinWorld ``discount``): a tensor of the env's discount spec holding the env's
  discount (1.0 on the step that starts a sequence, which has none in dm_env);
- step types: FIRST is the Step that starts a sequence (RUNNING), MID a RUNNING step, LAST
  TERMINATED when the env's discount is 0 and INTERRUPTED when it is above 0 (a truncation),
  as the env's Gymnasium form decides (``envwire.kinds.dm_env``).

Without the ``discount`` observation, ``DmEnvAdaptor`` derives the discount from the state (0.0
for TERMINATED, 1.0 otherwise, none on FIRST steps): the env's own for every env whose discount
is 1 except at termination, dm_control's suite included. An env that emits other discounts
should be joined with ``discount``; the world logs a warning, once, when a connection without
it is about to lose one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, SupportsFloat

import numpy as np
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire.frontends.dmenvrpc.world import DISCOUNT, REWARD, Connection, World
from envwire.kinds.dm_env import DmSpecs
from envwire.protocols.dmenvrpc import WORLD_OBSERVATIONS, Leaf, Phase, write
from envwire.protocols.dmenvrpc.dmspecs import NativeLayout, native_leaf

__all__ = ["NativeWorld"]

log = logging.getLogger("envwire.grpc")

#: The discount each state gives a ``DmEnvAdaptor`` that has no ``discount`` observation.
_IMPLIED = {Phase.RUNNING: 1.0, Phase.INTERRUPTED: 1.0, Phase.TERMINATED: 0.0}
#: Where the env's Gymnasium form keeps the time step's discount (Shimmy's key).
_DISCOUNT_KEY = "timestep.discount"


class NativeWorld(World):
    """A world of one dm_env env (see the module docstring)."""

    def _lay_out(self) -> None:
        native = self.session.native_specs()
        assert isinstance(native, DmSpecs)  # the world table makes one for dm_env envs only
        self.actions = NativeLayout(native.action, "action")
        self.observations = NativeLayout(
            native.observation, "observation", reserved=WORLD_OBSERVATIONS
        )
        uid = self.observations.next_uid
        self.extra_uids = {name: uid + i for i, name in enumerate(WORLD_OBSERVATIONS)}
        self._reward_leaf = native_leaf(native.reward, REWARD, (), uid)
        self._discount_leaf = native_leaf(native.discount, DISCOUNT, (), uid + 1)
        self._warned = False

    def _extra_specs(self, settings: Mapping[str, Any]) -> dict[str, pb.TensorSpec]:
        extras = super()._extra_specs(settings)
        extras[REWARD] = self._reward_leaf.spec()
        if DISCOUNT in extras:
            extras[DISCOUNT] = self._discount_leaf.spec()
        return extras

    def _observe(
        self,
        conn: Connection,
        out: MutableMapping[int, pb.Tensor],
        requested: list[int],
        reward: float,
        info: dict[str, Any],
    ) -> None:
        if self.extra_uids[DISCOUNT] not in conn.uids:
            self._check_implied(conn, info.get(_DISCOUNT_KEY))
        super()._observe(conn, out, requested, reward, info)

    def _put_reward(self, out: pb.Tensor, reward: float) -> None:
        _put(out, self._reward_leaf, reward)

    def _put_discount(self, out: pb.Tensor, conn: Connection, info: Mapping[str, Any]) -> None:
        discount = info.get(_DISCOUNT_KEY)
        _put(out, self._discount_leaf, 1.0 if discount is None else discount)

    def _check_implied(self, conn: Connection, discount: SupportsFloat | None) -> None:
        """Warn once when the state cannot carry the env's discount to ``conn``."""
        implied = _IMPLIED.get(conn.phase)
        if self._warned or discount is None or implied is None or discount == implied:
            return
        self._warned = True
        log.warning(
            "world %s (%s): the env's discount %r reaches a DmEnvAdaptor as %r, derived from "
            "the state; join with the setting discount=True to receive the env's discounts",
            self.name,
            self.session.env_id,
            float(discount),
            implied,
        )


def _put(out: pb.Tensor, leaf: Leaf, value: SupportsFloat) -> None:
    """Write one value as a tensor of ``leaf``'s spec."""
    out.shape.extend(leaf.shape)
    write(out, np.broadcast_to(np.asarray(value, leaf.row.numpy), leaf.shape), leaf.row)
