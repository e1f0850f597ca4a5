"""Vector worlds over gRPC: N copies per message, compared with Gymnasium's SyncVectorEnv."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from dm_env_rpc.v1 import connection, error, tensor_utils
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1.extensions import properties
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

import envwire
from envwire.errors import InvalidActionError, InvalidArgumentError, StateError
from envwire.registry import parse_env_arg
from envwire.testing import ServerProcess

ENVS = ["CartPole-v1", "test/Dict-v0=envwire.testing.envs:DictEnv", "envwire/Catch-v0"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(ENVS, front_ends=("grpc",)) as running:
        yield running


def local_vector(env_id: str, n: int, mode: str = "NextStep") -> SyncVectorEnv:
    spec = next(parse_env_arg(a) for a in ENVS if parse_env_arg(a).id == env_id)
    return SyncVectorEnv([spec.make for _ in range(n)], autoreset_mode=mode)


def sample(env: VectorEnv, t: int) -> Any:
    env.action_space.seed(t)
    return env.action_space.sample()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize(
    ("env_id", "workers"), [("CartPole-v1", 1), ("CartPole-v1", 2), ("test/Dict-v0", 1)]
)
def test_batches_equal_sync_vector_env(
    server: ServerProcess, env_id: str, workers: int, mode: str
) -> None:
    n = 5
    remote = envwire.make_vec(server.url("grpc", env_id), n, autoreset_mode=mode, workers=workers)
    local = local_vector(env_id, n, mode)
    try:
        assert remote.single_action_space == local.single_action_space
        assert remote.single_observation_space == local.single_observation_space
        assert remote.action_space == local.action_space
        assert remote.observation_space == local.observation_space
        assert remote.metadata["autoreset_mode"] == AutoresetMode(mode)
        got, want = remote.reset(seed=11), local.reset(seed=11)
        assert data_equivalence(got, want, exact=True)
        ended = np.zeros(n, bool)
        for t in range(60):
            batch = sample(local, t)
            got, want = remote.step(batch), local.step(batch)
            # observations, rewards, terminations, truncations and vector infos
            assert data_equivalence(got, want, exact=True), f"step {t}"
            assert got[0] in remote.observation_space
            ended |= got[2] | got[3]
            if mode == "Disabled" and ended.any():
                break
        if env_id == "CartPole-v1":
            assert ended.any(), "an episode should have ended"
    finally:
        remote.close()
        local.close()


def test_disabled_mode_resets_the_copies_a_mask_names(server: ServerProcess) -> None:
    n = 4
    remote = envwire.make_vec(server.url("grpc", "CartPole-v1"), n, autoreset_mode="Disabled")
    local = local_vector("CartPole-v1", n, "Disabled")
    try:
        assert data_equivalence(remote.reset(seed=3), local.reset(seed=3), exact=True)
        masked = 0
        for t in range(120):
            batch = sample(local, t)
            got, want = remote.step(batch), local.step(batch)
            assert data_equivalence(got, want, exact=True), f"step {t}"
            ended = got[2] | got[3]
            if ended.any():
                options = {"reset_mask": ended}
                got = remote.reset(options=dict(options))
                assert data_equivalence(got, local.reset(options=dict(options)), exact=True)
                masked += 1
        assert masked >= 2
        with pytest.raises(InvalidArgumentError, match="at least one true"):
            remote.reset(options={"reset_mask": np.zeros(n, bool)})
        with pytest.raises(InvalidArgumentError, match="only reset_mask"):
            remote.reset(options={"colour": 1})
    finally:
        remote.close()
    split = envwire.make_vec(
        server.url("grpc", "CartPole-v1"), 4, autoreset_mode="Disabled", workers=2
    )
    local = local_vector("CartPole-v1", 4, "Disabled")
    try:  # a mask that spares one worker's whole slice
        mask = np.array([False, False, True, True])
        np.testing.assert_array_equal(split.reset(seed=3)[0], local.reset(seed=3)[0])
        got = split.reset(options={"reset_mask": mask})[0]
        np.testing.assert_array_equal(got, local.reset(options={"reset_mask": mask})[0])
    finally:
        split.close()
        local.close()


def test_step_async_lets_the_agent_work_meanwhile(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("grpc", "CartPole-v1"), 4)
    local = local_vector("CartPole-v1", 4)
    try:
        remote.reset(seed=0)
        local.reset(seed=0)
        for t in range(20):
            batch = np.array([(t + i) % 2 for i in range(4)])
            remote.step_async(batch)
            want = local.step(batch)  # work done while the server steps
            assert data_equivalence(remote.step_wait(), want, exact=True)
    finally:
        remote.close()


def test_bad_batches_are_answered_in_band_and_the_stream_goes_on(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("grpc", "CartPole-v1"), 3)
    local = local_vector("CartPole-v1", 3)
    try:
        with pytest.raises(StateError, match="reset first"):
            remote.step(np.zeros(3, np.int64))
        assert data_equivalence(remote.reset(seed=0), local.reset(seed=0), exact=True)
        with pytest.raises(InvalidActionError, match=r"uid 1 \('action'\): 5 at index \[2\]"):
            remote.step(np.array([0, 1, 5]))
        with pytest.raises(InvalidActionError, match=r"shape \[2\] is not the expected \[3\]"):
            remote.step(np.array([0, 1]))
        batch = np.array([0, 1, 0])
        assert data_equivalence(remote.step(batch), local.step(batch), exact=True)
    finally:
        remote.close()


def test_per_copy_seeds(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("grpc", "CartPole-v1"), 3)
    local = local_vector("CartPole-v1", 3)
    try:
        got, want = remote.reset(seed=[5, None, 0]), local.reset(seed=[5, None, 0])
        np.testing.assert_array_equal(got[0][[0, 2]], want[0][[0, 2]])
        with pytest.raises(InvalidArgumentError, match=r"has 2 seeds, but world \w+ has 3 copies"):
            remote.reset(seed=[1, 2])
    finally:
        remote.close()


def test_uint8_batches_and_constructor_arguments_on_a_catalog_env(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("grpc", "envwire/Catch-v0"), 64, autoreset_mode="SameStep")
    try:
        obs, _ = remote.reset(seed=0)
        assert obs.dtype == np.uint8 and obs.shape == (64, 10, 5, 1)
        obs, rewards, terminations, truncations, _ = remote.step(np.ones(64, np.int64))
        assert rewards.dtype == np.float64 and rewards.shape == (64,)
        assert terminations.dtype == truncations.dtype == np.bool_
    finally:
        remote.close()


# -- the wire, with the official client ----------------------------------------------------


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[connection.Connection]:
    channel = grpc.insecure_channel(f"{server.host}:{server.ports['grpc']}")
    with connection.Connection(channel) as opened:
        yield opened
    channel.close()


def test_the_official_client_sees_batched_specs_and_steps_a_vector_world(
    conn: connection.Connection,
) -> None:
    settings = {"env": "CartPole-v1", "num_envs": 3, "autoreset_mode": "SameStep", "seed": 1}
    world = conn.send(
        pb.CreateWorldRequest(
            settings={k: tensor_utils.pack_tensor(v) for k, v in settings.items()}
        )
    ).world_name
    join = {"discount": tensor_utils.pack_tensor(True)}
    specs = conn.send(pb.JoinWorldRequest(world_name=world, settings=join)).specs
    shapes = {s.name: list(s.shape) for s in specs.observations.values()}
    assert shapes == {
        "observation": [3, 4],
        "reward": [3],
        "terminated": [3],
        "truncated": [3],
        "discount": [3],
    }
    assert [(s.name, list(s.shape)) for s in specs.actions.values()] == [("action", [3])]
    uids = {s.name: uid for uid, s in specs.observations.items()}
    local = local_vector("CartPole-v1", 3, "SameStep")
    want_obs, _ = local.reset(seed=1)
    request = pb.StepRequest(requested_observations=list(uids.values()))
    first = conn.send(request)
    assert first.state == pb.RUNNING
    got = tensor_utils.unpack_tensor(first.observations[uids["observation"]])
    np.testing.assert_array_equal(got, want_obs)
    request.actions[1].CopyFrom(tensor_utils.pack_tensor(np.array([1, 0, 1])))
    for t in range(30):
        if t == 10:  # a batch of the wrong dtype is refused in-band; the stream goes on
            bad = pb.StepRequest(actions={1: tensor_utils.pack_tensor(np.zeros(3, np.float64))})
            with pytest.raises(error.DmEnvRpcError) as caught:
                conn.send(bad)
            assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
            assert "action uid 1 ('action'): expected a int64 tensor" in caught.value.message
        response = conn.send(request)
        obs, rewards, terminations, truncations, _ = local.step(np.array([1, 0, 1]))
        assert response.state == pb.RUNNING  # copies reset on their own; the batch goes on
        got = {
            name: tensor_utils.unpack_tensor(response.observations[u]) for name, u in uids.items()
        }
        np.testing.assert_array_equal(got["observation"], obs)
        np.testing.assert_array_equal(got["reward"], rewards)
        np.testing.assert_array_equal(got["terminated"], terminations)
        np.testing.assert_array_equal(got["truncated"], truncations)
        np.testing.assert_array_equal(got["discount"], np.where(terminations, 0.0, 1.0))
    props = properties.PropertiesExtension(conn)
    assert props["world.num_envs"] == 3 and props["world.autoreset_mode"] == "SameStep"
    conn.send(pb.LeaveWorldRequest())
    conn.send(pb.DestroyWorldRequest(world_name=world))


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"autoreset_mode": "SameStep"}, "'autoreset_mode' is for vector worlds: set 'num_envs'"),
        ({"workers": 2}, "'workers' is for vector worlds"),
        ({"num_envs": 2, "players": 2}, "a vector world (num_envs) has one player"),
        ({"num_envs": 2, "autoreset_mode": "Sometimes"}, "autoreset mode 'Sometimes' is not one"),
        ({"num_envs": 0}, "'num_envs' must be >= 1, got 0"),
        ({"num_envs": 10**9}, "above this server's limit of 4096 copies per world"),
        ({"num_envs": 2, "seed": np.array([1, 2, 3])}, "has 3 seeds, but world"),
        ({"seed": np.array([1, 2])}, "one seed per copy is for vector worlds"),
    ],
)
def test_bad_vector_settings_are_invalid_arguments(
    conn: connection.Connection, settings: dict[str, Any], needle: str
) -> None:
    packed = {k: tensor_utils.pack_tensor(v) for k, v in {"env": "CartPole-v1", **settings}.items()}
    with pytest.raises(error.DmEnvRpcError) as caught:
        conn.send(pb.CreateWorldRequest(settings=packed))
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert needle in caught.value.message


def test_a_reset_mask_needs_a_vector_world(conn: connection.Connection) -> None:
    settings = {"env": tensor_utils.pack_tensor("CartPole-v1")}
    world = conn.send(pb.CreateWorldRequest(settings=settings)).world_name
    conn.send(pb.JoinWorldRequest(world_name=world))
    mask = {"reset_mask": tensor_utils.pack_tensor(np.array([True]))}
    with pytest.raises(error.DmEnvRpcError) as caught:
        conn.send(pb.ResetRequest(settings=mask))
    assert "reset setting 'reset_mask' is for vector worlds" in caught.value.message
    conn.send(pb.LeaveWorldRequest())
    conn.send(pb.DestroyWorldRequest(world_name=world))


def test_make_vec_refuses_a_world_of_one_env(server: ServerProcess, conn: Any) -> None:
    settings = {"env": tensor_utils.pack_tensor("CartPole-v1")}
    world = conn.send(pb.CreateWorldRequest(settings=settings)).world_name
    with pytest.raises(InvalidArgumentError, match="has one env"):
        envwire.make_vec(server.url("grpc", "CartPole-v1"), 2, world=world)
    conn.send(pb.DestroyWorldRequest(world_name=world))
