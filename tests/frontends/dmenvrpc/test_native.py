"""dm_env envs over dm_env_rpc: DmEnvAdaptor sees the env's own specs, rewards, discounts and
step types; dm_env's test mixin and dm_env_rpc's compliance suite pass; the other front ends
serve the Gymnasium form, equal to Shimmy's.

The envs: ``test/Grid-v0`` (``envwire.testing.dmenvs.GridEnv``: nested dict observations in
unsorted key order, int32 ``DiscreteArray`` actions, float32 rewards, terminations and
truncations, discounts other than 0 and 1 on request) and, where the dm-control extra is
installed, dm_control's ``cartpole-swingup`` and ``walker-walk``.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import dm_env
import grpc
import numpy as np
import pytest
from absl.testing import absltest
from dm_env import specs, test_utils
from dm_env_rpc.v1 import compliance, connection, dm_env_adaptor, dm_env_rpc_pb2, tensor_utils
from dm_env_rpc.v1 import error as rpc_error

import envwire
from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.kinds.dm_env import control, seed_dm_env
from envwire.testing import SERVER_ARGS, ServerProcess
from envwire.testing.dmenvs import GridEnv

from .test_compliance import _CreateDestroy, _InWorld, _Joined, _JoinLeave, _Reset

try:
    import dm_control  # noqa: F401

    SUITE: tuple[str, ...] = ("dm_control/cartpole-swingup", "dm_control/walker-walk")
except ImportError:  # the dm-control extra is not installed: the suite's tests skip
    SUITE = ()
needs_suite = pytest.mark.skipif(not SUITE, reason="the dm-control extra is not installed")

GRID = "test/Grid-v0"
_CONFIG = f"""
[[env]]
id = "{GRID}"
entry_point = "envwire.testing.dmenvs:GridEnv"
client_kwargs = ["gamma", "limit", "cells"]

[[env]]
id = "test/GridCut-v0"
entry_point = "envwire.testing.dmenvs:GridEnv"
kwargs = {{ cells = 50 }}
max_episode_steps = 3
""" + "".join(
    f'[[env]]\nid = "{name}"\nentry_point = "{name}"\nclient_kwargs = ["task_kwargs"]\n'
    'isolation = "inline"\n'  # dm_control is imported once, not in a worker per world
    for name in SUITE
)
#: Suite episodes of one simulated second (100 cartpole steps, 40 walker steps), to reach
#: their time limit quickly.
SHORT = {"task_kwargs": {"time_limit": 1.0}}
_ADDRESS: dict[str, str] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``envwire serve`` with the grid and the suite envs on gRPC and gym-socket."""
    config = Path(tmp_path_factory.mktemp("native")) / "envwire.toml"
    config.write_text(_CONFIG)
    args = (*SERVER_ARGS, "--config", str(config))
    with ServerProcess((), args, front_ends=("grpc", "gym-socket", "http")) as started:
        _ADDRESS["grpc"] = f"{started.host}:{started.ports['grpc']}"
        yield started


@pytest.fixture
def official(server: ServerProcess) -> Iterator[connection.Connection]:
    channel = grpc.insecure_channel(_ADDRESS["grpc"], options=CHANNEL_OPTIONS)
    with connection.Connection(channel) as opened:
        yield opened
    channel.close()


def local_env(env_id: str, **kwargs: Any) -> Any:
    """The env ``env_id`` names, made here as the server makes it with ``kwargs``."""
    return GridEnv(**kwargs) if env_id == GRID else control.load(env_id, **kwargs)


def world_settings(env_id: str, seed: int) -> dict[str, Any]:
    """CreateWorld settings: suite envs with short episodes."""
    return {"env": env_id, "seed": seed, **({} if env_id == GRID else {"kwargs": SHORT})}


