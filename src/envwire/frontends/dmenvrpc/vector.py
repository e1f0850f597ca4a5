"""Vector worlds for the dm_env_rpc front end: N copies of an env stepped together.

A CreateWorld with the setting ``num_envs`` = N (and optionally ``autoreset_mode`` and
``workers``) makes a :class:`VectorWorld`: its session is an envwire vector session, Gymnasium's
``SyncVectorEnv`` of N copies (split over ``workers`` processes), so seeding, autoreset modes
and infos are Gymnasium's. Every tensor has a leading dimension N:

- actions: one tensor per action leaf, ``[N, *leaf shape]``, all N copies in one StepRequest;
- observations: one tensor per observation leaf, ``[N, *leaf shape]``, plus ``reward``
  (DOUBLE ``[N]``), ``terminated`` and ``truncated`` (BOOL ``[N]``); on request, ``discount``
  (DOUBLE ``[N]``: 0.0 where the copy terminated) and ``envwire.info`` (Gymnasium's vector
  info dict as typed JSON, one string for all copies).

The sequence is the batch's, not a copy's: the Step that starts it resets every copy (with the
pending seed, an integer or one per copy) and answers the first batch; later Steps answer
RUNNING, copies that end reset themselves by the autoreset mode, and Reset or ResetWorld end the
sequence (INTERRUPTED). A Reset with ``reset_mask`` (BOOL ``[N]``) resets only those copies at
the next Step, as Gymnasium's ``reset(options={"reset_mask": ...})`` does; in ``Disabled`` mode
that is how ended copies start again.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire import jsonio
from envwire import messages as m
from envwire.errors import InvalidArgumentError
from envwire.frontends.dmenvrpc.world import Connection, World
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import VECTOR_OBSERVATIONS, Layout, Phase

__all__ = ["VectorWorld"]

#: Observation names a vector world adds (in this UID order) after the env's own.
REWARD, TERMINATED, TRUNCATED, DISCOUNT, INFO = VECTOR_OBSERVATIONS

_ROWS = {REWARD: dmenvrpc.DOUBLE, TERMINATED: dmenvrpc.BOOL, TRUNCATED: dmenvrpc.BOOL}


class VectorWorld(World):
    """A world of ``num_envs`` copies stepped together by its one player (see the module
    docstring)."""

    def _lay_out(self) -> None:
        session = self.session
        self.num_envs: int = session.num_envs
        self.actions = Layout(session.action_space, "action", batch=self.num_envs)
        self.observations = Layout(
            session.observation_space,
            "observation",
            reserved=VECTOR_OBSERVATIONS,
            batch=self.num_envs,
        )
        uid = self.observations.next_uid
        self.extra_uids = {name: uid + i for i, name in enumerate(VECTOR_OBSERVATIONS)}
        self._names = {uid: name for name, uid in self.extra_uids.items()}
        self._blank()

    def _blank(self) -> None:
        n = self.num_envs
        self.outcome_arrays: dict[str, Any] = {
            REWARD: np.zeros(n),
            TERMINATED: np.zeros(n, bool),
            TRUNCATED: np.zeros(n, bool),
        }

    def _hold(self, settings: Mapping[str, Any], request: str) -> None:
        seed = settings.get("seed")
        if isinstance(seed, list) and len(seed) != self.num_envs:
            raise InvalidArgumentError(
                f"{request} setting 'seed' has {len(seed)} seeds, but world {self.name} has "
                f"{self.num_envs} copies (one seed each, -1 = unseeded)"
            )
        mask = settings.get("reset_mask")
        if mask is not None and (mask.shape != (self.num_envs,) or not mask.any()):
            raise InvalidArgumentError(
                f"{request} setting 'reset_mask' must be bool [{self.num_envs}] with at "
                f"least one true, got {mask.astype(int).tolist()}"
            )
        if "seed" in settings:
            self.pending_seed = seed
        self.pending_options = None if mask is None else {"reset_mask": mask}

    def _extra_specs(self, settings: Mapping[str, Any]) -> dict[str, pb.TensorSpec]:
        names = [REWARD, TERMINATED, TRUNCATED]
        if settings.get("discount"):
            names.append(DISCOUNT)
        extras: dict[str, pb.TensorSpec] = {}
        for name in names:
            spec = pb.TensorSpec(name=name, dtype=_ROWS.get(name, dmenvrpc.DOUBLE).enum)
            spec.shape.append(self.num_envs)
            extras[name] = spec
        if DISCOUNT in extras:
            extras[DISCOUNT].min.doubles.array.append(0.0)
            extras[DISCOUNT].max.doubles.array.append(1.0)
        if settings.get("envwire.extras"):
            extras[INFO] = pb.TensorSpec(name=INFO, dtype=pb.STRING)
        return extras

    def _act(self, conn: Connection, actions: Mapping[int, pb.Tensor]) -> Phase:
        reply = self._env_step(conn, self.actions.read(actions, "action"))
        assert isinstance(reply, m.VectorStepReply)
        self.obs, self.info = reply.observations, reply.infos
        self.outcome_arrays = {
            REWARD: reply.rewards,
            TERMINATED: reply.terminations,
            TRUNCATED: reply.truncations,
        }
        return Phase.RUNNING  # copies end and reset on their own; the batch goes on

    def _start_episode(self) -> None:
        super()._start_episode()
        self._blank()

    def _observe(
        self,
        conn: Connection,
        out: MutableMapping[int, pb.Tensor],
        requested: list[int],
        reward: float,
        info: dict[str, Any],
    ) -> None:
        self.observations.write(conn.last_obs, out, requested)
        arrays = self.outcome_arrays
        for uid in requested:
            name = self._names.get(uid)
            if name is None:
                continue
            tensor = out[uid]
            if name == INFO:
                tensor.strings.array.append(jsonio.dumps_info(info, typed=True).decode())
                continue
            if name == DISCOUNT:
                row, value = dmenvrpc.DOUBLE, np.where(arrays[TERMINATED], 0.0, 1.0)
            else:
                row, value = _ROWS[name], arrays[name]
            tensor.shape.append(self.num_envs)
            dmenvrpc.write(tensor, np.asarray(value, row.numpy), row)
