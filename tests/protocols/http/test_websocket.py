"""The server side of WebSocket: the frame codec against frames that websockets' client side
writes, and the opening handshake."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import Protocol, Side, State
from websockets.uri import parse_uri

from envwire.protocols.http.http11 import Request, RequestParser
from envwire.protocols.http.websocket import (
    FRAGMENT_COST,
    FrameError,
    FrameReader,
    accept_bytes,
    close_frame,
    control_frame,
    handshake_problem,
    text_frame,
)


def client(opcode: Opcode, data: bytes, fin: bool = True) -> bytes:
    """A frame as a real client writes it (masked)."""
    return Frame(opcode, data, fin).serialize(mask=True)


def raw(first: int, payload: bytes) -> bytes:
    """A masked frame with any first byte (websockets refuses to write invalid ones)."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([first, 0x80 | len(payload)]) + mask + masked


def feed(
    data: bytes, step: int | None = None, max_size: int | None = 1 << 20
) -> list[tuple[object, ...]]:
    reader = FrameReader(max_size)
    if step is None:
        return reader.feed(data)
    events = []
    for i in range(0, len(data), step):
        events += reader.feed(data[i : i + step])
    return events


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 200_000])
@pytest.mark.parametrize("step", [None, 1, 7])
def test_text_messages_of_every_length_encoding(size: int, step: int | None) -> None:
    if step == 1 and size > 70_000:
        step = 4096
    text = ("é" * size)[:size]
    assert feed(client(Opcode.TEXT, text.encode()), step) == [("text", text)]


def test_fragments_control_frames_and_trailing_bytes() -> None:
    data = (
        client(Opcode.TEXT, b'{"type":', fin=False)
        + client(Opcode.PING, b"p1")
        + client(Opcode.CONT, b'"reset"}', fin=True)
        + client(Opcode.BINARY, b'{"type":"state"}')
        + client(Opcode.PONG, b"p2")
        + client(Opcode.CLOSE, Close(1000, "bye").serialize())
    )
    expected = [
        ("ping", b"p1"),
        ("text", '{"type":"reset"}'),
        ("binary", b'{"type":"state"}'),
        ("pong", b"p2"),
        ("close", 1000, "bye"),
    ]
    assert feed(data) == expected
    assert feed(data, 1) == expected
    reader = FrameReader()
    frame = client(Opcode.TEXT, b"hello")
    assert reader.feed(frame + frame[:3]) == [("text", "hello")]
    assert reader.feed(frame[3:]) == [("text", "hello")]


def test_binary_messages_stay_bytes() -> None:
    # Binary data is not text: it is handed on as it came, not decoded (not even when fragmented).
    data = client(Opcode.BINARY, b"\xff", fin=False) + client(Opcode.CONT, b"\xfe")
    assert feed(data) == [("binary", b"\xff\xfe")]
    assert feed(data + client(Opcode.TEXT, b"t"), 1) == [("binary", b"\xff\xfe"), ("text", "t")]


def test_empty_close() -> None:
    assert feed(client(Opcode.CLOSE, b"")) == [("close", 1005, "")]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (Frame(Opcode.TEXT, b"x").serialize(mask=False), 1002),  # unmasked
        (bytes([0xC1, 0x80]) + os.urandom(4), 1002),  # RSV1 without an extension
        (bytes([0x83, 0x80]) + os.urandom(4), 1002),  # unknown opcode
        (raw(0x09, b"x"), 1002),  # a fragmented ping
        (bytes([0x89, 0xFE, 0, 126]) + b"\0" * 130, 1002),  # a 126-byte ping
        (raw(0x80, b"x"), 1002),  # a continuation with nothing to continue
        (client(Opcode.TEXT, b"a", fin=False) + client(Opcode.TEXT, b"b"), 1002),
        (raw(0x81, b"\xff\xfe"), 1007),
        (raw(0x88, b"\x03"), 1002),
        (raw(0x88, struct.pack("!H", 999)), 1002),
        (bytes([0x81, 0xFF]) + struct.pack("!Q", 1 << 63) + b"\0" * 4, 1002),
    ],
    # names of their own: the masks are random, and every test process must collect the same
    ids=[
        "unmasked",
        "rsv1",
        "unknown-opcode",
        "fragmented-ping",
        "long-ping",
        "lone-continuation",
        "unfinished-text",
        "bad-utf8",
        "short-close",
        "bad-close-code",
        "huge-length",
    ],
)
def test_protocol_errors(data: bytes, code: int) -> None:
    with pytest.raises(FrameError) as caught:
        feed(data)
    assert caught.value.code == code


