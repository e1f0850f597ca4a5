"""Garbage in, only the codec's own error out: random and mutated descriptions, samples and
actions, over the catalog."""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import json
from typing import Any

from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire.errors import InvalidActionError, InvalidArgumentError, ProtocolError
from envwire.spacecodec import check, describe, from_description, from_json, to_json
from tests.budget import examples
from tests.spacecodec.helpers import CATALOG, GARBAGE, wire
from tests.spaces_catalog import SPACES

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
@settings(max_examples=examples(25), deadline=None)
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
@settings(max_examples=examples(25), deadline=None)
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
@settings(max_examples=examples(25), deadline=None)
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
@settings(max_examples=examples(25), deadline=None)
@given(value=JSON)
def test_check_garbage_only_invalid_action(name: str, space: spaces.Space[Any], value: Any) -> None:
    with contextlib.suppress(InvalidActionError):
        check(space, value)
