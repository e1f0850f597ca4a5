"""Every JSON decoder of a peer's text, fed JSON nested too deep or a message type that is not a
string: each answers in its own protocol's error, never ``RecursionError`` or ``TypeError``.

Python's own decoder raises ``RecursionError`` near 1,000 levels (a 2 KB message); everything
nested more than :data:`envwire.jsonio.MAX_DEPTH` levels is refused the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire import jsonio
from envwire import messages as m
from envwire.errors import ProtocolError
from envwire.protocols import arena
from envwire.protocols.godot import messages as godot
from envwire.protocols.gymsocket import ClientConnection, Flags, Handshake, ServerConnection
from envwire.protocols.http.http11 import json_response
from envwire.protocols.openenv import (
    BodyError,
    ErrorCode,
    RpcCode,
    WsInvalid,
    dumps,
    parse_client_message,
    parse_reset_body,
    parse_rpc,
    parse_server_message,
    parse_step_body,
)
from tests.budget import examples

#: Just past the limit, and far past where Python's decoder gives up.
DEPTHS = [jsonio.MAX_DEPTH + 1, 5000]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", DEPTHS)
def test_openenv_websocket_messages(depth: int) -> None:
    for text in (nested(depth), '{"type":"step","data":{"action":' + nested(depth) + "}}"):
        event = parse_client_message(text)
        assert isinstance(event, WsInvalid) and event.code is ErrorCode.INVALID_JSON
        assert f"nested deeper than {jsonio.MAX_DEPTH} levels" in event.message


@pytest.mark.parametrize("depth", DEPTHS)
def test_openenv_http_bodies_are_400_as_fastapi_answers(depth: int) -> None:
    for parse, body in (
        (parse_reset_body, '{"seed":' + nested(depth) + "}"),
        (parse_step_body, '{"action":{"x":' + nested(depth) + "}}"),
    ):
        with pytest.raises(BodyError) as caught:
            parse(body.encode())
        assert caught.value.status == 400
        assert caught.value.detail == "There was an error parsing the body"


@pytest.mark.parametrize("depth", DEPTHS)
def test_openenv_json_rpc_is_a_parse_error(depth: int) -> None:
    answer = parse_rpc(nested(depth).encode())
    assert isinstance(answer, dict) and answer["error"]["code"] == RpcCode.PARSE_ERROR == -32700


@pytest.mark.parametrize("depth", DEPTHS)
def test_openenv_client_reads_deep_server_messages_as_protocol_errors(depth: int) -> None:
    with pytest.raises(ProtocolError, match="nested deeper"):
        parse_server_message('{"type":"observation","data":{"o":' + nested(depth) + "}}")


@pytest.mark.parametrize(
    "kind", [["step"], {"a": 1}, 3, None, True, [["reset"]], {"type": "reset"}]
)
def test_openenv_a_type_that_is_not_a_string_is_an_unknown_type(kind: Any) -> None:
    event = parse_client_message(json.dumps({"type": kind, "data": {}}))
    assert isinstance(event, WsInvalid) and event.code is ErrorCode.UNKNOWN_TYPE
    assert event.message == f"Unknown message type: {kind}"  # openenv-core's words


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_openenv_http_bodies_raise_only_body_errors(body: bytes) -> None:
    for parse in (parse_reset_body, parse_step_body):
        error = _raised(parse, body)
        if error is not None:
            assert isinstance(error, BodyError), repr(error)
            assert error.status in (400, 422)
            json.dumps(error.detail)  # the detail can always be sent


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_openenv_server_messages_raise_only_protocol_errors(text: bytes | str) -> None:
    error = _raised(parse_server_message, text)
    assert error is None or type(error) is ProtocolError, repr(error)


def _raised(function: Callable[[Any], Any], argument: Any) -> Exception | None:
    """What ``function(argument)`` raised, if anything."""
    try:
        function(argument)
    except Exception as exc:
        return exc
    return None


@pytest.mark.parametrize("depth", DEPTHS)
def test_arena_bodies(depth: int) -> None:
    body = ('{"agent":"a","actions":' + nested(depth) + "}").encode()
    with pytest.raises(arena.MalformedRequestError, match="nested deeper"):
        arena.decode_body(body, "application/json", 10**6)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize(
    ("decode", "frame"),
    [
        (godot.decode_command, '{"cmd":"step","action":%s}'),
        (godot.decode_reply, '{"observation":%s,"reward":0,"done":false}'),
    ],
)
def test_godot_frames(decode: Callable[[str], Any], frame: str, depth: int) -> None:
    with pytest.raises(ProtocolError, match="nested deeper"):
        decode(frame % nested(depth))


@pytest.mark.parametrize("depth", DEPTHS)
def test_gym_socket_server_actions_and_options(depth: int) -> None:
    server = ServerConnection()
    server.receive_data(b"\x08" + _field(b"CartPole-v1") + _field(nested(depth).encode()))
    with pytest.raises(ProtocolError, match="nested deeper"):
        server.next_event()


@pytest.mark.parametrize("depth", DEPTHS)
def test_gym_socket_client_reads_deep_infos_as_protocol_errors(depth: int) -> None:
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    client, server = ClientConnection(Flags(0)), ServerConnection()
    server.receive_data(client.send_handshake("CartPole-v1"))
    assert isinstance(server.next_event(), Handshake)
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for side in (client, server):
        side.set_spaces(spaces.Discrete(2), box)
    client.send_request(m.Step(np.int64(1)))
    server.receive_data(b"\x01\x00" + _field(b"1"))
    server.next_event()
    reply = server.send_reply(m.StepReply(np.zeros(2, np.float32), 0.0, False, False, {}))
    assert reply.endswith(_field(b"{}"))
    client.receive_data(reply[:-6] + _field(('{"x":' + nested(depth) + "}").encode()))
    with pytest.raises(ProtocolError, match="nested deeper"):
        client.next_event()
    with pytest.raises(ValueError, match="nested deeper"):
        jsonio.loads_info(nested(depth))


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(4, "little") + data


# -- lone surrogates: what the peer sent comes back as the escape it came in as -------------


def test_a_lone_surrogate_is_written_back_as_its_escape() -> None:
    text = parse_client_message('{"type":"step","data":{"message":"a\\ud800b"}}')
    echoed = dumps({"echoed": text.data["message"]})  # type: ignore[union-attr]
    assert json.loads(json_response(200, echoed).body) == {"echoed": "a\ud800b"}
    assert jsonio.utf8('"\udfff"') == b'"\\udfff"'