def test_message_too_big() -> None:
    with pytest.raises(FrameError) as caught:
        feed(client(Opcode.TEXT, b"x" * 100), max_size=50)
    assert caught.value.code == 1009
    fragments = client(Opcode.TEXT, b"x" * 30, fin=False) + client(Opcode.CONT, b"x" * 30)
    with pytest.raises(FrameError):
        feed(fragments, max_size=50)


def test_fragments_count_at_their_cost_and_are_capped() -> None:
    """A message that never ends, in empty or 3-byte fragments: each fragment counts beyond its
    payload, and the fragment cap closes it with 1009 however small they are."""
    reader = FrameReader(1 << 20, max_fragments=100)
    reader.feed(client(Opcode.TEXT, b"", fin=False))
    empty = client(Opcode.CONT, b"", fin=False)
    reader.feed(empty * 98)
    assert reader.buffered == 99 * FRAGMENT_COST
    with pytest.raises(FrameError) as caught:
        reader.feed(empty * 2)
    assert caught.value.code == 1009
    assert "100 fragments" in caught.value.reason

    small = FrameReader(1000 * FRAGMENT_COST, max_fragments=1 << 20)
    small.feed(client(Opcode.BINARY, b"abc", fin=False))
    with pytest.raises(FrameError) as caught:
        small.feed(client(Opcode.CONT, b"abc", fin=False) * 1000)
    assert caught.value.code == 1009

    # Within the caps a fragmented message still arrives whole.
    whole = FrameReader(1 << 20, max_fragments=3)
    parts = [client(Opcode.TEXT, b"ab", fin=False), client(Opcode.CONT, b"cd", fin=False)]
    assert whole.feed(b"".join(parts) + client(Opcode.CONT, b"e")) == [("text", "abcde")]
    assert whole.buffered == 0


@given(st.binary(max_size=200))
def test_garbage_only_ever_raises_frame_errors(data: bytes) -> None:
    try:
        feed(data)
    except FrameError as exc:
        assert exc.code in (1002, 1007, 1009)  # noqa: PT017


def test_server_frames_parse_as_websockets_reads_them() -> None:
    peer = Protocol(Side.CLIENT)  # a client's view of what the server writes
    for payload in (b"", b"x" * 125, b"y" * 126, b"z" * 70_000):
        peer.receive_data(text_frame(payload))
        [frame] = peer.events_received()
        assert (frame.opcode, frame.data, frame.fin) == (Opcode.TEXT, payload, True)
    peer.receive_data(control_frame(0x9, b"hi"))
    assert [(f.opcode, f.data) for f in peer.events_received()] == [(Opcode.PING, b"hi")]
    assert (
        close_frame(1011, "env hung") == bytes([0x88, 10]) + struct.pack("!H", 1011) + b"env hung"
    )
    assert close_frame(1005) == bytes([0x88, 0])


def handshake_request() -> tuple[ClientProtocol, Request]:
    """A real client's opening handshake, as our HTTP parser reads it."""
    peer = ClientProtocol(parse_uri("ws://example.org:8000/envs/x/ws"))
    peer.send_request(peer.connect())
    parser = RequestParser()
    parser.receive_data(b"".join(peer.data_to_send()))
    request = parser.next_request()
    assert isinstance(request, Request)
    return peer, request


def test_handshake_accepted_by_websockets_client() -> None:
    peer, request = handshake_request()
    assert handshake_problem(request) is None
    peer.receive_data(accept_bytes(request))
    [response] = peer.events_received()
    assert response.status_code == 101 and peer.state is State.OPEN


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"method": "POST"}, "must be a GET"),
        ({"upgrade": "h2c"}, "Upgrade: websocket"),
        ({"connection": "keep-alive"}, "Connection: Upgrade"),
        ({"sec-websocket-version": "8"}, "Sec-WebSocket-Version"),
        ({"sec-websocket-key": "short"}, "Sec-WebSocket-Key"),
    ],
)
def test_handshake_problems_are_named(change: dict[str, str], problem: str) -> None:
    _, request = handshake_request()
    if "method" in change:
        request.method = change["method"]
    else:
        request.headers.update(change)
    assert problem in (handshake_problem(request) or "")