def leaves(spec: Any, prefix: str = "") -> dict[str, Any]:
    """A nested spec (or value) by its "."-joined names."""
    if isinstance(spec, collections.abc.Mapping):
        found: dict[str, Any] = {}
        for key, sub in spec.items():
            found.update(leaves(sub, f"{prefix}{key}."))
        return found
    return {prefix[:-1]: spec}


def assert_same_spec(mine: Any, theirs: Any, name: str) -> None:
    """Class, dtype, shape, bounds and name as dm_env_rpc can carry them."""
    assert type(mine) is type(theirs), name
    assert (mine.dtype, mine.shape, mine.name) == (theirs.dtype, theirs.shape, name), name
    if isinstance(theirs, specs.DiscreteArray):
        assert mine.num_values == theirs.num_values, name
    if isinstance(theirs, specs.BoundedArray):
        for got, want in ((mine.minimum, theirs.minimum), (mine.maximum, theirs.maximum)):
            np.testing.assert_array_equal(np.broadcast_to(got, mine.shape), want, err_msg=name)
            assert np.asarray(got).dtype == np.asarray(want).dtype, name


ENV_IDS = (GRID, *SUITE)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_adaptor_sees_the_envs_own_specs(official: connection.Connection, env_id: str) -> None:
    env, _ = dm_env_adaptor.create_and_join_world(official, {"env": env_id}, {})
    local = local_env(env_id)
    try:
        for kind in ("observation", "action"):
            mine = leaves(getattr(env, f"{kind}_spec")())
            theirs = leaves(getattr(local, f"{kind}_spec")())
            if list(theirs) == [""]:  # a lone spec travels under the kind's name
                theirs = {kind: theirs[""]}
            assert list(mine) == list(theirs)  # the env's own key order
            for name, spec in theirs.items():
                assert_same_spec(mine[name], spec, name)
        assert_same_spec(env.reward_spec(), local.reward_spec(), "reward")
        assert env.discount_spec() == local.discount_spec()
    finally:
        env.close()


def assert_same_step(mine: dm_env.TimeStep, theirs: dm_env.TimeStep, where: str) -> None:
    assert mine.step_type == theirs.step_type, where
    for got, want, what in (
        (mine.reward, theirs.reward, "reward"),
        (mine.discount, theirs.discount, "discount"),
    ):
        if want is None:
            assert got is None, f"{where}: {what}"
        else:
            assert np.asarray(got).dtype == np.asarray(want).dtype, f"{where}: {what} dtype"
            assert got == want, f"{where}: {what}"
    mine_leaves, their_leaves = leaves(mine.observation), leaves(theirs.observation)
    assert list(mine_leaves) == list(their_leaves), where
    for name, value in their_leaves.items():
        got = np.asarray(mine_leaves[name])
        assert got.dtype == np.asarray(value).dtype, f"{where}: {name} dtype"
        np.testing.assert_array_equal(got, value, err_msg=f"{where}: {name}")


def actions_for(env_id: str, spec: Any, rng: np.random.Generator) -> Any:
    """A random action fitting the env's own action ``spec``."""
    if env_id == GRID:
        return {
            "move": np.int32(rng.integers(0, 3)),
            "force": rng.uniform(-1, 1, 2).astype(np.float32),
        }
    return rng.uniform(spec.minimum, spec.maximum, spec.shape).astype(spec.dtype)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_adaptor_episodes_equal_the_local_env(official: connection.Connection, env_id: str) -> None:
    """Step types, rewards, discounts and observations exactly, across episode ends."""
    seed = 11
    env, _ = dm_env_adaptor.create_and_join_world(official, world_settings(env_id, seed), {})
    local = local_env(env_id, **({} if env_id == GRID else SHORT))
    assert seed_dm_env(local, seed)
    rng = np.random.default_rng(seed)
    ends = collections.Counter()
    try:
        mine, theirs = env.reset(), local.reset()
        assert_same_step(mine, theirs, "reset")
        for t in range(300):
            action = actions_for(env_id, local.action_spec(), rng)
            theirs = local.step(action)
            mine = env.step(action if isinstance(action, dict) else {"action": action})
            assert_same_step(mine, theirs, f"{env_id} step {t}")
            if theirs.last():
                ends["terminated" if theirs.discount == 0 else "truncated"] += 1
    finally:
        env.close()
    assert ends["truncated"] >= 1
    assert env_id != GRID or ends["terminated"] >= 1


