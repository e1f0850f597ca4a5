"""The sans-IO dm_env_rpc pieces: tensors, specs from spaces, action checks, settings, the
state table and errors as Status."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1 import spec_manager, tensor_spec_utils, tensor_utils
from google.protobuf import any_pb2, wrappers_pb2
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from envwire import errors
from envwire.errors import InvalidActionError, InvalidArgumentError, StateError
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import (
    DATA_TYPES,
    SAME,
    TRANSITIONS,
    WORLD_DECIDES,
    Kind,
    Layout,
    Phase,
)
from envwire.testing import assert_same_sample
from tests.budget import examples
from tests.spaces_catalog import IDS, SPACES

NUMERIC = [row for row in DATA_TYPES if row.numpy is not None]
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def wire(message: Any) -> Any:
    """The message as the peer parses it."""
    return type(message).FromString(message.SerializeToString())


def same_array(a: Any, b: Any) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    else:
        np.testing.assert_array_equal(a, b)


# -- tensors --------------------------------------------------------------------------------


@pytest.mark.parametrize("row", NUMERIC, ids=lambda r: r.name)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_numeric_tensors_round_trip(row: dmenvrpc.DataType, data: st.DataObject) -> None:
    array = data.draw(hnp.arrays(row.numpy, SHAPES))
    packed = wire(dmenvrpc.pack(array))
    assert packed.WhichOneof("payload") == row.field
    same_array(dmenvrpc.unpack(packed), array)
    # and the official client reads it the same way
    official = np.asarray(tensor_utils.unpack_tensor(packed))
    if array.size != 1:  # the official client turns a 1-element tensor into a broadcast
        same_array(official.reshape(array.shape), array)


@settings(max_examples=examples(40), deadline=None)
@given(hnp.arrays(object, SHAPES, elements=st.text(max_size=6)))
def test_string_tensors_round_trip(array: Any) -> None:
    packed = wire(dmenvrpc.pack(array, dmenvrpc.STRING))
    back = dmenvrpc.unpack(packed)
    assert back.shape == array.shape and back.tolist() == array.tolist()


@settings(max_examples=examples(20), deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6))
def test_proto_tensors_round_trip(values: list[int]) -> None:
    messages = np.empty(len(values), object)
    for i, value in enumerate(values):
        messages[i] = any_pb2.Any()
        messages[i].Pack(wrappers_pb2.Int64Value(value=value))
    proto = next(row for row in DATA_TYPES if row.enum == pb.PROTO)
    back = dmenvrpc.unpack(wire(dmenvrpc.pack(messages, proto)))
    assert back.shape == messages.shape and list(back) == list(messages)


@settings(max_examples=examples(40), deadline=None)
@given(st.sampled_from(NUMERIC), SHAPES, st.data())
def test_official_tensors_unpack_here(row: dmenvrpc.DataType, shape: Any, data: Any) -> None:
    array = data.draw(hnp.arrays(row.numpy, shape))
    same_array(dmenvrpc.unpack(wire(tensor_utils.pack_tensor(array))), array)


def test_a_single_element_broadcasts_to_the_shape() -> None:
    tensor = pb.Tensor(shape=[2, 3])
    tensor.int32s.array.append(7)
    same_array(dmenvrpc.unpack(tensor), np.full((2, 3), 7, np.int32))


def test_one_variable_dimension_is_inferred() -> None:
    tensor = dmenvrpc.pack(np.arange(6, dtype=np.float32))
    tensor.shape[:] = [-1, 3]
    same_array(dmenvrpc.unpack(tensor), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize(
    ("shape", "count", "needle"),
    [
        ([-1, -1], 4, "2 variable dimensions"),
        ([-1, 4], 6, "do not fill"),
        ([2, 3], 5, "5 elements"),
        ([], 2, "2 elements"),
        ([1 << 20, 1 << 20], 1, "more than"),  # a broadcast bomb is refused, not allocated
    ],
)
def test_malformed_tensors_are_refused(shape: list[int], count: int, needle: str) -> None:
    tensor = pb.Tensor(shape=shape)
    tensor.doubles.array.extend([1.0] * count)
    with pytest.raises(InvalidArgumentError, match=needle):
        dmenvrpc.unpack(tensor)


def test_a_tensor_without_payload_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="no payload"):
        dmenvrpc.unpack(pb.Tensor(shape=[1]))


# -- specs from spaces ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_every_space_round_trips_through_tensors(name: str, space: spaces.Space[Any]) -> None:
    layout = Layout(space, "observation")
    specs = layout.specs()
    spec_manager.SpecManager(specs)  # unique names, at most one variable dimension
    for spec in specs.values():
        if spec.HasField("min") or spec.HasField("max"):
            tensor_spec_utils.bounds(spec)  # the official bounds reader accepts them
    for _ in range(3):
        sample = space.sample()
        response = pb.StepResponse()
        layout.write(sample, response.observations)
        back = layout.read(wire(response).observations, "observation")
        assert_same_sample(sample, back, name)
        assert back in space


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_batches_of_every_space_round_trip_as_one_tensor_per_leaf(
    name: str, space: spaces.Space[Any]
) -> None:
    n = 3
    single = Layout(space, "observation")
    layout = Layout(space, "observation", batch=n)
    specs = layout.specs()
    spec_manager.SpecManager(specs)
    for spec in specs.values():
        assert spec.shape[0] == n
        if spec.HasField("min") or spec.HasField("max"):
            tensor_spec_utils.bounds(spec)
    assert [leaf.name for leaf in layout.leaves] == [leaf.name for leaf in single.leaves]
    batch = concatenate(space, [space.sample() for _ in range(n)], create_empty_array(space, n))
    response = pb.StepResponse()
    layout.write(batch, response.observations)
    assert len(response.observations) == len(single.leaves)  # nothing is sent per copy
    back = layout.read(wire(response).observations, "observation")
    assert_same_sample(batch, back, name)
    assert back in batch_space(space, n)


def test_batched_actions_are_checked_per_copy() -> None:
    layout = Layout(spaces.Discrete(2), "action", batch=3)
    np.testing.assert_array_equal(layout.read({1: dmenvrpc.pack(np.array([0, 1, 1]))}), [0, 1, 1])
    bad = [
        (np.array([0, 1, 5]), r"action uid 1 \('action'\): 5 at index \[2\] is not in range"),
        (np.array([0, 1]), r"shape \[2\] is not the expected \[3\]"),
        (np.int64(1), r"shape \[\] is not the expected \[3\]"),
        (np.zeros(3, np.float32), "expected a int64 tensor, got a float"),
    ]
    for value, needle in bad:
        with pytest.raises(InvalidActionError, match=needle):
            layout.read({1: dmenvrpc.pack(value)})
    low, high = np.array([0.0, -1.0], np.float32), np.array([1.0, 1.0], np.float32)
    boxes = Layout(spaces.Box(low, high), "action", batch=2)
    with pytest.raises(InvalidActionError, match=r"-2.0 at index \[1, 1\] .*minimum -1.0"):
        boxes.read({1: dmenvrpc.pack(np.array([[0, 0], [0, -2]], np.float32))})


def test_names_nest_with_dots() -> None:
    space = spaces.Dict(
        {
            "arm": spaces.Dict({"angle": spaces.Box(-1.0, 1.0)}),
            "grip": spaces.Tuple((spaces.Discrete(2),)),
        }
    )
    assert [leaf.name for leaf in Layout(space, "action").leaves] == ["arm.angle", "grip.0"]
    assert [
        leaf.name for leaf in Layout(spaces.Tuple((spaces.Discrete(2),) * 2), "action").leaves
    ] == [
        "action.0",
        "action.1",
    ]
    reserved = Layout(
        spaces.Dict({"reward": spaces.Discrete(2)}), "observation", reserved=["reward"]
    )
    assert [leaf.name for leaf in reserved.leaves] == ["observation.reward"]


def test_bounds_become_spec_ranges() -> None:
    specs = Layout(spaces.Discrete(3, start=-1), "a").specs()
    assert tensor_spec_utils.bounds(specs[1]) == tensor_spec_utils.Bounds(-1, 1)
    box = Layout(
        spaces.Box(np.array([0.0, -1.0]), np.array([1.0, np.inf]), dtype=np.float64), "a"
    ).specs()[1]
    bounds = tensor_spec_utils.bounds(box)
    np.testing.assert_array_equal(bounds.min, [0.0, -1.0])
    np.testing.assert_array_equal(bounds.max, [1.0, np.inf])
    unbounded = Layout(spaces.Box(-np.inf, np.inf, (2,)), "a").specs()[1]
    assert not unbounded.HasField("min") and not unbounded.HasField("max")
    assert Layout(spaces.Box(-2, 2, (2,), np.int16), "a").specs()[1].dtype == pb.INT32


# -- action checks --------------------------------------------------------------------------

ACTIONS = Layout(
    spaces.Dict({"move": spaces.Box(-1.0, 1.0, (2, 2), np.float32), "fire": spaces.Discrete(3)}),
    "action",
)


def actions(**overrides: Any) -> dict[int, Any]:
    tensors = {
        1: dmenvrpc.pack(np.zeros(1, np.int64).reshape(())),
        2: dmenvrpc.pack(np.zeros((2, 2), np.float32)),
    }
    tensors.update(overrides)
    return {int(k): v for k, v in tensors.items()}


def test_actions_are_read_with_broadcasts_and_a_variable_dimension() -> None:
    move = dmenvrpc.pack(np.float32(0.5))
    move.shape[:] = [2, 2]
    sample = ACTIONS.read(actions(**{"2": move}))
    np.testing.assert_array_equal(sample["move"], np.full((2, 2), 0.5, np.float32))
    move = dmenvrpc.pack(np.ones((2, 2), np.float32))
    move.shape[:] = [-1, 2]
    assert ACTIONS.read(actions(**{"2": move}))["move"].shape == (2, 2)


@pytest.mark.parametrize(
    ("tensor", "needle"),
    [
        (dmenvrpc.pack(np.zeros((2, 2), np.float64)), "expected a float tensor, got a double"),
        (
            dmenvrpc.pack(np.zeros((2, 2, 1), np.float32)),
            "shape [2, 2, 1] is not the expected [2, 2]",
        ),
        (dmenvrpc.pack(np.full((2, 2), -3, np.float32)), "below the minimum -1.0"),
        (dmenvrpc.pack(np.array([[0, 0], [0, 9]], np.float32)), r"at index [1, 1] is not in range"),
        (dmenvrpc.pack(np.full((2, 2), np.nan, np.float32)), "not in range"),
    ],
)
def test_bad_actions_name_the_uid(tensor: Any, needle: str) -> None:
    with pytest.raises(InvalidActionError) as caught:
        ACTIONS.read(actions(**{"2": tensor}))
    assert "action uid 2 ('move')" in str(caught.value)
    assert needle in str(caught.value)


def test_unknown_and_missing_action_uids_are_named() -> None:
    with pytest.raises(InvalidActionError, match="action uid 9 is not in the action specs"):
        ACTIONS.read(actions(**{"9": dmenvrpc.pack(1)}))
    with pytest.raises(InvalidActionError, match=r"action uid 1 \('fire'\) is missing"):
        ACTIONS.read({2: actions()[2]})


@settings(max_examples=examples(300), deadline=None)
@given(
    n=st.integers(1, 300),
    start=st.integers(-200, 200),
    dtype=st.sampled_from([np.int64, np.int32, np.uint8]),
    value=st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.booleans(),
    tensor_dtype=st.sampled_from([None, np.int64, np.int32, np.uint8, np.float32]),
    shape=st.sampled_from([None, [], [1], [1, 1], [2]]),
    uid=st.sampled_from([1, 1, 1, 2]),
    extra=st.booleans(),
)
def test_a_scalar_action_reads_the_same_on_the_short_path(
    *,
    n: int,
    start: int,
    dtype: Any,
    value: Any,
    tensor_dtype: Any,
    shape: list[int] | None,
    uid: int,
    extra: bool,
) -> None:
    """A Discrete action's common message is read without the general machinery; every
    message must give the same sample (value and type) or the same error either way."""
    if np.dtype(dtype).kind == "u":
        n, start = min(n, 100), abs(start) % 100
    space = spaces.Discrete(n, start=start, dtype=dtype)
    layout = Layout(space, "action")
    assert layout._scalar is not None  # the short path is in use for this layout
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tensor = tensor_utils.pack_tensor(value, dtype=tensor_dtype)
    except (OverflowError, ValueError, TypeError, RuntimeWarning):
        return  # not a tensor the official packer makes
    if shape is not None:
        tensor.shape[:] = shape
    tensors = {uid: tensor}
    if extra:
        tensors[uid + 1] = tensor_utils.pack_tensor(0)
    long_way = Layout(space, "action")
    long_way._scalar = None

    def outcome(reader: Layout) -> tuple[str, Any]:
        try:
            sample = reader.read(tensors)
        except InvalidActionError as exc:
            return "error", str(exc)
        return "sample", (type(sample), sample.dtype, sample.item())

    assert outcome(layout) == outcome(long_way)


def test_a_matched_scalar_layout_reads_its_own_uid_and_data_type() -> None:
    """``matched`` renumbers and retypes the leaves after a server's specs; the short reader
    must follow them, not the layout it was copied from."""
    layout = Layout(spaces.Discrete(3, dtype=np.int32), "action")
    specs = {7: pb.TensorSpec(name="action", dtype=pb.INT64)}
    matched = layout.matched(specs, "action")
    sample = matched.read({7: tensor_utils.pack_tensor(2, dtype=np.int64)})
    assert sample == 2 and type(sample) is np.int32  # the space's own dtype
    with pytest.raises(InvalidActionError, match="action uid 1 is not in the action specs"):
        matched.read({1: tensor_utils.pack_tensor(2, dtype=np.int32)})


# -- settings, states and errors -----------------------------------------------------------


def test_settings_are_typed_and_checked() -> None:
    good = {"env": dmenvrpc.pack("CartPole-v1"), "seed": dmenvrpc.pack(np.uint8(0))}
    assert dmenvrpc.read_settings(good, "create_world") == {"env": "CartPole-v1", "seed": 0}
    bad = [
        ({"seed": dmenvrpc.pack(1)}, "needs the setting 'env'"),
        ({"env": dmenvrpc.pack(3)}, "'env' must be a string, got 3"),
        ({"env": dmenvrpc.pack("x"), "seed": dmenvrpc.pack(-2)}, "must be >= 0"),
        ({"env": dmenvrpc.pack("x"), "seed": dmenvrpc.pack([[1, 2]])}, "must be a scalar"),
        ({"env": dmenvrpc.pack("x"), "seed": dmenvrpc.pack([1, -2])}, r"seeds >= 0 \(or -1"),
        (
            {"env": dmenvrpc.pack("x"), "colour": dmenvrpc.pack(1)},
            "unknown create_world setting 'colour'",
        ),
    ]
    for settings_map, needle in bad:
        with pytest.raises(InvalidArgumentError, match=needle):
            dmenvrpc.read_settings(settings_map, "create_world")


def test_kwargs_settings_nest_into_one_dict() -> None:
    settings_map = {
        "env": dmenvrpc.pack("x"),
        "kwargs": dmenvrpc.pack('{"rows": 4, "hand": {"a": [1, 2]}}'),
        "kwargs.arm.a": dmenvrpc.pack([1, 2]),
        "kwargs.colour": dmenvrpc.pack("red"),
        "kwargs.arm.length": dmenvrpc.pack(np.float32(0.5)),
        "kwargs.weights": dmenvrpc.pack(np.array([[1, 2], [3, 4]], np.int32)),
        "kwargs.fast": dmenvrpc.pack(True),
    }
    assert dmenvrpc.read_settings(settings_map, "create_world")["kwargs"] == {
        "rows": 4,
        "hand": {"a": [1, 2]},
        "arm": {"a": [1, 2], "length": 0.5},
        "colour": "red",
        "weights": [[1, 2], [3, 4]],
        "fast": True,
    }
    one = dmenvrpc.read_settings(
        {"env": dmenvrpc.pack("x"), "kwargs.n": dmenvrpc.pack(3)}, "create_world"
    )
    assert one["kwargs"] == {"n": 3} and type(one["kwargs"]["n"]) is int


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            {"kwargs": '{"a": 1}', "kwargs.a": 2},
            "settings 'kwargs' and 'kwargs.a' both set the argument 'a'",
        ),
        ({"kwargs.a": 1, "kwargs.a.b": 2}, "'kwargs.a' and 'kwargs.a.b' both set the argument 'a'"),
        ({"kwargs": '{"a": {}}', "kwargs.a.b": 2}, "'kwargs' and 'kwargs.a.b' both set"),
        ({"kwargs": "[1, 2]"}, "'kwargs' must be a JSON object"),
        ({"kwargs": "{nope"}, "'kwargs' is not JSON"),
        ({"kwargs": 3}, "'kwargs' must be a JSON object"),
        ({"kwargs.": 1}, "every '.' must be followed by a name"),
        ({"kwargs..a": 1}, "every '.' must be followed by a name"),
        ({"num_envs": 0}, "'num_envs' must be >= 1, got 0"),
        ({"workers": 0}, "'workers' must be >= 1, got 0"),
        ({"autoreset_mode": 1}, "'autoreset_mode' must be a string"),
    ],
)
def test_bad_world_settings_are_named(extra: dict[str, Any], needle: str) -> None:
    settings_map = {"env": dmenvrpc.pack("x")} | {k: dmenvrpc.pack(v) for k, v in extra.items()}
    with pytest.raises(InvalidArgumentError, match=re.escape(needle)):
        dmenvrpc.read_settings(settings_map, "create_world")


def test_seeds_per_copy_and_reset_masks() -> None:
    read = dmenvrpc.read_settings(
        {"seed": dmenvrpc.pack(np.array([5, -1, 0])), "reset_mask": dmenvrpc.pack([True, False])},
        "reset",
    )
    assert read["seed"] == [5, None, 0]
    np.testing.assert_array_equal(read["reset_mask"], [True, False])
    with pytest.raises(InvalidArgumentError, match="'reset_mask' must be a bool vector"):
        dmenvrpc.read_settings({"reset_mask": dmenvrpc.pack([1, 0])}, "reset")
    with pytest.raises(InvalidArgumentError, match="unknown reset_world setting 'reset_mask'"):
        dmenvrpc.read_settings({"reset_mask": dmenvrpc.pack([True])}, "reset_world")


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("kind", list(Kind))
def test_the_state_table_answers_every_request_in_every_phase(phase: Phase, kind: Kind) -> None:
    if kind in TRANSITIONS[phase]:
        after = dmenvrpc.next_phase(phase, kind)
        assert after in (SAME, WORLD_DECIDES) or isinstance(after, Phase)
    else:
        with pytest.raises(StateError) as caught:
            dmenvrpc.next_phase(phase, kind, "w1")
        assert kind.value.replace("_", "").lower() in str(caught.value).replace(" ", "").lower()


def test_step_and_reset_need_a_world_and_join_needs_none() -> None:
    assert dmenvrpc.next_phase(Phase.UNJOINED, Kind.JOIN_WORLD) is Phase.JOINED
    assert dmenvrpc.next_phase(Phase.JOINED, Kind.STEP) is Phase.RUNNING
    assert dmenvrpc.next_phase(Phase.RUNNING, Kind.STEP) is WORLD_DECIDES
    assert dmenvrpc.next_phase(Phase.TERMINATED, Kind.STEP) is Phase.RUNNING
    assert dmenvrpc.next_phase(Phase.RUNNING, Kind.RESET) is Phase.INTERRUPTED
    for kind in (Kind.STEP, Kind.RESET):
        with pytest.raises(StateError, match="join a world first"):
            dmenvrpc.next_phase(Phase.UNJOINED, kind)
    with pytest.raises(StateError, match="'w1': leave it first"):
        dmenvrpc.next_phase(Phase.RUNNING, Kind.JOIN_WORLD, "w1")


def _error_classes() -> list[type[errors.EnvwireError]]:
    found, todo = [], [errors.EnvwireError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c.__module__.startswith("envwire") and c is not errors.EnvwireError]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_errors_travel_as_status_and_come_back_as_their_class(
    cls: type[errors.EnvwireError],
) -> None:
    if cls.code in {c.code for c in _error_classes() if c is not cls and issubclass(cls, c)}:
        pytest.skip("shares its code with a base class")
    if cls.__init__ is not errors.EnvwireError.__init__:
        # built from more than a message (or from something else): it comes back as a
        # RemoteError with its code, as error_class_for_code decides
        error = errors.RemoteError(f"{cls.__name__} happened", cls.code)
        error.code = cls.code
        back = dmenvrpc.error_from_status(wire(dmenvrpc.error_response(error)).error)
        assert type(back) is errors.RemoteError and str(back) == str(error)
        assert back.remote_code == cls.code
        return
    error = cls(f"{cls.__name__} happened")
    response = wire(dmenvrpc.error_response(error))
    assert response.error.code == dmenvrpc.code_of(cls)
    back = dmenvrpc.error_from_status(response.error)
    assert type(back) is cls and str(back) == str(error)


def test_a_foreign_status_becomes_a_remote_error() -> None:
    back = dmenvrpc.error_from_status(
        pb.EnvironmentResponse().error.__class__(code=9, message="no")
    )
    assert isinstance(back, errors.RemoteError) and "no" in str(back)


def test_garbage_bytes_are_a_protocol_error() -> None:
    with pytest.raises(errors.ProtocolError):
        dmenvrpc.parse_request(b"\xff\xff\xff")
    with pytest.raises(errors.ProtocolError, match="no payload"):
        dmenvrpc.request_kind(pb.EnvironmentRequest())
