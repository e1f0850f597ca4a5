"""dm_env_rpc's own compliance suite, unmodified, against ``envwire serve`` over a real port.

Each compliance base class runs twice: for CartPole (a Discrete action, a Box observation) and
for ``test/Dict-v0`` (a Box action; Dict observations of an image, a vector, a Discrete and a
Text). Every test gets a fresh connection and world.
"""

from __future__ import annotations

from typing import Any, ClassVar

import grpc
import pytest
from dm_env_rpc.v1 import compliance, connection, dm_env_rpc_pb2, tensor_utils

from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.testing import ServerProcess

_ADDRESS: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _address(grpc_server: ServerProcess) -> None:
    _ADDRESS["grpc"] = f"{grpc_server.host}:{grpc_server.ports['grpc']}"


def _settings(env_id: str) -> dict[str, Any]:
    return {"env": tensor_utils.pack_tensor(env_id)}


class _Connected:
    """A fresh channel and official ``Connection`` per test (closed by cleanups, which run
    after the compliance classes' own tearDown)."""

    env_id: ClassVar[str]
    #: Where the server of the class's module listens (its module fixture fills it in).
    addresses: ClassVar[dict[str, str]] = _ADDRESS

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        channel = grpc.insecure_channel(self.addresses["grpc"], options=CHANNEL_OPTIONS)
        self._connection = connection.Connection(channel)
        self.addCleanup(channel.close)  # type: ignore[attr-defined]
        self.addCleanup(self._connection.close)  # type: ignore[attr-defined]

    @property
    def connection(self) -> connection.Connection:
        return self._connection


class _InWorld(_Connected):
    """... plus a world for the class's env, created on that connection."""

    def setUp(self) -> None:
        super().setUp()
        response = self._connection.send(
            dm_env_rpc_pb2.CreateWorldRequest(settings=_settings(self.env_id))
        )
        self._world = response.world_name
        self.addCleanup(self._destroy)  # type: ignore[attr-defined]

    def _destroy(self) -> None:
        self._connection.send(dm_env_rpc_pb2.LeaveWorldRequest())
        self._connection.send(dm_env_rpc_pb2.DestroyWorldRequest(world_name=self._world))

    @property
    def world_name(self) -> str:
        return self._world


class _Joined(_InWorld):
    """... and joined to it."""

    def setUp(self) -> None:
        super().setUp()
        self._specs = self._connection.send(
            dm_env_rpc_pb2.JoinWorldRequest(world_name=self._world)
        ).specs

    @property
    def specs(self) -> dm_env_rpc_pb2.ActionObservationSpecs:
        return self._specs

    @property
    def required_actions(self) -> dict[int, dm_env_rpc_pb2.Tensor]:
        """Every action at its minimum (envwire needs all of an env's actions in each step)."""
        actions = {}
        for uid, spec in self._specs.actions.items():
            value = tensor_utils.unpack_proto(spec.min)[0] if spec.HasField("min") else 0
            shape = [max(n, 1) for n in spec.shape]
            actions[uid] = tensor_utils.pack_tensor(value, dtype=spec.dtype)
            actions[uid].shape[:] = shape
        return actions


class _CartPole:
    env_id = "CartPole-v1"


class _DictEnv:
    env_id = "test/Dict-v0"


class _CreateDestroy(_Connected):
    @property
    def required_world_settings(self) -> dict[str, Any]:
        return _settings(self.env_id)

    @property
    def invalid_world_settings(self) -> dict[str, Any]:
        return {
            "seed": tensor_utils.pack_tensor("not a number"),
            "players": tensor_utils.pack_tensor(-1),
            "no_such_setting": tensor_utils.pack_tensor(1),
        }

    @property
    def has_multiple_world_support(self) -> bool:
        return True


class _Reset(_InWorld):
    def join_world(self) -> dm_env_rpc_pb2.ActionObservationSpecs:
        return self._connection.send(dm_env_rpc_pb2.JoinWorldRequest(world_name=self._world)).specs


class _JoinLeave(_InWorld):
    @property
    def invalid_join_settings(self) -> dict[str, Any]:
        return {"player": tensor_utils.pack_tensor(7), "bogus": tensor_utils.pack_tensor(1)}


class TestCartPoleCreateDestroyWorld(_CartPole, _CreateDestroy, compliance.CreateDestroyWorld):
    pass


class TestCartPoleJoinLeaveWorld(_CartPole, _JoinLeave, compliance.JoinLeaveWorld):
    pass


class TestCartPoleReset(_CartPole, _Reset, compliance.Reset):
    pass


class TestCartPoleResetWorld(_CartPole, _InWorld, compliance.ResetWorld):
    pass


class TestCartPoleStep(_CartPole, _Joined, compliance.Step):
    pass


class TestDictCreateDestroyWorld(_DictEnv, _CreateDestroy, compliance.CreateDestroyWorld):
    pass


class TestDictJoinLeaveWorld(_DictEnv, _JoinLeave, compliance.JoinLeaveWorld):
    pass


class TestDictReset(_DictEnv, _Reset, compliance.Reset):
    pass


class TestDictResetWorld(_DictEnv, _InWorld, compliance.ResetWorld):
    pass


class TestDictStep(_DictEnv, _Joined, compliance.Step):
    pass
