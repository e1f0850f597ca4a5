"""envwire.spacecodec descriptions: spaces <-> JSON objects, both styles, exact round trips over
the catalog, golden forms, and every malformed description named."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire import spacecodec
from envwire.errors import ConfigError, InvalidArgumentError, ProtocolError
from envwire.spacecodec import describe, from_description
from tests.spacecodec.helpers import CATALOG, assert_same_space, compact, wire
from tests.spaces_catalog import SPACES


def test_public_exports() -> None:
    assert sorted(spacecodec.__all__) == sorted(
        [
            "Arrays",
            "Style",
            "check",
            "checker",
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
