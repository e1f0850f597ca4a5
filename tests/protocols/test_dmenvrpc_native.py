"""NativeLayout: a dm_env env's own specs as tensors, and ``Layout.matched`` on the client side."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from dm_env import specs
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1 import dm_env_utils, tensor_utils
from gymnasium import spaces

from envwire.errors import ConfigError, InvalidActionError, ProtocolError
from envwire.protocols.dmenvrpc import Layout, NativeLayout
from envwire.testing.dmenvs import GridEnv


def test_specs_are_what_dm_env_rpc_makes_of_the_env_own() -> None:
    env = GridEnv()
    layout = NativeLayout(env.observation_spec(), "observation", first_uid=3)
    names = [leaf.name for leaf in layout.leaves]
    assert names == ["position", "arm.angle", "arm.touch", "count", "cell"]  # the env's order
    assert [leaf.uid for leaf in layout.leaves] == [3, 4, 5, 6, 7] and layout.next_uid == 8
    flat = {"position": env.observation_spec()["position"], "cell": env.observation_spec()["cell"]}
    for tensor_spec in layout.specs().values():
        name = tensor_spec.name
        if name in flat:  # dm_env_rpc's own conversion of the same spec, without the name
            expected = dm_env_utils.dm_env_spec_to_tensor_spec(flat[name])
            expected.name = name
            assert tensor_spec == expected, name
    lone = NativeLayout(specs.BoundedArray((1,), np.float64, -1.0, 1.0), "action")
    assert [leaf.name for leaf in lone.leaves] == ["action"]


def test_values_round_trip_in_the_specs_dtypes_and_structure() -> None:
    env = GridEnv()
    actions = NativeLayout(env.action_spec(), "action")
    request = pb.StepRequest()
    actions.write({"move": 2, "force": [0.5, -0.25]}, request.actions)
    assert request.actions[1].WhichOneof("payload") == "int32s"
    value = actions.read(request.actions)
    assert value["move"].dtype == np.int32 and value["move"].shape == ()
    assert value["force"].dtype == np.float32
    ordered = collections.OrderedDict(b=specs.Array((), np.int16), a=(specs.Array((2,), bool),))
    layout = NativeLayout(ordered, "action")
    out = pb.StepRequest()
    layout.write({"b": 7, "a": (np.array([True, False]),)}, out.actions)
    back = layout.read(out.actions)
    assert isinstance(back, collections.OrderedDict) and list(back) == ["b", "a"]
    assert back["b"].dtype == np.int16 and isinstance(back["a"], tuple)  # int16 narrowed back


def test_bad_tensors_and_bad_specs_are_named() -> None:
    actions = NativeLayout(GridEnv().action_spec(), "action")
    bad = {
        1: tensor_utils.pack_tensor(np.int32(3)),
        2: tensor_utils.pack_tensor(np.zeros(2, np.float32)),
    }
    with pytest.raises(
        InvalidActionError, match=r"uid 1 \('move'\): 3 at index \[\] is not in range"
    ):
        actions.read(bad)
    with pytest.raises(ConfigError, match="cannot be a dm_env_rpc name"):
        NativeLayout({"a.b": specs.Array((), np.float32)}, "observation")
    with pytest.raises(ConfigError, match="has no dm_env_rpc tensor form"):
        NativeLayout({"text": specs.StringArray(())}, "observation")
    moved = NativeLayout(
        {"reward": specs.Array((), np.float32)}, "observation", reserved=["reward"]
    )
    assert [leaf.name for leaf in moved.leaves] == ["observation.reward"]


def test_a_client_layout_follows_the_servers_uids_and_types() -> None:
    space = spaces.Dict({"move": spaces.Discrete(3), "force": spaces.Box(-1, 1, (2,), np.float32)})
    server = NativeLayout(GridEnv().action_spec(), "action")  # move first, int32
    client = Layout(space, "action").matched(server.specs(), "action")
    assert {leaf.name: leaf.uid for leaf in client.leaves} == {"force": 2, "move": 1}
    request = pb.StepRequest()
    client.write({"move": np.int64(2), "force": np.zeros(2, np.float32)}, request.actions)
    assert server.read(request.actions)["move"] == 2  # int32 on the wire, as the server checks
    with pytest.raises(ProtocolError, match="the action specs have no 'force'"):
        Layout(space, "action").matched({1: pb.TensorSpec(name="other", dtype=pb.INT32)}, "action")
