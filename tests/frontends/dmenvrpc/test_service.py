"""The gRPC front end end to end: pipelining, garbage, properties, worlds and their players."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator
from typing import Any

import grpc
import gymnasium
import numpy as np
import pytest
from dm_env_rpc.v1 import connection, error, tensor_utils
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1.extensions import properties
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envwire
from envwire import messages as m
from envwire import spacecodec
from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS, DmEnvRpcTransport
from envwire.errors import InvalidActionError, TransportError
from envwire.frontends.dmenvrpc import SERVICE
from envwire.testing import ServerProcess

from .conftest import ENVS


class RawStream:
    """One ``Process`` stream that sends raw bytes and reads responses in order."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        call = channel.stream_stream(
            f"/{SERVICE}/Process",
            request_serializer=None,
            response_deserializer=pb.EnvironmentResponse.FromString,
        )
        self._replies = call(iter(self._outbox.get, None))

    def send(self, request: Any) -> None:
        self._outbox.put(request if isinstance(request, bytes) else request.SerializeToString())

    def receive(self) -> Any:
        return next(self._replies)

    def request(self, request: Any) -> Any:
        self.send(request)
        return self.receive()

    def close(self) -> None:
        self._outbox.put(None)


@pytest.fixture
def stream(channel: grpc.Channel) -> Iterator[RawStream]:
    opened = RawStream(channel)
    yield opened
    opened.close()


def create(stream: RawStream, env_id: str, **settings: Any) -> str:
    request = pb.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor(env_id)})
    for name, value in settings.items():
        request.settings[name].CopyFrom(tensor_utils.pack_tensor(value))
    response = stream.request(pb.EnvironmentRequest(create_world=request))
    assert response.WhichOneof("payload") == "create_world", response
    return str(response.create_world.world_name)


def step_request(action: Any = None, uids: tuple[int, ...] = (1, 2)) -> Any:
    request = pb.EnvironmentRequest(step=pb.StepRequest(requested_observations=uids))
    if action is not None:
        request.step.actions[1].CopyFrom(tensor_utils.pack_tensor(action, dtype=np.int64))
    return request


# -- pipelining -----------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(stream: RawStream) -> None:
    world = create(stream, "CartPole-v1", seed=0)
    batch = [
        pb.EnvironmentRequest(join_world=pb.JoinWorldRequest(world_name=world)),
        step_request(),  # starts the sequence
        step_request(1),
        step_request(5),  # out of range: an error in the middle of the pipeline
        step_request(0),
        pb.EnvironmentRequest(reset=pb.ResetRequest()),
        step_request(),
        pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()),
        pb.EnvironmentRequest(destroy_world=pb.DestroyWorldRequest(world_name=world)),
    ]
    for request in batch:
        stream.send(request)
    responses = [stream.receive() for _ in batch]
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds == [
        "join_world",
        "step",
        "step",
        "error",
        "step",
        "reset",
        "step",
        "leave_world",
        "destroy_world",
    ]
    assert "action uid 1" in responses[3].error.message
    local = gymnasium.make("CartPole-v1")
    obs = [local.reset(seed=0)[0], local.step(1)[0], local.step(0)[0], local.reset()[0]]
    got = [tensor_utils.unpack_tensor(responses[i].step.observations[1]) for i in (1, 2, 4, 6)]
    for expected, actual in zip(obs, got, strict=True):
        np.testing.assert_array_equal(actual, expected)


def test_our_client_pipelines_steps(grpc_server: ServerProcess) -> None:
    env = envwire.make(grpc_server.url("grpc", "CartPole-v1"))
    local = gymnasium.make("CartPole-v1")
    try:
        env.reset(seed=4)
        local.reset(seed=4)
        actions = [0, 1, 7, 1, 0]  # 7 is refused; the steps after it go on
        for action in actions:
            env.unwrapped.step_async(action)
        for action in actions:
            if action == 7:
                with pytest.raises(InvalidActionError, match="not in range"):
                    env.unwrapped.step_wait()
                continue
            got = env.unwrapped.step_wait()
            expected = local.step(action)
            np.testing.assert_array_equal(got[0], expected[0])
            assert got[1:4] == expected[1:4]
    finally:
        env.close()


# -- garbage ---------------------------------------------------------------------------------

