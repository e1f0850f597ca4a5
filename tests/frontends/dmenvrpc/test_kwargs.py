"""CreateWorld ``kwargs``: constructor arguments a client may set, when the operator allows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from dm_env_rpc.v1 import connection, dm_env_adaptor, error, tensor_utils
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1.extensions import properties

import envwire
from envwire.errors import InvalidArgumentError
from envwire.testing import ServerProcess

CONFIG = """
[[env]]
id = "test/Catch-v0"
entry_point = "envwire.envs.catch:CatchEnv"
kwargs = { columns = 3 }
client_kwargs = ["rows", "scale"]

[[env]]
id = "CartPole-v1"
entry_point = "gym:CartPole-v1"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    path = Path(tmp_path_factory.mktemp("config")) / "envwire.toml"
    path.write_text(CONFIG)
    with ServerProcess([], ["--config", str(path)], front_ends=("grpc",)) as running:
        yield running


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[connection.Connection]:
    channel = grpc.insecure_channel(f"{server.host}:{server.ports['grpc']}")
    with connection.Connection(channel) as opened:
        yield opened
    channel.close()


def create(conn: connection.Connection, **settings: Any) -> str:
    packed = {name: tensor_utils.pack_tensor(value) for name, value in settings.items()}
    return str(conn.send(pb.CreateWorldRequest(settings=packed)).world_name)


def observation_shape(conn: connection.Connection, world: str) -> list[int]:
    specs = conn.send(pb.JoinWorldRequest(world_name=world)).specs
    shape = list(specs.observations[1].shape)
    conn.send(pb.LeaveWorldRequest())
    conn.send(pb.DestroyWorldRequest(world_name=world))
    return shape


def test_kwargs_as_a_json_object_or_one_setting_each(conn: connection.Connection) -> None:
    world = create(conn, env="test/Catch-v0", kwargs=json.dumps({"rows": 4}))
    assert observation_shape(conn, world) == [4, 3, 1]  # columns = 3 from the config
    world = create(conn, **{"env": "test/Catch-v0", "kwargs.rows": 6, "kwargs.scale": 2})
    conn.send(pb.JoinWorldRequest(world_name=world))
    props = properties.PropertiesExtension(conn)
    assert json.loads(props["env.kwargs"]) == {"rows": 6, "scale": 2}
    conn.send(pb.LeaveWorldRequest())
    conn.send(pb.DestroyWorldRequest(world_name=world))


def test_the_official_adaptor_flattens_nested_kwargs_into_dotted_settings(
    conn: connection.Connection,
) -> None:
    settings = {"env": "test/Catch-v0", "kwargs": {"rows": 3, "scale": 1}}
    env, world = dm_env_adaptor.create_and_join_world(conn, settings, {})
    assert env.observation_spec()["observation"].shape == (3, 3, 1)
    assert env.reset().observation["observation"].shape == (3, 3, 1)
    env.close()  # leaves the world
    conn.send(pb.DestroyWorldRequest(world_name=world))


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"env": "test/Catch-v0", "kwargs.columns": 9}, "clients may not set ['columns']"),
        ({"env": "CartPole-v1", "kwargs": '{"gravity": 1}'}, "clients may not set ['gravity']"),
        ({"env": "test/Catch-v0", "kwargs": "[4]"}, "'kwargs' must be a JSON object"),
    ],
)
def test_refused_kwargs_are_invalid_arguments_naming_them(
    conn: connection.Connection, settings: dict[str, Any], needle: str
) -> None:
    with pytest.raises(error.DmEnvRpcError) as caught:
        create(conn, **settings)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert needle in caught.value.message
    world = create(conn, env="test/Catch-v0")  # the stream goes on
    assert observation_shape(conn, world) == [10, 3, 1]


def test_our_clients_pass_kwargs_as_a_dict(server: ServerProcess) -> None:
    url = server.url("grpc", "test/Catch-v0")
    env = envwire.make(url, world_settings={"kwargs": {"rows": 5}})
    try:
        assert env.observation_space.shape == (5, 3, 1)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (5, 3, 1)
    finally:
        env.close()
    vector = envwire.make_vec(url, 8, world_settings={"kwargs": {"rows": 3}})
    try:
        obs, _ = vector.reset(seed=0)
        assert obs.shape == (8, 3, 3, 1) and obs.dtype == np.uint8
    finally:
        vector.close()
    with pytest.raises(InvalidArgumentError, match=r"clients may not set \['columns'\]"):
        envwire.make(url, world_settings={"kwargs": {"columns": 2}})


def test_a_tiny_argument_with_a_huge_shape_is_refused_in_band(conn: connection.Connection) -> None:
    """Eight bytes of payload shaped [2**31 - 1, 0] would be two billion empty lists as a
    Python value: refused before anything is built, and the stream goes on."""
    huge = pb.Tensor(shape=[2**31 - 1, 0])
    huge.int64s.array.append(1)
    settings = {"env": tensor_utils.pack_tensor("test/Catch-v0"), "kwargs.rows": huge}
    with pytest.raises(error.DmEnvRpcError, match="more than 65536 elements"):
        conn.send(pb.CreateWorldRequest(settings=settings))
    assert create(conn, env="test/Catch-v0", **{"kwargs.rows": 4})
