"""Space samples <-> the GymGodot wire form, over a catalog of spaces."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given
from hypothesis import strategies as st

from envwire.errors import InvalidArgumentError, ProtocolError, UnsupportedError
from envwire.protocols.godot.spaces import SUPPORTED_SPACES, check_space, from_wire, to_wire
from tests.spaces_catalog import SPACES

# The project's catalog of spaces, narrowed to the kinds this protocol carries.
GODOT_SPACES = [(name, space) for name, space in SPACES if isinstance(space, SUPPORTED_SPACES)]


def as_godot_json(wire: list[Any]) -> Any:
    """What the value looks like after Godot 3's JSON: every number a float."""
    return json.loads(json.dumps([float(v) for v in wire]))


@pytest.mark.parametrize(
    "space", [space for _, space in GODOT_SPACES], ids=[n for n, _ in GODOT_SPACES]
)
@given(seed=st.integers(0, 2**31 - 1))
def test_round_trip_through_godot_floats(space: spaces.Space[Any], seed: int) -> None:
    space.seed(seed)
    sample = space.sample()
    wire = to_wire(space, sample)
    assert json.loads(json.dumps(wire)) == wire  # plain JSON values only
    back = from_wire(space, as_godot_json(wire))
    assert space.contains(back)
    if isinstance(space, spaces.Discrete):
        assert type(back) is int
        assert back == sample
    else:
        assert back.dtype == space.dtype
        assert back.shape == space.shape
        np.testing.assert_array_equal(back, sample)


def test_discrete_travels_as_a_one_element_list() -> None:
    assert to_wire(spaces.Discrete(4), np.int64(2)) == [2]
    assert from_wire(spaces.Discrete(4), [2.0]) == 2
    assert from_wire(spaces.Discrete(4), 3.0) == 3


def test_box_travels_flat_and_comes_back_shaped() -> None:
    space = spaces.Box(0.0, 10.0, shape=(2, 2), dtype=np.float32)
    assert to_wire(space, np.array([[1, 2], [3, 4]], dtype=np.float32)) == [1.0, 2.0, 3.0, 4.0]
    back = from_wire(space, [[1.0, 2.0], [3.0, 4.0]])
    assert back.shape == (2, 2)
    assert back.dtype == np.float32


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (spaces.Discrete(3), [1.5], "not an integer sample"),
        (spaces.Discrete(3), ["1"], "list of numbers"),
        (spaces.Discrete(3), [], "list of numbers"),
        (spaces.Discrete(3), [1, 2], "has 2 values"),
        (spaces.Box(-1, 1, shape=(2,)), [0.5], "has 1 values; .* needs 2"),
        (spaces.Box(-1, 1, shape=(2,)), [0.5, None], "list of numbers"),
        (spaces.Box(-1, 1, shape=(2,)), [[0.5], [0.5, 1.0]], "list of numbers"),
        (spaces.Box(-1, 1, shape=(2,)), {"x": 1}, "list of numbers"),
        (spaces.Box(0, 9, shape=(2,), dtype=np.int64), [1.0, 2.5], "non-integral"),
        (spaces.MultiBinary(2), [1.0, float("nan")], "non-integral"),
        (
            spaces.Box(0, 255, shape=(1,), dtype=np.uint8),
            [300],
            r"outside uint8's range \[0, 255\]",
        ),
        (spaces.MultiDiscrete([3, 3]), [0, -1e20], "outside int64's range"),
    ],
)
def test_bad_wire_values(space: spaces.Space[Any], value: Any, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        from_wire(space, value)


def test_box_bounds_are_not_the_codec_s_to_judge() -> None:
    # Pendulum's action 50.0 lies outside Box(-2, 2) and reaches the env, which clips it.
    box = spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
    assert from_wire(box, [50.0], "action").tolist() == [50.0]
    assert from_wire(spaces.Box(0, 9, shape=(1,), dtype=np.int64), [12.0]).tolist() == [12]


def test_messages_name_what_was_decoded() -> None:
    with pytest.raises(ProtocolError, match=r"^action"):
        from_wire(spaces.Discrete(2), [0.5], "action")


def test_unsupported_spaces_are_refused() -> None:
    space = spaces.Dict({"a": spaces.Discrete(2)})
    with pytest.raises(UnsupportedError, match="observation space is Dict"):
        check_space(space, "observation")
    with pytest.raises(UnsupportedError):
        to_wire(space, {"a": 1})
    with pytest.raises(UnsupportedError):
        from_wire(space, [1])


def test_samples_that_do_not_cast_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        to_wire(spaces.Discrete(2), "left")
    with pytest.raises(InvalidArgumentError):
        to_wire(spaces.Box(-1, 1, shape=(2,)), ["a", "b"])
