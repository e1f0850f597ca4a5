"""Tests for envwire.spacecodec: descriptions, sample encodings and action checks."""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envwire import spacecodec
from envwire.errors import (
    ConfigError,
    InvalidActionError,
    InvalidArgumentError,
    ProtocolError,
)
from envwire.spacecodec import check, describe, from_description, from_json, to_json
from tests.spaces_catalog import IDS, SPACES, assert_same

CATALOG = pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GARBAGE = settings(max_examples=60, deadline=None)


def wire(value: Any, *, allow_nan: bool = True) -> Any:
    """What the peer sees: real JSON text, parsed back."""
    return json.loads(json.dumps(value, allow_nan=allow_nan))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def assert_same_space(a: spaces.Space[Any], b: spaces.Space[Any]) -> None:
    """Gymnasium's == plus what it does not compare (Box uses allclose, ignores bound flags)."""
    assert a == b
    assert type(a) is type(b)
    if isinstance(a, spaces.Box):
        assert isinstance(b, spaces.Box)
        for field in ("low", "high", "bounded_below", "bounded_above"):
            # np.asarray: Gymnasium keeps a 0-d Box's flags as np.bool_ or a 0-d array,
            # depending on whether it was built from scalars or from arrays.
            assert_same(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)), field)
    if isinstance(a, spaces.Text):
        assert isinstance(b, spaces.Text)
        assert a.character_list == b.character_list
    children = {
        spaces.Tuple: lambda s: list(s.spaces),
        spaces.OneOf: lambda s: list(s.spaces),
        spaces.Dict: lambda s: list(s.spaces.values()),
        spaces.Sequence: lambda s: [s.feature_space],
        spaces.Graph: lambda s: [s.node_space] + ([s.edge_space] if s.edge_space else []),
    }.get(type(a), lambda s: [])
    if isinstance(a, spaces.Dict):
        assert list(a.spaces) == list(b.spaces)
    for x, y in zip(children(a), children(b), strict=True):
        assert_same_space(x, y)


def test_public_exports() -> None:
    assert sorted(spacecodec.__all__) == sorted(
        [
            "Arrays",
            "Style",
            "check",
            "describe",
            "from_description",
            "from_json",
            "is_uint8_array_space",
            "to_json",
        ]
    )
    for name in spacecodec.__all__:
        assert hasattr(spacecodec, name)


def test_catalog_covers_every_space_type() -> None:
    kinds = {type(space) for _, space in SPACES}
    expected = {
        spaces.Box,
        spaces.Discrete,
        spaces.MultiBinary,
        spaces.MultiDiscrete,
        spaces.Tuple,
        spaces.Dict,
        spaces.Text,
        spaces.Sequence,
        spaces.Graph,
        spaces.OneOf,
    }
    assert expected <= kinds


# ---------------------------------------------------------------------------------------------
# descriptions


@CATALOG
def test_describe_round_trip_is_exact(name: str, space: spaces.Space[Any]) -> None:
    desc = describe(space)
    text = json.dumps(desc, allow_nan=False)
    rebuilt = from_description(json.loads(text))
    assert_same_space(rebuilt, space)
    assert json.dumps(describe(rebuilt), allow_nan=False) == text


@CATALOG
def test_legacy_description_is_json_and_readable(name: str, space: spaces.Space[Any]) -> None:
    legacy = wire(describe(space, style="gym-socket"), allow_nan=False)
    rebuilt = from_description(legacy)
    assert type(rebuilt) is type(space)


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (spaces.Discrete(5), '{"type":"Discrete","n":5}'),
        (spaces.Discrete(3, start=2), '{"type":"Discrete","n":3}'),
        (spaces.MultiBinary(5), '{"type":"MultiBinary","n":5}'),
        (spaces.MultiBinary([2, 3]), '{"type":"MultiBinary","n":[2,3]}'),
        (
            spaces.Box(-1.0, 1.0, (2, 3)),
            '{"type":"Box","shape":[2,3],"low":[-1.0,-1.0,-1.0,-1.0,-1.0,-1.0],'
            '"high":[1.0,1.0,1.0,1.0,1.0,1.0]}',
        ),
        (
            spaces.Box(-np.inf, np.inf, (2,)),
            '{"type":"Box","shape":[2],"low":[-1e+30,-1e+30],"high":[1e+30,1e+30]}',
        ),
        (
            spaces.Box(np.array([-np.inf, 0.0]), np.array([1.0, np.inf]), dtype=np.float64),
            '{"type":"Box","shape":[2],"low":[-1e+30,0.0],"high":[1.0,1e+30]}',
        ),
        (
            spaces.Box(-np.inf, 5, (2,), dtype=np.int32),
            '{"type":"Box","shape":[2],"low":[-1e+30,-1e+30],"high":[5.0,5.0]}',
        ),
        (
            spaces.MultiDiscrete([5, 2, 2]),
            '{"type":"MultiDiscrete","low":[0,0,0],"high":[4,1,1]}',
        ),
        (
            spaces.MultiDiscrete([3, 4], start=[1, -2]),
            '{"type":"MultiDiscrete","low":[1,-2],"high":[3,1]}',
        ),
        (
            spaces.Tuple((spaces.Discrete(5), spaces.MultiBinary(2))),
            '{"type":"Tuple","subspaces":[{"type":"Discrete","n":5},{"type":"MultiBinary","n":2}]}',
        ),
    ],
)
def test_legacy_golden(space: spaces.Space[Any], expected: str) -> None:
    assert compact(describe(space, style="gym-socket")) == expected