_PAYLOADS = [
    "create_world",
    "join_world",
    "step",
    "reset",
    "reset_world",
    "leave_world",
    "destroy_world",
    "extension",
]
_TENSORS = st.one_of(
    st.builds(tensor_utils.pack_tensor, st.integers(-(2**63), 2**63 - 1)),
    st.builds(tensor_utils.pack_tensor, st.floats(allow_nan=True)),
    st.builds(tensor_utils.pack_tensor, st.text(max_size=12)),
    st.builds(
        lambda shape: pb.Tensor(shape=shape), st.lists(st.integers(-3, 2**31 - 1), max_size=4)
    ),
    st.builds(
        lambda n, shape: pb.Tensor(doubles=pb.Tensor.DoubleArray(array=[1.0] * n), shape=shape),
        st.integers(0, 9),
        st.lists(st.integers(-2, 9), max_size=4),
    ),
)
_NAMES = st.sampled_from(
    [
        "env",
        "seed",
        "players",
        "player",
        "discount",
        "x",
        "",
        "envwire.extras",
        "kwargs",
        "kwargs.x",
        "kwargs.",
        "num_envs",
        "autoreset_mode",
        "workers",
        "reset_mask",
    ]
)


@st.composite
def garbage_requests(draw: st.DrawFn) -> Any:
    request = pb.EnvironmentRequest()
    field = draw(st.sampled_from(_PAYLOADS))
    payload = getattr(request, field)
    payload.SetInParent()
    for name in ("world_name",):
        if hasattr(payload, name):
            setattr(payload, name, draw(st.sampled_from(["", "nope", "x" * 50])))
    if hasattr(payload, "settings"):
        for key in draw(st.lists(_NAMES, max_size=3)):
            payload.settings[key].CopyFrom(draw(_TENSORS))
    if field == "step":
        for uid in draw(st.lists(st.integers(0, 2**64 - 1), max_size=3)):
            payload.actions[uid].CopyFrom(draw(_TENSORS))
        payload.requested_observations.extend(draw(st.lists(st.integers(0, 2**64 - 1), max_size=3)))
    if field == "extension":
        payload.type_url = draw(st.text(max_size=20))
        payload.value = draw(st.binary(max_size=30))
    return request


def assert_alive(stream: RawStream) -> None:
    """The stream still answers a well-formed request."""
    response = stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))
    assert response.WhichOneof("payload") == "leave_world", response


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=200))
def test_garbage_bytes_get_status_errors(stream: RawStream, data: bytes) -> None:
    response = stream.request(data)
    assert response.WhichOneof("payload") is not None
    if response.WhichOneof("payload") == "error":
        assert response.error.code != 0 and response.error.message
    assert_alive(stream)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=garbage_requests())
def test_garbage_requests_get_status_errors(stream: RawStream, request: Any) -> None:
    response = stream.request(request)
    kind = response.WhichOneof("payload")
    assert kind in ("error", request.WhichOneof("payload")), response
    if kind == "error":
        assert response.error.code != 0 and response.error.message
    assert_alive(stream)


def test_garbage_in_a_joined_world_gets_status_errors(stream: RawStream) -> None:
    world = create(stream, "test/Dict-v0")
    stream.request(pb.EnvironmentRequest(join_world=pb.JoinWorldRequest(world_name=world)))
    stream.request(step_request(uids=()))
    bad = pb.EnvironmentRequest(step=pb.StepRequest())
    bad.step.actions[1].CopyFrom(tensor_utils.pack_tensor(np.zeros((3, 3), np.float32)))
    response = stream.request(bad)
    assert response.error.code == 3 and "action uid 1 ('action')" in response.error.message
    bad.step.requested_observations.append(99)
    response = stream.request(bad)
    assert "observation uid 99" in response.error.message
    stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))
    stream.request(pb.EnvironmentRequest(destroy_world=pb.DestroyWorldRequest(world_name=world)))


