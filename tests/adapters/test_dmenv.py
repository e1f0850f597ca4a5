"""DmEnvAdaptor (dm_env_rpc's official dm_env client) and envwire's RemoteDmEnv against the
gRPC front end: episodes equal the local env's, and dm_env's own test mixin passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import dm_env
import grpc
import gymnasium
import numpy as np
import pytest
from absl.testing import absltest
from dm_env import test_utils
from dm_env_rpc.v1 import connection, dm_env_adaptor, dm_env_flatten_utils

from envwire.adapters.dmenv import RemoteDmEnv, make_dm_env
from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.protocols.dmenvrpc import Layout
from envwire.registry import parse_env_arg
from envwire.testing import ServerProcess
from tests.frontends.dmenvrpc.conftest import ENVS

_ADDRESS: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _address(grpc_server: ServerProcess) -> None:
    _ADDRESS["grpc"] = f"{grpc_server.host}:{grpc_server.ports['grpc']}"


def local_env(env_id: str) -> gymnasium.Env[Any, Any]:
    spec = next(parse_env_arg(arg) for arg in ENVS if parse_env_arg(arg).id == env_id)
    return spec.make()


@pytest.fixture
def official(channel: grpc.Channel) -> Iterator[connection.Connection]:
    with connection.Connection(channel) as opened:
        yield opened


def flat_names(layout: Layout, sample: Any) -> dict[str, Any]:
    """A local sample as the adaptor's flat names see it (dtypes widened as they travel)."""
    return {leaf.name: leaf.to_array(leaf.value_of(sample)) for leaf in layout.leaves}


def assert_same(expected: dict[str, Any], got: dict[str, Any], where: str) -> None:
    assert set(got) == set(expected), where
    for name, value in expected.items():
        actual = np.asarray(got[name])
        if value.dtype == object:
            assert actual.tolist() == value.tolist(), f"{where}: {name}"
        else:
            assert actual.dtype == value.dtype, f"{where}: {name} dtype"
            np.testing.assert_array_equal(actual, value, err_msg=f"{where}: {name}")


@pytest.mark.parametrize(
    "env_id", ["CartPole-v1", "envwire/Catch-v0", "test/Dict-v0", "test/Tuple-v0"]
)
def test_adaptor_episodes_equal_the_local_env(official: connection.Connection, env_id: str) -> None:
    seed = 7
    env, world = dm_env_adaptor.create_and_join_world(official, {"env": env_id, "seed": seed}, {})
    local = local_env(env_id)
    local.action_space.seed(seed)
    observations = Layout(local.observation_space, "observation", reserved=("reward", "discount"))
    actions = Layout(local.action_space, "action")
    try:
        for episode in range(2):
            obs, _ = local.reset(seed=seed if episode == 0 else None)
            step = env.reset()
            assert step.first() and step.reward is None and step.discount is None
            where = f"{env_id} episode {episode}"
            assert_same(flat_names(observations, obs), _flat(step.observation), f"{where} reset")
            for t in range(600):
                action = local.action_space.sample()
                obs, reward, terminated, truncated, _ = local.step(action)
                step = env.step(_nested(actions, action))
                assert_same(flat_names(observations, obs), _flat(step.observation), f"{where} {t}")
                assert step.reward == reward
                if terminated or truncated:
                    assert step.last()
                    assert step.discount == (0.0 if terminated else 1.0)
                    break
                assert step.mid() and step.discount == 1.0
            else:
                raise AssertionError(f"{where} did not end")
    finally:
        env.close()
        official.send(dm_env_adaptor.dm_env_rpc_pb2.DestroyWorldRequest(world_name=world))
        local.close()


def _flat(observation: Any) -> dict[str, Any]:
    return dm_env_flatten_utils.flatten_dict(observation, ".")


def _nested(layout: Layout, action: Any) -> dict[str, Any]:
    flat = {leaf.name: leaf.to_array(leaf.value_of(action)) for leaf in layout.leaves}
    return dm_env_flatten_utils.unflatten_dict(flat, ".")


class _AdaptorMixin(test_utils.EnvironmentTestMixin):
    env_id: ClassVar[str]

    def make_object_under_test(self) -> dm_env.Environment:
        channel = grpc.insecure_channel(_ADDRESS["grpc"], options=CHANNEL_OPTIONS)
        official = connection.Connection(channel)
        env, world = dm_env_adaptor.create_and_join_world(official, {"env": self.env_id}, {})
        destroy = dm_env_adaptor.dm_env_rpc_pb2.DestroyWorldRequest(world_name=world)
        self.addCleanup(channel.close)
        self.addCleanup(official.close)
        self.addCleanup(official.send, destroy)
        return env


class TestCartPoleAdaptor(_AdaptorMixin, absltest.TestCase):
    env_id = "CartPole-v1"


class TestDictAdaptor(_AdaptorMixin, absltest.TestCase):
    env_id = "test/Dict-v0"


class TestTupleAdaptor(_AdaptorMixin, absltest.TestCase):
    env_id = "test/Tuple-v0"


class _RemoteDmEnvMixin(test_utils.EnvironmentTestMixin):
    env_id: ClassVar[str]

    def make_object_under_test(self) -> dm_env.Environment:
        return make_dm_env(f"grpc://{_ADDRESS['grpc']}/{self.env_id}", seed=0)


class TestCartPoleRemoteDmEnv(_RemoteDmEnvMixin, absltest.TestCase):
    env_id = "CartPole-v1"


class TestDictRemoteDmEnv(_RemoteDmEnvMixin, absltest.TestCase):
    env_id = "test/Dict-v0"


def test_remote_dm_env_episodes_equal_the_local_env(grpc_server: ServerProcess) -> None:
    env = make_dm_env(grpc_server.url("grpc", "test/Tuple-v0"), seed=3)
    assert isinstance(env, RemoteDmEnv)
    local = local_env("test/Tuple-v0")
    local.action_space.seed(3)
    try:
        obs, _ = local.reset(seed=3)
        step = env.reset()
        assert step.first()
        assert isinstance(step.observation, tuple)
        np.testing.assert_array_equal(step.observation[1], obs[1])
        while True:
            action = local.action_space.sample()
            obs, reward, terminated, truncated, _ = local.step(action)
            step = env.step(action)
            assert int(step.observation[0]) == int(obs[0])
            np.testing.assert_array_equal(step.observation[1], obs[1])
            assert step.reward == reward
            if terminated or truncated:
                assert step.last() and step.discount == 0.0
                break
        assert env.step(action).first()  # a step after LAST starts the next episode
    finally:
        env.close()
        local.close()