def test_legacy_falls_back_to_full_description_for_other_types() -> None:
    space = spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Text(3)})
    assert describe(space, style="gym-socket") == describe(space)
    nested = spaces.Tuple((spaces.Discrete(2), space))
    legacy = describe(nested, style="gym-socket")
    assert legacy["subspaces"] == [{"type": "Discrete", "n": 2}, describe(space)]


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (
            spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8),
            {"type": "Box", "shape": [84, 84, 4], "dtype": "uint8", "low": 0, "high": 255},
        ),
        (
            spaces.Box(-np.inf, np.inf, (3,)),
            {"type": "Box", "shape": [3], "dtype": "float32", "low": "-inf", "high": "inf"},
        ),
        (
            spaces.Box(np.array([-np.inf, 0]), np.array([5, np.inf]), dtype=np.int16),
            {"type": "Box", "shape": [2], "dtype": "int16", "low": ["-inf", 0], "high": [5, "inf"]},
        ),
        (
            spaces.Discrete(3, start=-1),
            {"type": "Discrete", "n": 3, "start": -1, "dtype": "int64"},
        ),
        (
            spaces.MultiDiscrete([[2, 3], [4, 5]], dtype=np.int32),
            {
                "type": "MultiDiscrete",
                "nvec": [[2, 3], [4, 5]],
                "start": [[0, 0], [0, 0]],
                "dtype": "int32",
            },
        ),
        (spaces.MultiBinary([4]), {"type": "MultiBinary", "n": [4]}),
        (
            spaces.Text(min_length=0, max_length=4, charset="cba"),
            {"type": "Text", "min_length": 0, "max_length": 4, "charset": "cba"},
        ),
        (
            spaces.Sequence(spaces.Discrete(2), stack=True),
            {
                "type": "Sequence",
                "space": {"type": "Discrete", "n": 2, "start": 0, "dtype": "int64"},
                "stack": True,
            },
        ),
        (
            spaces.Graph(spaces.Discrete(2), None),
            {
                "type": "Graph",
                "node_space": {"type": "Discrete", "n": 2, "start": 0, "dtype": "int64"},
                "edge_space": None,
            },
        ),
    ],
)
def test_envwire_golden(space: spaces.Space[Any], expected: dict[str, Any]) -> None:
    assert describe(space) == expected


def test_dict_description_keeps_key_order() -> None:
    space = spaces.Dict([("zeta", spaces.Discrete(2)), ("alpha", spaces.Discrete(3))])
    desc = describe(space)
    assert list(desc["spaces"]) == ["zeta", "alpha"]
    assert list(from_description(wire(desc)).spaces) == ["zeta", "alpha"]  # type: ignore[attr-defined]


def test_legacy_forms_are_read() -> None:
    box = from_description({"type": "Box", "shape": [2], "low": [-1e30, 0], "high": [1e30, 1]})
    assert isinstance(box, spaces.Box)
    assert box.dtype == np.float32
    assert box.low[0] == np.float32(-1e30)  # kept as given, not turned into -inf
    assert box.is_bounded()
    multi = from_description({"type": "MultiDiscrete", "low": [0, 1, -1], "high": [4, 1, 2]})
    assert multi == spaces.MultiDiscrete([5, 1, 4], start=[0, 1, -1])
    discrete = from_description({"type": "Discrete", "n": 4})
    assert discrete == spaces.Discrete(4)
    text = from_description({"type": "Text", "max_length": 3})
    assert text == spaces.Text(3)


