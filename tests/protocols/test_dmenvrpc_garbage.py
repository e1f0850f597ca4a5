"""dm_env_rpc's decoders fed garbage: tensors, actions and settings raise only their own errors.

The invariant is exact: a malformed tensor is an ``InvalidArgumentError``, a malformed action an
``InvalidActionError`` or ``InvalidArgumentError`` (both answered as gRPC statuses), never a
``ValueError``, ``TypeError``, ``OverflowError`` or numpy's errors.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire.errors import InvalidActionError, InvalidArgumentError
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import DATA_TYPES, Layout
from envwire.protocols.dmenvrpc.worldsettings import SETTINGS, read_settings
from tests.budget import examples

_NAMES = st.sampled_from([row.field for row in DATA_TYPES])
_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
    st.binary(max_size=8),
)
_DEEP = "[" * 3000 + "]" * 3000


@st.composite
def tensors(draw: st.DrawFn) -> Any:
    """A Tensor message: a random payload of random items (whatever its field accepts), and a
    random shape; or random bytes parsed as one."""
    tensor = pb.Tensor()
    if draw(st.booleans()):
        raw = draw(st.binary(max_size=64))
        try:
            tensor.ParseFromString(raw)
        except Exception:  # not a protobuf at all: gRPC refuses it before we see it
            tensor = pb.Tensor()
        return tensor
    field = draw(st.none() | _NAMES)
    if field is not None:
        array = getattr(tensor, field).array
        for item in draw(st.lists(_SCALARS | st.just(_DEEP), max_size=6)):
            try:
                if field in ("uint8s", "int8s"):
                    array += bytes([item % 256]) if isinstance(item, int) else b"\x00"
                else:
                    array.append(item)
            except (TypeError, ValueError, OverflowError):
                pass  # the protobuf field does not take this item
        getattr(tensor, field).SetInParent()
    tensor.shape.extend(draw(st.lists(st.integers(-3, 2**31 - 1), max_size=4)))
    return tensor


@settings(max_examples=examples(200), deadline=None)
@given(tensors())
def test_garbage_tensors_unpack_or_raise_invalid_argument(tensor: Any) -> None:
    try:  # a smaller limit than MAX_ELEMENTS (2**28) only keeps the test's memory down
        array = dmenvrpc.unpack(tensor, limit=1 << 20)
    except InvalidArgumentError:
        return
    assert isinstance(array, np.ndarray)


ACTIONS = Layout(
    spaces.Dict(
        {
            "move": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "fire": spaces.Discrete(3),
            "say": spaces.Text(8),
            "tags": spaces.MultiBinary(3),
        }
    ),
    "action",
)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.integers(-2, 6), tensors(), max_size=5))
def test_garbage_actions_raise_only_action_errors(given_tensors: dict[int, Any]) -> None:
    try:
        sample = ACTIONS.read(given_tensors)
    except (InvalidActionError, InvalidArgumentError):
        return
    assert ACTIONS.space.contains(sample)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from(sorted(SETTINGS)),
    st.dictionaries(
        st.sampled_from(["seed", "env", "kwargs", "kwargs.a", "kwargs.a.b", "kwargs..", "x"])
        | st.text(max_size=6),
        tensors(),
        max_size=4,
    ),
)
def test_garbage_settings_raise_only_invalid_argument(
    request: str, given_settings: dict[str, Any]
) -> None:
    with contextlib.suppress(InvalidArgumentError):
        read_settings(given_settings, request)


def test_deep_json_in_a_kwargs_setting_is_an_invalid_argument() -> None:
    deep = pb.Tensor(shape=[])
    deep.strings.array.append('{"a":' + _DEEP + "}")
    with pytest.raises(InvalidArgumentError, match="nested deeper than 100 levels"):
        read_settings({"env": dmenvrpc.pack("CartPole-v1"), "kwargs": deep}, "create_world")


@pytest.mark.parametrize(
    "shape",
    [
        [2**31 - 1, 0],  # no elements, but 2**31 empty lists once a Python value
        [2**20],  # one element broadcast to a million
        [1] * 33,  # more dimensions than numpy takes
    ],
)
def test_a_tiny_setting_with_a_huge_shape_is_refused_at_once(shape: list[int]) -> None:
    tensor = pb.Tensor(shape=shape)
    tensor.int64s.array.append(1)
    settings = {"env": dmenvrpc.pack("CartPole-v1"), "kwargs.x": tensor}
    with pytest.raises(InvalidArgumentError, match=r"dimensions|more than 65536 elements"):
        read_settings(settings, "create_world")
    with pytest.raises(InvalidArgumentError, match=r"dimensions|more than"):
        dmenvrpc.unpack(tensor, limit=dmenvrpc.MAX_SETTING_ELEMENTS)