def test_the_envs_discounts_travel_when_asked(
    official: connection.Connection, server: ServerProcess
) -> None:
    """With gamma = 0.9 the state cannot carry the discount: the ``discount`` observation does,
    and the world warns (once) a connection that did not ask for it."""
    settings = {"env": GRID, "seed": 3, "kwargs": {"gamma": 0.9, "cells": 3}}
    plain, _ = dm_env_adaptor.create_and_join_world(official, settings, {})
    local = GridEnv(gamma=0.9, cells=3)
    seed_dm_env(local, 3)
    local.reset()
    plain.reset()
    stay = {"move": np.int32(1), "force": np.zeros(2, np.float32)}
    assert local.step(stay).discount == 0.9
    assert plain.step(stay).discount == 1.0  # derived from the state: the env's 0.9 is lost
    plain.close()
    channel = grpc.insecure_channel(_ADDRESS["grpc"], options=CHANNEL_OPTIONS)
    with connection.Connection(channel) as other:
        exact, _ = dm_env_adaptor.create_and_join_world(other, settings, {"discount": True})
        local = GridEnv(gamma=0.9, cells=3)
        seed_dm_env(local, 3)
        first, theirs = exact.reset(), local.reset()
        assert first.discount == 1.0  # dm_env has none on FIRST steps; the tensor says 1.0
        assert exact.discount_spec() == local.discount_spec()
        right = {"move": np.int32(2), "force": np.zeros(2, np.float32)}
        while not theirs.last():
            theirs, mine = local.step(right), exact.step(right)
            assert (mine.step_type, mine.discount) == (theirs.step_type, theirs.discount)
        exact.close()
    channel.close()
    warned = [line for line in server.output if "join with the setting discount=True" in line]
    assert len(warned) == 1 and "discount 0.9 reaches a DmEnvAdaptor as 1.0" in warned[0]


def test_a_time_limit_of_the_entry_is_a_truncation(official: connection.Connection) -> None:
    env, _ = dm_env_adaptor.create_and_join_world(official, {"env": "test/GridCut-v0"}, {})
    stay = {"move": np.int32(1), "force": np.zeros(2, np.float32)}
    steps = [env.reset()] + [env.step(stay) for _ in range(4)]
    assert [s.step_type for s in steps] == [dm_env.StepType.FIRST] + [dm_env.StepType.MID] * 2 + [
        dm_env.StepType.LAST,
        dm_env.StepType.FIRST,
    ]
    assert steps[3].discount == 1.0
    env.close()


def test_bad_actions_name_the_uid_and_the_stream_goes_on(official: connection.Connection) -> None:
    world = official.send(
        dm_env_rpc_pb2.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor(GRID)})
    ).world_name
    specs_ = official.send(dm_env_rpc_pb2.JoinWorldRequest(world_name=world)).specs
    uid = {spec.name: uid for uid, spec in specs_.actions.items()}
    official.send(dm_env_rpc_pb2.StepRequest())  # starts the sequence
    force = tensor_utils.pack_tensor(np.zeros(2, np.float32))
    cases = [
        (np.int64(1), force, r"uid 1 \('move'\): expected a int32 tensor, got a int64 tensor"),
        (np.int32(3), force, r"uid 1 \('move'\): 3 at index \[\] is not in range"),
        (np.int32(1), None, r"uid 2 \('force'\) is missing"),
    ]
    for move, force_tensor, message in cases:
        actions = {uid["move"]: tensor_utils.pack_tensor(move)}
        if force_tensor is not None:
            actions[uid["force"]] = force_tensor
        with pytest.raises(rpc_error.DmEnvRpcError) as caught:
            official.send(dm_env_rpc_pb2.StepRequest(actions=actions))
        assert caught.value.code == 3  # INVALID_ARGUMENT
        assert re.search(message, caught.value.message), caught.value.message
    good = {uid["move"]: tensor_utils.pack_tensor(np.int32(1)), uid["force"]: force}
    response = official.send(dm_env_rpc_pb2.StepRequest(actions=good))
    assert response.state == dm_env_rpc_pb2.RUNNING