def test_requested_observations_are_checked_whenever_they_change(stream: RawStream) -> None:
    """The server checks a Step's requested UIDs once while they stay the same: changing them,
    asking again after a refusal and joining another world must each be checked afresh."""
    cartpole = create(stream, "CartPole-v1", seed=0)
    stream.request(pb.EnvironmentRequest(join_world=pb.JoinWorldRequest(world_name=cartpole)))
    first = stream.request(step_request(uids=(1,))).step
    assert sorted(first.observations) == [1]
    both = stream.request(step_request(0, uids=(2, 1, 2))).step  # repeats are redundant
    assert sorted(both.observations) == [1, 2] and len(both.observations[2].doubles.array) == 1
    for _ in range(2):  # refused each time, not only the first
        refused = stream.request(step_request(0, uids=(1, 9)))
        assert refused.error.code == 3 and "observation uid 9" in refused.error.message
    again = stream.request(step_request(0, uids=(2, 1, 2))).step
    assert sorted(again.observations) == [1, 2]
    stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))
    # Joined with the extras, the world has a truncation observation; joined again without
    # them it has not, and the very same request must now be refused.
    extras = pb.JoinWorldRequest(world_name=cartpole)
    extras.settings["envwire.extras"].CopyFrom(tensor_utils.pack_tensor(True))
    join = stream.request(pb.EnvironmentRequest(join_world=extras))
    truncated = next(
        uid
        for uid, spec in join.join_world.specs.observations.items()
        if spec.name == "envwire.truncated"
    )
    assert stream.request(step_request(uids=(truncated,))).step.observations[truncated].bools
    stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))
    stream.request(pb.EnvironmentRequest(join_world=pb.JoinWorldRequest(world_name=cartpole)))
    refused = stream.request(step_request(uids=(truncated,)))
    assert f"observation uid {truncated}" in refused.error.message
    stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))
    stream.request(pb.EnvironmentRequest(destroy_world=pb.DestroyWorldRequest(world_name=cartpole)))


# -- properties ------------------------------------------------------------------------------


def test_properties_read_write_and_list(channel: grpc.Channel) -> None:
    with connection.Connection(channel) as conn:
        props = properties.PropertiesExtension(conn)
        assert set(props.specs()) == {"server"}
        assert set(props.specs("server")) == {"server.envs", "server.version", "server.worlds"}
        assert "CartPole-v1" in list(props["server.envs"])
        with pytest.raises(KeyError):
            props["env.id"]  # needs a joined world
        world = conn.send(
            pb.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor("CartPole-v1")})
        )
        conn.send(pb.JoinWorldRequest(world_name=world.world_name))
        assert set(props.specs()) == {"server", "env", "episode", "world"}
        assert props.specs("episode")["episode.seed"].writable
        assert props["env.id"] == "CartPole-v1"
        assert json.loads(props["env.metadata"])["render_fps"] == 50
        assert props["env.render_mode"] == "rgb_array"
        described = spacecodec.from_description(json.loads(props["env.action_space"]))
        assert described == gymnasium.spaces.Discrete(2)
        assert props["world.name"] == world.world_name and props["world.player"] == 0
        props["episode.seed"] = 5
        first = conn.send(pb.StepRequest(requested_observations=[1]))
        expected, _ = gymnasium.make("CartPole-v1").reset(seed=5)
        np.testing.assert_array_equal(tensor_utils.unpack_tensor(first.observations[1]), expected)
        assert props["episode.seed"] == 5
        for _ in range(3):
            conn.send(pb.StepRequest(actions={1: tensor_utils.pack_tensor(0)}))
        assert props["episode.step_count"] == 3 and props["episode.index"] == 0
        assert props["episode.return"] == 3.0
        with pytest.raises(PermissionError):
            props["env.id"] = "x"
        with pytest.raises(ValueError):
            props["episode.seed"] = "seven"
        with pytest.raises(KeyError):
            props["no.such.key"]
        with pytest.raises(PermissionError):
            props.specs("env.id")
        conn.send(pb.LeaveWorldRequest())
        conn.send(pb.DestroyWorldRequest(world_name=world.world_name))


# -- worlds and players ----------------------------------------------------------------------


def _column(column: int) -> dict[int, Any]:
    return {1: tensor_utils.pack_tensor(json.dumps({"column": column}))}


def _board(response: Any) -> dict[str, Any]:
    return json.loads(tensor_utils.unpack_tensor(response.observations[1]))  # type: ignore[no-any-return]