def test_box_bounds_may_be_nested_lists() -> None:
    desc = {"type": "Box", "shape": [2, 2], "dtype": "float64", "low": [[0, 1], [2, 3]], "high": 9}
    box = from_description(desc)
    assert isinstance(box, spaces.Box)
    assert box.low.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_int_box_keeps_unbounded_flags() -> None:
    space = spaces.Box(np.array([-np.inf, -3.0]), 4, dtype=np.int64)
    rebuilt = from_description(wire(describe(space)))
    assert isinstance(rebuilt, spaces.Box)
    assert rebuilt.bounded_below.tolist() == [False, True]
    assert rebuilt.low.tolist() == [np.iinfo(np.int64).min, -3]


def test_describe_subclass_as_base() -> None:
    class MyBox(spaces.Box):  # type: ignore[type-arg]
        pass

    assert describe(MyBox(0.0, 1.0, (2,)))["type"] == "Box"


def test_describe_unknown_space_is_config_error() -> None:
    class Weird(spaces.Space[int]):
        def contains(self, x: Any) -> bool:
            return False

    with pytest.raises(ConfigError, match="Weird"):
        describe(Weird())
    with pytest.raises(ConfigError, match="Weird"):
        describe(spaces.Tuple((spaces.Discrete(2), Weird())))


def test_describe_rejects_non_string_dict_keys() -> None:
    with pytest.raises(ConfigError, match="non-string key 1"):
        describe(spaces.Dict({1: spaces.Discrete(2)}))  # type: ignore[dict-item]


def test_describe_rejects_unknown_style() -> None:
    with pytest.raises(InvalidArgumentError, match="style"):
        describe(spaces.Discrete(2), style="xml")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("desc", "message"),
    [
        ({"type": "Discrete", "n": "x"}, "Discrete description needs integer 'n' > 0, got 'x'"),
        ({"type": "Discrete", "n": 0}, "Discrete description needs integer 'n' > 0, got 0"),
        ({"type": "Discrete", "n": True}, "needs integer 'n' > 0, got true"),
        ({"type": "Discrete", "n": 300, "dtype": "uint8"}, "'n' within uint8"),
        ({"type": "Discrete", "n": 3, "dtype": "float32"}, "needs 'dtype' one of int8"),
        ({"n": 3}, "unknown space type null"),
        ({"type": "Spam"}, "unknown space type 'Spam'; known: Box, Discrete"),
        ([1, 2], "must be a JSON object"),
        ({"type": "Box", "low": 0, "high": 1}, "Box description needs 'shape'"),
        ({"type": "Box", "shape": [2], "low": 2, "high": 1}, "'low' <= 'high' everywhere"),
        ({"type": "Box", "shape": [2], "low": [0, 1, 2], "high": 1}, "flat list of 2 numbers"),
        ({"type": "Box", "shape": [2], "low": [[0], [1, 2]], "high": 1}, "flat list of 2"),
        ({"type": "Box", "shape": [1], "low": "nan", "high": 1}, "'low' of numbers, 'inf'"),
        ({"type": "Box", "shape": [1], "dtype": "int8", "low": 1.5, "high": 3}, "of integers"),
        ({"type": "Box", "shape": [1], "dtype": "uint8", "low": "-inf", "high": 3}, "uint8"),
        ({"type": "Box", "shape": [1], "dtype": "int8", "low": -200, "high": 3}, "int8 [-128"),
        ({"type": "Box", "shape": [1], "low": 0, "high": 1e39}, "within the float32 range"),
        ({"type": "Box", "shape": [-1], "low": 0, "high": 1}, "non-negative integers"),
        ({"type": "Box", "shape": [1 << 20, 1 << 20], "low": 0, "high": 1}, "at most"),
        ({"type": "MultiDiscrete", "nvec": [[1, 2], [3]]}, "nested list of integers"),
        ({"type": "MultiDiscrete", "nvec": [2, 0]}, "counts > 0"),
        ({"type": "MultiDiscrete", "nvec": [2, 3], "start": [1]}, "'start' of the shape"),
        ({"type": "MultiDiscrete", "low": [0, 5], "high": [1, 2]}, "counts > 0"),
        ({"type": "MultiBinary", "n": [2, 0]}, "'n' as an integer > 0 or a list"),
        ({"type": "Tuple", "subspaces": {}}, "'subspaces' as a list"),
        ({"type": "Dict"}, "Dict description needs 'spaces' as an object"),
        ({"type": "Text", "max_length": 2, "min_length": 3}, "'min_length' <= 'max_length'"),
        ({"type": "Text", "max_length": 2, "charset": ["a"]}, "'charset' as a string"),
        ({"type": "Sequence", "space": {"type": "Discrete", "n": 2}, "stack": 1}, "'stack'"),
        ({"type": "Graph", "node_space": None}, "'node_space' as a space description"),
        ({"type": "OneOf", "spaces": []}, "non-empty list"),
        (
            {"type": "Tuple", "subspaces": [{"type": "Discrete", "n": 2}, {"type": "Discrete"}]},
            "needs integer 'n' > 0, got nothing (at subspaces[1])",
        ),
        (
            {"type": "Dict", "spaces": {"a": {"type": "Sequence", "space": {"type": "Box"}}}},
            "(at spaces['a'].space)",
        ),
    ],
)
def test_from_description_errors(desc: Any, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        from_description(desc)
    assert message in str(info.value)


def test_from_description_deep_nesting_is_protocol_error() -> None:
    desc: dict[str, Any] = {"type": "Discrete", "n": 2}
    for _ in range(5000):
        desc = {"type": "Sequence", "space": desc}
    with pytest.raises(ProtocolError):
        from_description(desc)


# ---------------------------------------------------------------------------------------------
# samples


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


# ---------------------------------------------------------------------------------------------
# garbage in: only the codec's own error comes out

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-300, 300)
    | st.sampled_from([2**31, 2**63, -(2**63) - 1, 2**64, 10**400])
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["inf", "-inf", "float32", "uint8", "int64", "bool"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    [
        "shape",
        "dtype",
        "low",
        "high",
        "n",
        "start",
        "nvec",
        "subspaces",
        "spaces",
        "space",
        "stack",
        "node_space",
        "edge_space",
        "min_length",
        "max_length",
        "charset",
    ]
)
SPACE_NAMES = st.sampled_from(
    [
        "Box",
        "Discrete",
        "MultiBinary",
        "MultiDiscrete",
        "Tuple",
        "Dict",
        "Text",
        "Sequence",
        "Graph",
        "OneOf",
    ]
)