# -- dm_env's test mixin and dm_env_rpc's compliance suite, unmodified ------------------------


class _Mixin(test_utils.EnvironmentTestMixin):
    """dm_env's own checks of a ``DmEnvAdaptor`` joined to a world of ``env_id``; the action
    sequence runs past an episode's end (the suite's episodes are cut to one second)."""

    env_id: ClassVar[str]
    steps: ClassVar[int]

    def make_object_under_test(self) -> dm_env.Environment:
        channel = grpc.insecure_channel(_ADDRESS["grpc"], options=CHANNEL_OPTIONS)
        self._connection = connection.Connection(channel)
        self.addCleanup(channel.close)  # type: ignore[attr-defined]
        settings = world_settings(self.env_id, 0)
        env, _ = dm_env_adaptor.create_and_join_world(self._connection, settings, {})
        return env

    def make_action_sequence(self) -> Iterator[Any]:
        for step in range(self.steps):  # the grid's episodes end by moving right, or time out
            if self.env_id == GRID:
                yield {"move": np.int32(2 if step % 8 < 4 else 1), "force": np.zeros(2, np.float32)}
            else:
                yield self.make_action()


#: Each compliance base class (and dm_env's mixin), with envwire's helper that supplies what it
#: needs: every env gets each as a test class (TestGridV0Step, TestCartpoleSwingupMixin, ...).
_COMPLIANCE = {
    "Mixin": (_Mixin, absltest.TestCase),
    "CreateDestroyWorld": (_CreateDestroy, compliance.CreateDestroyWorld),
    "JoinLeaveWorld": (_JoinLeave, compliance.JoinLeaveWorld),
    "Reset": (_Reset, compliance.Reset),
    "ResetWorld": (_InWorld, compliance.ResetWorld),
    "Step": (_Joined, compliance.Step),
}
for _env_id in ENV_IDS:
    _label = "".join(part.title() for part in re.split(r"[/_-]", _env_id.split("/")[-1]))
    for _name, _bases in _COMPLIANCE.items():
        _fields = {
            "env_id": _env_id,
            "addresses": _ADDRESS,
            "steps": 50 if _env_id == GRID else 110,
        }
        _test = type(f"Test{_label}{_name}", _bases, _fields)
        globals()[_test.__name__] = pytest.mark.usefixtures("server")(_test)


# -- the Gymnasium form over the other front ends -----------------------------------------------


@needs_suite
@pytest.mark.parametrize("scheme", ["gym-socket", "grpc", "ws", "http"])
@pytest.mark.parametrize("env_id", SUITE)
def test_gymnasium_episodes_equal_shimmys(server: ServerProcess, scheme: str, env_id: str) -> None:
    """Episodes over each front end equal Shimmy's local conversion for the same seed and
    actions (over gym-socket a whole one, to the time limit), and the spaces are Shimmy's."""
    from tests.kinds.dm_env.helpers import assert_same_results, rollout, shimmy_env

    openenv = scheme in ("ws", "http")
    front_end = "http" if openenv else scheme
    path = f"envs/{env_id}" if openenv else env_id
    remote = envwire.make(server.url(scheme, path, front_end))
    reference = shimmy_env(env_id)
    try:
        assert remote.observation_space == reference.observation_space
        assert remote.action_space == reference.action_space
        steps = 1000 if scheme == "gym-socket" else 200
        assert_same_results(rollout(remote, 3, steps), rollout(reference, 3, steps))
    finally:
        remote.close()
        reference.close()