def test_two_players_share_a_connect4_world(address: str) -> None:
    channels = [grpc.insecure_channel(address, options=CHANNEL_OPTIONS) for _ in range(4)]
    host, first, second, third = (connection.Connection(c) for c in channels)
    try:
        world = host.send(
            pb.CreateWorldRequest(
                settings={
                    "env": tensor_utils.pack_tensor("envwire/Connect4-v0"),
                    "players": tensor_utils.pack_tensor(2),
                }
            )
        ).world_name
        specs = first.send(pb.JoinWorldRequest(world_name=world)).specs
        assert specs.actions[1].name == "action" and specs.actions[1].dtype == pb.STRING
        second.send(pb.JoinWorldRequest(world_name=world))
        with pytest.raises(error.DmEnvRpcError, match="is full"):
            third.send(pb.JoinWorldRequest(world_name=world))
        uids = [1, 2]

        def step(player: connection.Connection, column: int | None = None) -> Any:
            actions = _column(column) if column is not None else {}
            return player.send(pb.StepRequest(actions=actions, requested_observations=uids))

        assert step(first).state == pb.RUNNING  # starts the episode
        assert step(second).state == pb.RUNNING  # joins it
        with pytest.raises(error.DmEnvRpcError, match="player 0 is to move"):
            step(second, 3)
        assert _board(step(first, 3))["next_player"] == 2
        seen = step(second)  # no actions: look at the board
        assert _board(seen)["board"][5][3] == 1
        step(second, 4)
        # ResetWorld from a connection that is not joined interrupts both players.
        third.send(pb.ResetWorldRequest(world_name=world))
        assert step(first, 0).state == pb.INTERRUPTED
        assert step(second).state == pb.INTERRUPTED
        fresh = step(first)
        assert fresh.state == pb.RUNNING and not any(map(any, _board(fresh)["board"]))
        assert step(second).state == pb.RUNNING
        for column in (0, 1, 0, 1, 0, 1):
            step(first if column == 0 else second, column)
        won = step(first, 0)
        assert won.state == pb.TERMINATED and won.observations[2].doubles.array[0] == 1.0
        lost = step(second, 1)  # its actions are moot: the game is over
        assert lost.state == pb.TERMINATED and lost.observations[2].doubles.array[0] == 0.0
        with pytest.raises(error.DmEnvRpcError, match="joined connection"):
            host.send(pb.DestroyWorldRequest(world_name=world))
    finally:
        for conn, chan in zip((host, first, second, third), channels, strict=True):
            conn.close()
            chan.close()


def _worlds(grpc_server: ServerProcess) -> int:
    transport = DmEnvRpcTransport(grpc_server.host, grpc_server.ports["grpc"], "CartPole-v1")
    try:
        return int(transport.read_property("server.worlds")) - 1  # not counting its own
    finally:
        transport.close()


def test_worlds_live_while_their_creator_or_a_player_holds_them(
    grpc_server: ServerProcess, address: str
) -> None:
    before = _worlds(grpc_server)
    creator_channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    creator = connection.Connection(creator_channel)
    world = creator.send(
        pb.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor("CartPole-v1")})
    ).world_name
    player = DmEnvRpcTransport(
        grpc_server.host, grpc_server.ports["grpc"], "CartPole-v1", world=world
    )
    creator_channel.close()  # the creator vanishes; the player still holds the world
    assert grpc_server.wait_for(lambda: _worlds(grpc_server) == before + 1)
    reply = player.request(m.Reset(seed=0))
    assert isinstance(reply, m.ResetReply)
    player.close()
    assert grpc_server.wait_for(lambda: _worlds(grpc_server) == before)


def test_a_vanished_client_frees_its_world(grpc_server: ServerProcess, address: str) -> None:
    before = _worlds(grpc_server)
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    conn = connection.Connection(channel)
    world = conn.send(
        pb.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor("CartPole-v1")})
    )
    conn.send(pb.JoinWorldRequest(world_name=world.world_name))
    assert _worlds(grpc_server) == before + 1
    channel.close()  # no LeaveWorld, no DestroyWorld
    assert grpc_server.wait_for(lambda: _worlds(grpc_server) == before)