@st.composite
def descriptions(draw: st.DrawFn) -> Any:
    """Garbage near real descriptions: a known type with garbage or half-valid fields."""
    fields = draw(
        st.dictionaries(FIELDS, JSON | SPACE_NAMES.map(lambda t: {"type": t}), max_size=4)
    )
    return {"type": draw(SPACE_NAMES), **fields}


@GARBAGE
@given(desc=JSON | descriptions())
def test_from_description_garbage_only_protocol_error(desc: Any) -> None:
    try:
        space = from_description(desc)
    except ProtocolError:
        return
    json.dumps(describe(space), allow_nan=False)  # whatever it built, it can describe


ARRAY_OBJECTS = st.fixed_dictionaries(
    {
        "__ndarray__": st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode()) | JSON,
        "dtype": st.sampled_from(["uint8", "float32", "int64", "bool", "float16", "x"]) | JSON,
        "shape": st.lists(st.integers(-1, 4), max_size=3) | JSON,
    }
)


@CATALOG
@settings(max_examples=25, deadline=None)
@given(value=JSON | ARRAY_OBJECTS | st.lists(ARRAY_OBJECTS | JSON, max_size=3))
def test_from_json_garbage_only_invalid_argument(
    name: str, space: spaces.Space[Any], value: Any
) -> None:
    with contextlib.suppress(InvalidArgumentError):
        from_json(space, value)


def _paths(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += _paths(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree[:6]):
            found += _paths(value, (*path, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, tree: Any) -> Any:
    """``tree`` (valid JSON) with one to three nodes replaced by garbage."""
    tree = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(tree)))
        if not path:
            return draw(JSON)
        parent = tree
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(JSON)
    return tree


@functools.cache
def _wire_forms(name: str) -> tuple[Any, ...]:
    """Descriptions (both styles) and sample encodings (both forms) of a catalog space."""
    space = dict(SPACES)[name]
    space.seed(0)
    sample = space.sample()
    return (
        wire(describe(space), allow_nan=False),
        wire(describe(space, style="gym-socket"), allow_nan=False),
        wire(to_json(space, sample)),
        wire(to_json(space, sample, arrays="base64")),
    )


@CATALOG
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_mutated_descriptions_only_protocol_error(
    name: str, space: spaces.Space[Any], data: st.DataObject
) -> None:
    envwire_form, legacy_form, _, _ = _wire_forms(name)
    desc = data.draw(mutated(envwire_form) | mutated(legacy_form))
    try:
        rebuilt = from_description(desc)
    except ProtocolError:
        return
    json.dumps(describe(rebuilt), allow_nan=False)


