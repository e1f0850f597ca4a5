"""envwire.spacecodec samples: samples <-> JSON, exact round trips over the catalog (both array
forms), lenient readings, and every malformed sample named."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given
from hypothesis import strategies as st

from envwire import spacecodec
from envwire.errors import InvalidArgumentError
from envwire.spacecodec import check, from_json, to_json
from tests.spacecodec.helpers import CATALOG, FAST, wire
from tests.spaces_catalog import assert_same


@CATALOG
@FAST
@given(seed=st.integers(0, 2**32 - 1), arrays=st.sampled_from(["list", "base64"]))
def test_sample_round_trip_is_exact(
    name: str, space: spaces.Space[Any], seed: int, arrays: spacecodec.Arrays
) -> None:
    space.seed(seed)
    sample = space.sample()
    decoded = from_json(space, wire(to_json(space, sample, arrays=arrays)))
    assert_same(sample, decoded)
    check(space, decoded, what="observation")


@CATALOG
def test_from_json_reads_both_array_forms_of_one_sample(
    name: str, space: spaces.Space[Any]
) -> None:
    space.seed(0)
    sample = space.sample()
    as_list = from_json(space, wire(to_json(space, sample)))
    as_base64 = from_json(space, wire(to_json(space, sample, arrays="base64")))
    assert_same(as_list, as_base64)


@pytest.mark.parametrize(
    ("space", "sample"),
    [
        (spaces.Discrete(3, start=1), np.int64(2)),
        (spaces.Box(-1.0, 1.0, (2, 2)), np.array([[0.1, -0.2], [0.3, 1.0]], np.float32)),
        (spaces.MultiBinary([2, 2]), np.array([[0, 1], [1, 1]], np.int8)),
        (spaces.MultiDiscrete([3, 4]), np.array([2, 3])),
        (spaces.Text(4), "ab"),
        (spaces.OneOf((spaces.Discrete(2), spaces.Text(3))), (np.int64(1), "xyz")),
    ],
)
def test_from_json_accepts_gymnasium_to_jsonable(space: spaces.Space[Any], sample: Any) -> None:
    jsonable = wire(space.to_jsonable([sample])[0])
    assert_same(from_json(space, jsonable), sample)


@pytest.mark.parametrize(
    ("space", "value", "expected"),
    [
        (spaces.Discrete(3), 1.0, np.int64(1)),
        (spaces.Discrete(3, dtype=np.int32), 2, np.int32(2)),
        (spaces.Box(-1.0, 1.0, (2, 2)), [0, 1, 0.5, -1], np.array([[0, 1], [0.5, -1]], np.float32)),
        (spaces.Box(-2.0, 2.0, (1,)), 0.5, np.array([0.5], np.float32)),
        (spaces.Box(0, 9, (2,), np.int64), [1.0, 2.0], np.array([1, 2])),
        (
            spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))),
            [1, 2],
            (np.int64(1), np.int64(2)),
        ),
        (spaces.Sequence(spaces.Box(0.0, 1.0, (2,)), stack=True), [], np.zeros((0, 2), np.float32)),
        (spaces.Graph(spaces.Discrete(3), None), {"nodes": [0, 2]}, None),
    ],
)
def test_from_json_lenient_forms(space: spaces.Space[Any], value: Any, expected: Any) -> None:
    decoded = from_json(space, value)
    if expected is None:  # the Graph case
        assert_same(decoded, spaces.GraphInstance(np.array([0, 2]), None, None))
    else:
        assert_same(decoded, expected)


def test_base64_form() -> None:
    space = spaces.Box(0, 255, (2, 3), dtype=np.uint8)
    sample = np.arange(6, dtype=np.uint8).reshape(2, 3)
    encoded = to_json(space, sample, arrays="base64")
    assert encoded == {
        "__ndarray__": base64.b64encode(bytes(range(6))).decode(),
        "dtype": "uint8",
        "shape": [2, 3],
    }
    wide = to_json(
        spaces.Box(0.0, 1.0, (2,), dtype=np.float64), np.array([0.5, 1.0]), arrays="base64"
    )
    assert from_json(spaces.Box(0.0, 1.0, (2,)), wide).dtype == np.float32  # cast to the space


def test_non_finite_floats_travel_as_json_extensions() -> None:
    space = spaces.Box(-np.inf, np.inf, (3,), dtype=np.float64)
    sample = np.array([np.nan, np.inf, -np.inf])
    text = json.dumps(to_json(space, sample))
    assert text == "[NaN, Infinity, -Infinity]"
    assert_same(from_json(space, json.loads(text)), sample)


def test_float32_values_are_bit_exact_through_lists() -> None:
    space = spaces.Box(-np.inf, np.inf, (4,))
    sample = np.array([0.1, 1 / 3, np.finfo(np.float32).tiny, np.finfo(np.float32).max], np.float32)
    assert_same(from_json(space, wire(to_json(space, sample))), sample)


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (spaces.Box(-1.0, 1.0, (2,)), [1, 2, 3], "expected an array of shape (2,), got shape (3,)"),
        (spaces.Box(-1.0, 1.0, (2,)), ["a", "b"], "expected numbers"),
        (spaces.Box(-1.0, 1.0, (2,)), [[1], [2, 3]], "rectangular nested list"),
        (spaces.Box(-1.0, 1.0, (2,)), [True, False], "numbers for float32"),
        (spaces.Box(-1.0, 1.0, (1,)), [1e39], "within the float32 range"),
        (spaces.Box(0, 9, (1,), np.uint8), [300], "within uint8 [0, 255]"),
        (spaces.Box(0, 9, (1,), np.int32), [1.5], "integers for int32"),
        (spaces.Discrete(3), 1.5, "expected an integer (int64), got 1.5"),
        (spaces.Discrete(3), True, "expected an integer (int64), got true"),
        (spaces.Discrete(3), "1", "expected an integer"),
        (spaces.Discrete(3, dtype=np.uint8), 300, "within uint8"),
        (spaces.Tuple((spaces.Discrete(2),)), [1, 2], "expected a list of 1 elements"),
        (
            spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(2)}),
            {"a": 1, "c": 0},
            "missing ['b'], unexpected ['c']",
        ),
        (
            spaces.Dict({"a": spaces.Tuple((spaces.Box(0.0, 1.0, (2,)),))}),
            {"a": [[1]]},
            "(at ['a'][0])",
        ),
        (spaces.Text(3), 5, "expected a string"),
        (spaces.OneOf((spaces.Discrete(2),)), [3, 0], "an index in [0, 1)"),
        (spaces.Graph(spaces.Discrete(2), None), {"nodes": [0], "edges": [0]}, "both null"),
        (
            spaces.Box(0, 1, (2,), np.uint8),
            {"__ndarray__": "AAAA", "dtype": "uint8", "shape": [2]},
            "needs 2 bytes, got 3",
        ),
        (
            spaces.Box(0, 1, (2,), np.uint8),
            {"__ndarray__": "!!", "dtype": "uint8", "shape": [2]},
            "valid base64",
        ),
        (
            spaces.Box(0, 1, (2,), np.uint8),
            {"__ndarray__": "AAA=", "dtype": "complex64", "shape": [2]},
            "unsupported dtype",
        ),
    ],
)
def test_from_json_errors(space: spaces.Space[Any], value: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        from_json(space, value)
    assert message in str(info.value)


def test_to_json_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="expected a tuple of 2 elements"):
        to_json(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), (1,))
    with pytest.raises(InvalidArgumentError, match="expected a string"):
        to_json(spaces.Text(3), 7)
    with pytest.raises(InvalidArgumentError, match="array encoding"):
        to_json(spaces.Discrete(2), 1, arrays="hex")  # type: ignore[arg-type]