def test_an_inline_env_that_hangs_costs_only_its_connection(grpc_server: ServerProcess) -> None:
    bystander = envwire.make(grpc_server.url("grpc", "CartPole-v1"))
    env = envwire.make(grpc_server.url("grpc", "test/HangInline-v0"))
    try:
        bystander.reset(seed=0)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        start = time.monotonic()
        with pytest.raises(TransportError, match="dropped the connection"):
            env.step(env.action_space.sample())
        assert time.monotonic() - start < 30
        bystander.step(0)
    finally:
        env.close()
        bystander.close()


def test_unknown_worlds_and_bad_seeds_are_refused(grpc_server: ServerProcess) -> None:
    with pytest.raises(envwire.EnvwireError, match="no world named 'nope'"):
        DmEnvRpcTransport(grpc_server.host, grpc_server.ports["grpc"], "CartPole-v1", world="nope")
    env = envwire.make(grpc_server.url("grpc", "CartPole-v1"))
    try:
        with pytest.raises(envwire.EnvwireError, match="'seed' must be >= 0"):
            env.unwrapped.transport.request(m.Reset(seed=-1))
        env.reset(seed=1)
    finally:
        env.close()


def test_the_server_exits_cleanly_with_a_hung_env_inside() -> None:
    with ServerProcess(ENVS, ("--step-timeout", "1"), front_ends=("grpc",)) as server:
        env = envwire.make(server.url("grpc", "test/HangInline-v0"))
        env.reset(seed=0)
        env.step(env.action_space.sample())
        with pytest.raises(TransportError):
            env.step(env.action_space.sample())
        env.close()
        start = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - start < 5


def test_repeated_observation_uids_are_answered_once(stream: RawStream) -> None:
    world = create(stream, "CartPole-v1")
    stream.request(pb.EnvironmentRequest(join_world=pb.JoinWorldRequest(world_name=world)))
    response = stream.request(step_request(uids=(1, 2, 1, 2)))
    assert list(response.step.observations[1].shape) == [4]
    assert len(response.step.observations[2].doubles.array) == 1
    stream.request(pb.EnvironmentRequest(leave_world=pb.LeaveWorldRequest()))


def test_a_discount_observation_on_request(channel: grpc.Channel) -> None:
    with connection.Connection(channel) as conn:
        settings = {"env": tensor_utils.pack_tensor("CartPole-v1")}
        world = conn.send(pb.CreateWorldRequest(settings=settings)).world_name
        join = {"discount": tensor_utils.pack_tensor(True)}
        specs = conn.send(pb.JoinWorldRequest(world_name=world, settings=join)).specs
        uids = {spec.name: uid for uid, spec in specs.observations.items()}
        assert set(uids) == {"observation", "reward", "discount"}
        request = pb.StepRequest(requested_observations=[uids["discount"]])
        request.actions[1].CopyFrom(tensor_utils.pack_tensor(0))
        discounts = []
        while True:
            response = conn.send(request)
            discounts.append(response.observations[uids["discount"]].doubles.array[0])
            if response.state != pb.RUNNING:
                break
        assert discounts[:-1] == [1.0] * (len(discounts) - 1) and discounts[-1] == 0.0
        conn.send(pb.LeaveWorldRequest())
        conn.send(pb.DestroyWorldRequest(world_name=world))


def test_idle_connections_are_dropped_and_their_worlds_freed() -> None:
    with ServerProcess(["CartPole-v1"], ("--idle-timeout", "0.3"), front_ends=("grpc",)) as server:
        env = envwire.make(server.url("grpc", "CartPole-v1"))
        env.reset(seed=0)
        time.sleep(1.0)
        with pytest.raises(TransportError, match="dropped the connection"):
            env.step(0)
        env.close()
        probe = DmEnvRpcTransport(server.host, server.ports["grpc"], "CartPole-v1")
        try:
            assert probe.read_property("server.worlds") == 1  # only the probe's own
        finally:
            probe.close()


# Gymnasium's checker warns about infinite Box bounds (CartPole's, the Dict env's position).
@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning")
@pytest.mark.parametrize("env_id", ["CartPole-v1", "test/Dict-v0", "test/Tuple-v0"])
def test_our_client_passes_gymnasiums_env_checker(grpc_server: ServerProcess, env_id: str) -> None:
    from gymnasium.utils.env_checker import check_env

    env = envwire.make(grpc_server.url("grpc", env_id))
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()
