"""The gym-socket codec as a client/server pair, and against the seed's exact bytes."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire import messages as m
from envwire.errors import (
    EnvwireError,
    InvalidActionError,
    ProtocolError,
    RemoteError,
    TooLargeError,
)
from envwire.protocols.gymsocket import (
    NEED_DATA,
    ClientConnection,
    Flags,
    Handshake,
    HandshakeReply,
    Invalid,
    ServerConnection,
    Upload,
)
from envwire.protocols.gymsocket.packets import MAX_MONITOR_DIR
from envwire.protocols.gymsocket.server import (
    DEFAULT_MAX_ACTION,
    MAX_ENV_NAME,
    MAX_RESET_OPTIONS,
    MAX_UPLOAD_FIELD,
    MAX_VECTOR_OPTIONS,
)
from tests.budget import examples

CARTPOLE_OBS = spaces.Box(
    np.array([-4.8, -np.inf, -0.42, -np.inf], np.float32),
    np.array([4.8, np.inf, 0.42, np.inf], np.float32),
    dtype=np.float32,
)
ACTION = spaces.Discrete(2)


def s(data: bytes) -> bytes:
    """A length-prefixed field."""
    return struct.pack("<I", len(data)) + data


def server_after_handshake(flags: int = 0, **kwargs: Any) -> ServerConnection:
    server = ServerConnection(**kwargs)
    server.receive_data(bytes([flags]) + s(b"CartPole-v1"))
    assert isinstance(server.next_event(), Handshake)
    server.set_spaces(ACTION, CARTPOLE_OBS)
    return server


def events(conn: Any) -> list[Any]:
    found = []
    while (event := conn.next_event()) is not NEED_DATA:
        found.append(event)
    return found


# -- the seed's bytes, exactly ------------------------------------------------------------------


def test_handshake_bytes() -> None:
    server = ServerConnection()
    server.receive_data(b"\x00" + s(b"CartPole-v1"))
    assert server.next_event() == Handshake(Flags(0), "CartPole-v1")
    assert server.send_handshake_reply("") == b"\x00\x00\x00\x00"
    assert server.send_handshake_reply("no") == s(b"no")


def test_reset_reply_is_a_json_observation() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x00")
    assert server.next_event() == m.Reset()
    obs = np.array([0.5, -1.25, 0.0, 2.0], np.float32)
    assert server.send_reply(m.ResetReply(obs)) == b"\x00" + s(b"[0.5,-1.25,0.0,2.0]")


def test_step_packet_and_reply() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x01" + b"\x00" + s(b"1"))
    event = server.next_event()
    assert isinstance(event, m.Step) and event.action == 1
    reply = server.send_reply(m.StepReply(np.zeros(4, np.float32), 1.0, True, False, {}))
    obs = b"\x00" + s(b"[0.0,0.0,0.0,0.0]")
    assert reply == obs + struct.pack("<d", 1.0) + b"\x01" + s(b"{}")


def test_info_is_never_empty_and_numpy_values_survive() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x01\x00" + s(b"0"))
    server.next_event()
    info = {"n": np.int64(3), "x": np.float32(0.5), "v": np.arange(2)}
    reply = server.send_reply(m.StepReply(np.zeros(4, np.float32), 0.0, False, True, info))
    tail = reply[len(b"\x00" + s(b"[0.0,0.0,0.0,0.0]")) + 9 :]
    assert json.loads(tail[4:]) == {"n": 3, "x": 0.5, "v": [0, 1]}
    assert reply[len(b"\x00" + s(b"[0.0,0.0,0.0,0.0]")) + 8] == 1  # truncated counts as done


def test_uint8_observations_take_the_byte_list_path() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x00")
    server.next_event()
    frame = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    reply = server.send_reply(m.ResetReply(frame))
    body = struct.pack("<4I", 3, 2, 3, 4) + frame.tobytes()
    assert reply == b"\x01" + s(body)


def test_get_space_uses_the_seed_forms() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x02\x00\x02\x01")
    assert events(server) == [m.GetSpace(m.SpaceKind.ACTION), m.GetSpace(m.SpaceKind.OBSERVATION)]
    assert json.loads(server.send_reply(m.SpaceReply(ACTION))[4:]) == {"type": "Discrete", "n": 2}
    box = json.loads(server.send_reply(m.SpaceReply(CARTPOLE_OBS))[4:])
    assert box["type"] == "Box" and box["shape"] == [4]
    assert box["high"][1] == 1e30 and box["low"][3] == -1e30


def test_sample_reply_is_a_json_action() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x03")
    assert server.next_event() == m.SampleAction()
    assert server.send_reply(m.SampleReply(np.int64(1))) == b"\x00" + s(b"1")


def test_monitor_seed_layout_has_no_reply() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x04\x01\x00" + s(b"/tmp/mon"))
    assert server.next_event() == m.Monitor("/tmp/mon", resume=True, force=False, video=True)
    assert server.send_reply(m.MonitorReply("x")) == b""


@pytest.mark.parametrize("how", ["flag", "option"])
def test_monitor_go_client_layout_has_a_video_byte_and_a_reply(how: str) -> None:
    if how == "flag":
        server = server_after_handshake(int(Flags.MONITOR_REPLY))
    else:
        server = server_after_handshake(0, monitor_layout="video")
    server.receive_data(b"\x04\x00\x01\x00" + s(b"mon"))
    assert server.next_event() == m.Monitor("mon", resume=False, force=True, video=False)
    assert server.send_reply(m.MonitorReply("mon")) == s(b"")


def test_render_has_no_reply_and_upload_answers_an_error_string() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x05\x06" + s(b"dir") + s(b"key") + s(b"algo"))
    assert events(server) == [m.Render(), Upload("dir", "key", "algo")]
    assert server.send_reply(m.RenderReply(None)) == b""
    assert server.send_error(RemoteError("gone")) == s(b"gone")


def test_flags_zero_errors_mean_closing() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x01\x00" + s(b"7"))
    event = server.next_event()
    assert isinstance(event, m.Step)
    assert server.send_error(InvalidActionError("action 7 is not in Discrete(2)")) is None


# -- extensions ------------------------------------------------------------------------------


def test_errors_flag_prefixes_a_status_and_carries_the_code() -> None:
    server = server_after_handshake(int(Flags.ERRORS))
    server.receive_data(b"\x01\x00" + s(b"[1, 2]") + b"\x05")
    first, second = events(server)
    assert isinstance(first, Invalid) and isinstance(first.error, InvalidActionError)
    assert server.send_error(first.error) == b"\x01" + s(str(first.error).encode()) + s(
        b"invalid_action"
    )
    assert second == m.Render()
    assert server.send_reply(m.RenderReply(None)) == b"\x00"


def test_unknown_packets_are_reported_and_parsing_goes_on() -> None:
    server = server_after_handshake(int(Flags.ERRORS))
    server.receive_data(b"\x63\x00")
    first, second = events(server)
    assert isinstance(first, Invalid) and "unknown packet type 99" in str(first.error)
    assert second == m.Reset()


def test_extended_packets_need_the_flag() -> None:
    server = server_after_handshake(int(Flags.ERRORS))
    server.receive_data(b"\x07")
    event = server.next_event()
    assert isinstance(event, Invalid) and "EXTENDED" in str(event.error)


def test_unknown_flags_are_visible() -> None:
    server = ServerConnection()
    server.receive_data(b"\x80" + s(b"x"))
    server.next_event()
    assert server.unknown_flags() == 0x80


# -- client and server as a pair ----------------------------------------------------------------

ALL = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED


def pair(flags: Flags) -> tuple[ClientConnection, ServerConnection]:
    client, server = ClientConnection(flags), ServerConnection()
    server.receive_data(client.send_handshake("CartPole-v1"))
    assert isinstance(server.next_event(), Handshake)
    client.receive_data(server.send_handshake_reply(""))
    assert client.next_event() == HandshakeReply("")
    for side in (client, server):
        side.set_spaces(ACTION, CARTPOLE_OBS)
    return client, server


REQUESTS_AND_REPLIES: list[tuple[m.Request, m.Reply]] = [
    (m.Reset(), m.ResetReply(np.array([1, 2, 3, 4], np.float32), {})),
    (m.Step(np.int64(1)), m.StepReply(np.array([0.5, 0, 0, 0], np.float32), 1.0, False, False, {})),
    (m.Step(np.int64(0)), m.StepReply(np.zeros(4, np.float32), 0.5, True, False, {"k": 1})),
    (m.GetSpace(m.SpaceKind.ACTION), m.SpaceReply(ACTION)),
    (m.SampleAction(), m.SampleReply(np.int64(1))),
    (m.Render(), m.RenderReply(None)),
]


def _roundtrip(flags: Flags, feed: Any) -> list[Any]:
    client, server = pair(flags)
    requests = [q for q, _ in REQUESTS_AND_REPLIES]
    if flags & Flags.EXTENDED:
        requests[0] = m.Reset(seed=0, options={"a": 1})
    wire = b"".join(client.send_request(q) for q in requests)
    feed(server, wire)
    got = events(server)
    assert [type(e) for e in got] == [type(q) for q in requests]
    answer = b"".join(server.send_reply(r) for _, r in REQUESTS_AND_REPLIES)
    feed(client, answer)
    return events(client)


def whole(conn: Any, data: bytes) -> None:
    conn.receive_data(data)


def byte_by_byte(conn: Any, data: bytes) -> None:
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])


@pytest.mark.parametrize("feed", [whole, byte_by_byte])
@pytest.mark.parametrize("flags", [Flags(0), Flags.ERRORS, ALL])
def test_pipelined_pair_roundtrip(flags: Flags, feed: Any) -> None:
    replies = _roundtrip(flags, feed)
    expected = [r for _, r in REQUESTS_AND_REPLIES]
    assert len(replies) == len(expected)
    for got, want in zip(replies, expected, strict=True):
        assert type(got) is type(want)
    np.testing.assert_array_equal(replies[1].observation, expected[1].observation)
    assert replies[1].observation.dtype == np.float32
    assert replies[2].done and replies[2].info == {"k": 1}
    assert replies[3].space == ACTION
    if flags & Flags.EXTENDED:
        assert replies[2].terminated and not replies[2].truncated


def test_trailing_bytes_wait_for_the_rest() -> None:
    client, server = pair(ALL)
    wire = client.send_request(m.Step(np.int64(1))) + b"\x01\x00"
    server.receive_data(wire)
    assert isinstance(server.next_event(), m.Step)
    assert server.next_event() is NEED_DATA


def test_client_reports_server_errors_as_their_class() -> None:
    client, server = pair(ALL)
    server.receive_data(client.send_request(m.Step(np.int64(5))))
    server.next_event()
    client.receive_data(
        server.send_error(InvalidActionError("action 5 is not in Discrete(2)")) or b""
    )
    error = client.next_event()
    assert isinstance(error, InvalidActionError) and "action 5" in str(error)


def test_tensor_actions_and_observations_roundtrip() -> None:
    box = spaces.Box(-1, 1, (2, 3), np.float64)
    client, server = ClientConnection(ALL), ServerConnection()
    server.receive_data(client.send_handshake("x"))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for side in (client, server):
        side.set_spaces(box, box)
    action = np.linspace(-1, 1, 6).reshape(2, 3)
    server.receive_data(client.send_request(m.Step(action)))
    step = server.next_event()
    np.testing.assert_array_equal(step.action, action)
    assert step.action.dtype == np.float64
    client.receive_data(server.send_reply(m.StepReply(action, 0.0, False, True, {})))
    reply = client.next_event()
    np.testing.assert_array_equal(reply.observation, action)
    assert reply.truncated and not reply.terminated


def test_eof_inside_a_packet_is_a_protocol_error() -> None:
    server = server_after_handshake()
    server.receive_data(b"\x01\x00\x05\x00")
    server.receive_data(b"")
    with pytest.raises(ProtocolError, match="closed inside a packet"):
        server.next_event()


@pytest.mark.parametrize(
    ("flags", "packet", "what", "limit"),
    [
        (None, b"", "the env name", MAX_ENV_NAME),
        (0x08, b"", "the vector options", MAX_VECTOR_OPTIONS),
        (0x00, b"\x01\x00", "an action", DEFAULT_MAX_ACTION),
        (0x05, b"\x08\x01", "an action", DEFAULT_MAX_ACTION),
        (0x05, b"\x07", "the reset options", MAX_RESET_OPTIONS),
        (0x02, b"\x04\x00\x01\x01", "the directory", MAX_MONITOR_DIR),
        (0x00, b"\x06", "an upload field", MAX_UPLOAD_FIELD),
    ],
)
@pytest.mark.parametrize("over", [1, 2**31])
def test_every_field_has_a_limit_checked_before_its_bytes_arrive(
    flags: int | None, packet: bytes, what: str, limit: int, over: int
) -> None:
    if flags is None:  # the handshake's own field
        server = ServerConnection()
        server.receive_data(b"\x00" + struct.pack("<I", min(limit + over, 2**32 - 1)))
    elif flags & 0x08:
        server = ServerConnection()
        server.receive_data(b"\x08" + s(b"CartPole-v1") + struct.pack("<I", limit + over))
    else:
        server = server_after_handshake(flags)
        server.receive_data(packet + struct.pack("<I", min(limit + over, 2**32 - 1)))
    with pytest.raises(TooLargeError, match=f"{what} of .* bytes is over the {limit}-byte limit"):
        server.next_event()
    fatal = server.send_fatal(TooLargeError("too much"))
    if flags is None or flags & 0x08:  # the handshake is answered with the error
        assert fatal == s(b"too much")
    elif flags & 0x01:  # ERRORS: an error reply, then the front end closes
        assert fatal == b"\x01" + s(b"too much") + s(b"too_large")
    else:  # flags 0 have no error channel: the front end just closes
        assert fatal is None


def test_the_action_limit_is_the_servers_choice() -> None:
    server = server_after_handshake(0, max_action=10)
    server.receive_data(b"\x01\x00" + s(b"1" * 10))
    assert isinstance(server.next_event(), m.Step | Invalid)
    server.receive_data(b"\x01\x00" + s(b"1" * 11))
    with pytest.raises(TooLargeError, match="an action of 11 bytes is over the 10-byte limit"):
        server.next_event()


def test_deeply_nested_json_is_an_invalid_action_not_a_crash() -> None:
    server = server_after_handshake(0x05)
    server.set_spaces(spaces.Box(-1, 1, (2,)), CARTPOLE_OBS)
    deep = b"[" * 5000 + b"]" * 5000
    server.receive_data(b"\x01\x00" + s(deep) + b"\x07" + s(b'{"seed":' + deep + b"}"))
    step, reset = events(server)
    assert isinstance(step, Invalid) and "deeper than 100 levels" in str(step.error)
    assert isinstance(reset, Invalid) and "deeper than 100 levels" in str(reset.error)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200), st.integers(0, 7))
def test_garbage_only_ever_yields_the_protocols_own_errors(garbage: bytes, flags: int) -> None:
    server = server_after_handshake(flags)
    server.receive_data(garbage)
    server.receive_data(b"")
    try:
        for _ in range(400):
            event = server.next_event()
            if event is NEED_DATA:
                break
            assert isinstance(
                event,
                Invalid
                | m.Step
                | m.Reset
                | m.GetSpace
                | m.SampleAction
                | m.Monitor
                | m.Render
                | Upload,
            )
    except ProtocolError:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=120))
def test_garbage_replies_only_ever_yield_protocol_errors(garbage: bytes) -> None:
    client, _ = pair(ALL)
    client.send_request(m.Step(np.int64(1)))
    client.receive_data(garbage)
    event, error = next_event_or_error(client)
    if error is not None:  # nothing but the protocol's own errors, not even another subclass
        assert type(error) in (ProtocolError, TooLargeError), f"{type(error).__name__}: {error}"
    else:
        assert event is NEED_DATA or isinstance(event, m.StepReply | EnvwireError)


def next_event_or_error(conn: ClientConnection) -> tuple[Any, Exception | None]:
    """``(event, None)``, or ``(None, what next_event raised)``."""
    try:
        return conn.next_event(), None
    except Exception as exc:
        return None, exc


@pytest.mark.parametrize(
    ("first", "named"),
    [
        (b"GET /envs HTTP/1.1\r\n", "that is an HTTP request"),
        (b"POST /reset HTTP/1.1\r\n", "that is an HTTP request"),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "that is HTTP/2's preface"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "that is a TLS ClientHello"),
    ],
)
def test_another_protocols_first_bytes_are_refused_and_named(first: bytes, named: str) -> None:
    server = ServerConnection()
    server.receive_data(first)
    with pytest.raises(TooLargeError) as refused:
        server.next_event()
    assert named in str(refused.value)
    assert "-byte limit" in str(refused.value)  # what was refused comes first, as before


def test_a_handshake_over_a_limit_is_refused_as_before() -> None:
    server = ServerConnection()
    server.receive_data(b"\x00" + struct.pack("<I", MAX_ENV_NAME + 1))
    with pytest.raises(TooLargeError) as refused:
        server.next_event()
    assert (
        str(refused.value)
        == f"the env name of {MAX_ENV_NAME + 1} bytes is over the {MAX_ENV_NAME}-byte limit"
    )