@CATALOG
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_mutated_samples_only_codec_errors(
    name: str, space: spaces.Space[Any], data: st.DataObject
) -> None:
    _, _, as_list, as_base64 = _wire_forms(name)
    value = data.draw(mutated(as_list) | mutated(as_base64))
    try:
        decoded = from_json(space, value)
    except InvalidArgumentError:
        return
    with contextlib.suppress(InvalidActionError):
        check(space, decoded)


@CATALOG
@settings(max_examples=25, deadline=None)
@given(value=JSON)
def test_check_garbage_only_invalid_action(name: str, space: spaces.Space[Any], value: Any) -> None:
    with contextlib.suppress(InvalidActionError):
        check(space, value)


# ---------------------------------------------------------------------------------------------
# check


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (spaces.Discrete(2), 5, "action 5 is not in Discrete(2)"),
        (spaces.Discrete(2), np.int64(-1), "action -1 is not in Discrete(2)"),
        (spaces.Discrete(2), "a", "action 'a' is not in Discrete(2)"),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            np.zeros(3, np.float32),
            "action has shape (3,), expected (2,) for Box(-1.0, 1.0, (2,), float32)",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            np.array([2.5, 0], np.float32),
            "action 2.5 is outside [-1, 1] at index 0",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            [0.0, float("nan")],
            "action nan is outside [-1, 1] at index 1",
        ),
        (
            spaces.Box(-1.0, 1.0, (2, 2)),
            np.array([[0, 0], [0, -3]], np.float32),
            "action -3 is outside [-1, 1] at index (1, 1)",
        ),
        (spaces.Box(0, 5, (), np.int32), np.array(7, np.int32), "action 7 is outside [0, 5]"),
        (
            spaces.Box(-1.0, 1.0, (1,)),
            np.array([0.5]),
            "action has dtype float64, which does not cast safely to float32",
        ),
        (
            spaces.Tuple((spaces.Discrete(2), spaces.Box(-1.0, 1.0, (2,)))),
            (1, np.array([0, 7], np.float32)),
            "action[1] 7 is outside [-1, 1] at index 1",
        ),
        (
            spaces.Dict({"a": spaces.Discrete(2)}),
            {"b": 1},
            "action {'b': 1} is not a dict with keys ['a']",
        ),
        (spaces.Dict({"a": spaces.Discrete(2)}), {"a": 4}, "action['a'] 4 is not in Discrete(2)"),
        (spaces.Text(2, charset="ab"), "abc", "action 'abc' is not in Text(1, 2, charset=ab)"),
        (spaces.MultiBinary(2), np.array([0, 2], np.int8), "action [0 2] is not in MultiBinary(2)"),
    ],
)
def test_check_messages(space: spaces.Space[Any], value: Any, message: str) -> None:
    with pytest.raises(InvalidActionError) as info:
        check(space, value)
    assert str(info.value).startswith(message)


def test_check_names_what_and_caps_length() -> None:
    space = spaces.Box(np.arange(500, dtype=np.float32), 1000.0)
    with pytest.raises(InvalidActionError, match=r"^observation has shape"):
        check(space, np.zeros(3, np.float32), what="observation")
    with pytest.raises(InvalidActionError) as info:
        check(spaces.Text(3), "x" * 10_000)
    assert len(str(info.value)) <= 300


@pytest.mark.parametrize(
    ("space", "value"),
    [
        (spaces.Discrete(2), 1),
        (spaces.Discrete(2), np.int64(0)),
        (spaces.Discrete(3, start=5, dtype=np.int32), np.int32(7)),
        (spaces.Box(-1.0, 1.0, (2,)), [0.5, -0.5]),  # no "Casting input x" warning
        (spaces.Box(0, 255, (2,), np.uint8), np.array([0, 255], np.uint8)),
        (spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, (1,)))), [1, [0.5]]),
    ],
)
def test_check_accepts_members(space: spaces.Space[Any], value: Any) -> None:
    check(space, value)


def test_is_uint8_array_space() -> None:
    assert spacecodec.is_uint8_array_space(spaces.Box(0, 255, (2, 2), np.uint8))
    assert not spacecodec.is_uint8_array_space(spaces.Box(0, 255, (2, 2), np.int16))
    assert not spacecodec.is_uint8_array_space(spaces.MultiBinary(3))
