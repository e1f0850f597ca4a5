"""Depth-limited JSON decoding and surrogate-safe encoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envwire import jsonio

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@given(_JSON)
def test_shallow_json_is_decoded_as_json_does(value: object) -> None:
    text = json.dumps(value)
    assert jsonio.loads(text) == json.loads(text)
    assert jsonio.loads(text.encode()) == json.loads(text)


@given(_JSON, st.integers(0, 6))
def test_depth_exceeds_agrees_with_a_recursive_count(value: object, limit: int) -> None:
    assert jsonio.depth_exceeds(value, limit) == (_depth(value) > limit)


@pytest.mark.parametrize("depth", [jsonio.MAX_DEPTH, jsonio.MAX_DEPTH + 1, 5_000, 100_000])
def test_deep_nesting_is_a_decode_error(depth: int) -> None:
    text = _nested(depth)
    if depth <= jsonio.MAX_DEPTH:
        assert _depth(jsonio.loads(text)) == depth
        return
    with pytest.raises(json.JSONDecodeError, match=f"deeper than {jsonio.MAX_DEPTH} levels"):
        jsonio.loads(text)
    with pytest.raises(ValueError, match="deeper than"):
        jsonio.loads(('{"a":' * depth + "1" + "}" * depth).encode())


def test_many_brackets_at_a_shallow_depth_pass() -> None:
    text = json.dumps([[i, {"k": [i]}] for i in range(1000)])
    assert len(jsonio.loads(text)) == 1000


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"message": "[" * 5000})
    assert jsonio.loads(text) == {"message": "[" * 5000}


def test_custom_limit_and_object_hook() -> None:
    with pytest.raises(ValueError, match="deeper than 2 levels"):
        jsonio.loads("[[[1]]]", max_depth=2)
    assert jsonio.loads('{"a": 1}', object_hook=sorted) == ["a"]


def test_lone_surrogates_are_written_back_as_their_escapes() -> None:
    value = jsonio.loads('{"message": "a\\ud800b\\udfff"}')
    encoded = jsonio.utf8(json.dumps(value, ensure_ascii=False))
    assert encoded == b'{"message": "a\\ud800b\\udfff"}'
    assert json.loads(encoded) == value
    assert jsonio.utf8("héllo") == "héllo".encode()


@given(st.text())
def test_utf8_round_trips_any_string_through_json(text: str) -> None:
    encoded = jsonio.utf8(json.dumps({"s": text}, ensure_ascii=False))
    assert json.loads(encoded.decode("utf-8")) == {"s": text}
