"""A remote vector env: N env copies on a server, as a ``gymnasium.vector.VectorEnv``."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire.client.transport import Transport
from envwire.errors import ProtocolError, StateError

__all__ = ["RemoteVectorEnv"]


class RemoteVectorEnv(VectorEnv[Any, Any, Any]):
    """``num_envs`` copies of an env stepped together on the server, one message each way.

    Semantics are Gymnasium's ``SyncVectorEnv`` with the chosen autoreset mode: the same seeds
    and actions give the same batches. ``step_async``/``step_wait`` let the agent compute while
    the server steps.
    """

    def __init__(
        self, transport: Transport, num_envs: int, autoreset_mode: str, url: str = ""
    ) -> None:
        self.transport = transport
        self.url = url
        self.num_envs = num_envs
        self.single_action_space = transport.action_space
        self.single_observation_space = transport.observation_space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode(autoreset_mode)}
        # Gymnasium's own vector envs expose it as an attribute too (TorchRL reads that)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self._waiting = False
        self._closed = False
        # A transport's own vector step (gym-socket's lean one) where it has one
        self._send_step = getattr(transport, "send_vector_step", None)
        self._receive_step = getattr(transport, "receive_vector_step", None)
        self._receive_split = getattr(transport, "receive_vector_split", None)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every copy (copy ``i`` gets ``seed + i`` for an int seed)."""
        if self._waiting:
            raise StateError("reset while a step_async is waiting: call step_wait first")
        if seed is not None and not isinstance(seed, int):
            seed = [None if s is None else int(s) for s in seed]
        reply = self.transport.request(m.Reset(seed=seed, options=options))
        if not isinstance(reply, m.ResetReply):
            raise ProtocolError(f"reset answered with {type(reply).__name__}")
        if seed is not None:
            self._np_random_seed = seed if isinstance(seed, int) else -1
        return reply.observation, reply.info

    def step_async(self, actions: object) -> None:
        """Send the actions; the server steps while the caller goes on."""
        if self._waiting:
            raise StateError("step_async twice without step_wait")
        if self._send_step is not None:
            self._send_step(actions)
        else:
            self.transport.send(m.Step(actions))
        self._waiting = True

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The batch the last :meth:`step_async` produced."""
        if not self._waiting:
            raise StateError("step_wait without step_async")
        self._waiting = False
        if self._receive_step is not None:
            return self._receive_step()  # type: ignore[no-any-return]
        reply = self.transport.receive()
        if not isinstance(reply, m.VectorStepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        return (
            reply.observations,
            reply.rewards,
            reply.terminations,
            reply.truncations,
            reply.infos,
        )

    def step_wait_finals(
        self,
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray | None]:
        """:meth:`step_wait`'s batch, and the final observations kept apart where the
        transport can (gym-socket's usual SameStep reply): then the info is ``{}`` and the
        last item the batch of the final observations of the copies whose episodes ended, in
        copy order (their final infos all empty); else the info is :meth:`step_wait`'s and
        the last item None."""
        if self._receive_split is None:
            return (*self.step_wait(), None)
        if not self._waiting:
            raise StateError("step_wait without step_async")
        self._waiting = False
        return self._receive_split()  # type: ignore[no-any-return]

    def step_finals(
        self, actions: object
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray | None]:
        """:meth:`step_async`, then :meth:`step_wait_finals`: in one call where the transport
        has its own vector step (gym-socket's lean one)."""
        if self._waiting:
            raise StateError("step while a step_async is waiting: call step_wait first")
        if self._send_step is None or self._receive_split is None:
            self.step_async(actions)
            return self.step_wait_finals()
        self._send_step(actions)
        return self._receive_split()  # type: ignore[no-any-return]

    def step(
        self, actions: object
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every copy once: :meth:`step_async`, then :meth:`step_wait`, in one call
        where the transport has its own vector step (gym-socket's lean one)."""
        if self._waiting:
            raise StateError("step while a step_async is waiting: call step_wait first")
        send, receive = self._send_step, self._receive_step
        if send is None or receive is None:
            self.step_async(actions)
            return self.step_wait()
        send(actions)
        return receive()  # type: ignore[no-any-return]

    def close_extras(self, **kwargs: object) -> None:
        if not self._closed:
            self._closed = True
            self.transport.close()

    def __repr__(self) -> str:
        return f"RemoteVectorEnv({self.url!r}, num_envs={self.num_envs})"
