"""The sans-IO OpenEnv codec: message parsing, bodies, JSON-RPC; garbage only ever becomes the
protocol's own errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envwire.errors import CapacityError, ProtocolError
from envwire.protocols.openenv import (
    BodyError,
    ErrorCode,
    RpcCode,
    RpcRequest,
    WsClose,
    WsInvalid,
    WsMcp,
    WsReset,
    WsSample,
    WsSpaces,
    WsState,
    WsStep,
    error_data,
    jsonable,
    message,
    parse_client_message,
    parse_reset_body,
    parse_rpc,
    parse_server_message,
    parse_step_body,
    rpc_error,
    step_data,
)


def test_client_messages() -> None:
    assert parse_client_message('{"type":"reset"}') == WsReset({})
    assert parse_client_message('{"type":"reset","data":{"seed":1}}') == WsReset({"seed": 1})
    assert parse_client_message('{"type":"step","data":{"a":1}}') == WsStep({"a": 1})
    assert parse_client_message('{"type":"state"}') == WsState()
    assert parse_client_message(b'{"type":"close"}') == WsClose()
    assert parse_client_message('{"type":"mcp","data":{}}') == WsMcp({})
    assert parse_client_message('{"type":"spaces"}') == WsSpaces()
    assert parse_client_message('{"type":"sample"}') == WsSample()


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", ErrorCode.INVALID_JSON),
        ("{", ErrorCode.INVALID_JSON),
        ("[]", ErrorCode.VALIDATION_ERROR),
        ('{"type":"step"}', ErrorCode.VALIDATION_ERROR),
        ('{"type":"step","data":[]}', ErrorCode.VALIDATION_ERROR),
        ('{"type":"reset","data":1}', ErrorCode.VALIDATION_ERROR),
        ('{"type":"reset","x":1}', ErrorCode.VALIDATION_ERROR),
        ('{"type":"state","data":{}}', ErrorCode.VALIDATION_ERROR),
        ('{"type":"jump"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type":3}', ErrorCode.UNKNOWN_TYPE),
        ("{}", ErrorCode.UNKNOWN_TYPE),
    ],
)
def test_malformed_client_messages(text: str, code: ErrorCode) -> None:
    event = parse_client_message(text)
    assert isinstance(event, WsInvalid) and event.code is code
    json.dumps(event.errors)  # error lists are JSON-safe


@given(st.one_of(st.text(), st.binary()))
def test_garbage_is_only_ever_an_invalid_event(data: str | bytes) -> None:
    event = parse_client_message(data)
    assert isinstance(
        event, WsInvalid | WsReset | WsStep | WsState | WsClose | WsMcp | WsSpaces | WsSample
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_value_parses_without_raising(value: object) -> None:
    parse_client_message(json.dumps(value))
    result = parse_rpc(json.dumps(value))
    assert isinstance(result, RpcRequest) or result["jsonrpc"] == "2.0"


def test_the_lean_step_decoder_takes_only_plain_steps() -> None:
    assert step_data('{"type":"step","data":{"a":[1,{"b":null}]}}') == {"a": [1, {"b": None}]}
    assert step_data('{"data":{"a":1},"type":"step"}') == {"a": 1}
    deep = '{"type":"step","data":{"a":' + "[" * 100 + "]" * 100 + "}}"
    for text in (
        ' {"type":"step","data":{}}',  # whitespace: the general parser's
        '{"type":"step","data":{}}\n',
        "\ufeff" + '{"type":"step","data":{}}',
        '{"type":"step","data":[]}',
        '{"type":"step","data":{},"x":1}',
        '{"type":"reset","data":{}}',
        '{"type":"step","data":{}}{"type":"step","data":{}}',
        '{"type":"step","data":{"a":NaN',
        deep,
    ):
        assert step_data(text) is None, text
    assert parse_client_message(deep).code is ErrorCode.INVALID_JSON  # type: ignore[union-attr]


_STEPS = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=8,
    ),
    max_size=3,
)


@given(st.one_of(st.text(), _STEPS.map(lambda d: json.dumps({"type": "step", "data": d}))))
def test_the_lean_step_decoder_agrees_with_the_general_parser(text: str) -> None:
    data = step_data(text)
    if data is not None:
        assert parse_client_message(text) == WsStep(data)


@given(_STEPS)
def test_every_compact_step_takes_the_lean_decoder(data: dict[str, object]) -> None:
    text = json.dumps({"type": "step", "data": data}, separators=(",", ":"))
    decoded = step_data(text)
    assert decoded is not None
    assert json.dumps(decoded) == json.dumps(data)  # as text: NaN is not NaN


def test_server_messages() -> None:
    assert json.loads(message("state", {"step_count": 1})) == {
        "type": "state",
        "data": {"step_count": 1},
    }
    parsed = parse_server_message('{"type":"observation","data":{"reward":null}}')
    assert parsed.type == "observation" and parsed.data == {"reward": None}
    for bad in ("nope", "[]", '{"data":{}}', '{"type":"x","data":3}'):
        with pytest.raises(ProtocolError):
            parse_server_message(bad)
    data = error_data(CapacityError("full"))
    assert data == {
        "message": "full",
        "code": "CAPACITY_REACHED",
        "envwire_code": "capacity_reached",
    }


def test_bodies() -> None:
    assert parse_reset_body(b"").model_dump(exclude_unset=True) == {}
    assert parse_reset_body(b'{"seed":0,"k":1}').model_dump(exclude_unset=True) == {
        "seed": 0,
        "k": 1,
    }
    step = parse_step_body(b'{"action":{"a":1},"timeout_s":2}')
    assert step.action == {"a": 1} and step.timeout_s == 2
    with pytest.raises(BodyError) as missing:
        parse_step_body(b"")
    assert missing.value.detail == [
        {"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}
    ]
    with pytest.raises(BodyError) as broken:
        parse_step_body(b'{"action": ')
    assert broken.value.detail[0]["type"] == "json_invalid"
    with pytest.raises(BodyError):
        parse_reset_body(b'{"episode_id": "' + b"x" * 300 + b'"}')


def test_json_rpc() -> None:
    request = parse_rpc('{"jsonrpc":"2.0","method":"tools/list","id":1}')
    assert request == RpcRequest("tools/list", {}, 1, False)
    note = parse_rpc('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(note, RpcRequest) and note.notification
    assert parse_rpc("{") == rpc_error(None, RpcCode.PARSE_ERROR)
    invalid = parse_rpc('{"jsonrpc":"1.0","method":"x","id":"a"}')
    assert isinstance(invalid, dict) and invalid["id"] == "a"
    assert invalid["error"]["code"] == -32600 and invalid["error"]["message"].startswith(
        "Invalid request"
    )


def test_jsonable() -> None:
    value = {
        "n": np.int64(3),
        "f": np.float32(0.5),
        "a": np.arange(3, dtype=np.uint8),
        "t": (1, "x"),
        "o": object,
    }
    out = jsonable(value)
    assert out["n"] == 3 and out["f"] == 0.5 and out["t"] == [1, "x"]
    assert out["a"] == {"__ndarray__": "AAEC", "dtype": "uint8", "shape": [3]}
    assert jsonable(value, "list")["a"] == [0, 1, 2]
    assert isinstance(out["o"], str)
    json.dumps(out)
