"""The server side of a WebSocket over one blocking socket: the opening handshake within its
bounds, and the channel's bounded waits and closing, over a socket pair."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from envwire.protocols.http.http11 import Request
from envwire.sockets.http import HttpConnection
from envwire.sockets.websocket import HandshakeError, WebSocketChannel, handshake, upgrade

KEY = base64.b64encode(b"0123456789abcdef")
REQUEST = (
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: " + KEY + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server end, client end)."""
    server, client = socket.socketpair()
    client.settimeout(10)
    yield server, client
    server.close()
    client.close()


def masked(opcode: int, payload: bytes) -> bytes:
    """A client frame (payload under 126 bytes)."""
    mask = os.urandom(4)
    return (
        bytes((0x80 | opcode, 0x80 | len(payload)))
        + mask
        + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    )


def answer_of(client: socket.socket) -> bytes:
    """Everything the server sent until it closed its end."""
    data = b""
    while chunk := client.recv(4096):
        data += chunk
    return data


# --- the opening handshake ------------------------------------------------------------------


def test_a_handshake_is_answered_and_the_rest_kept(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    early = masked(0x1, b"hello")  # a frame sent right behind the request
    client.sendall(REQUEST + early)
    assert handshake(server, 5.0) == early
    head = client.recv(4096).decode("latin-1")
    accept = base64.b64encode(
        hashlib.sha1(KEY + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
    ).decode()
    assert head.startswith("HTTP/1.1 101 Switching Protocols\r\n")
    assert f"sec-websocket-accept: {accept}\r\n" in head


def test_the_deadline_holds_however_slowly_the_bytes_come(
    pair: tuple[socket.socket, ...],
) -> None:
    server, client = pair
    stop = threading.Event()

    def trickle() -> None:
        for byte in REQUEST[:-4]:  # never the blank line that ends it
            if stop.wait(0.05):
                return
            client.send(bytes((byte,)))

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    began = time.monotonic()
    try:
        with pytest.raises(HandshakeError, match=r"no complete WebSocket handshake within 0.5 s"):
            handshake(server, 0.5)
        assert time.monotonic() - began < 5.0  # not restarted by each byte
    finally:
        stop.set()
        sender.join()


def test_a_handshake_over_the_size_limit(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    client.sendall(REQUEST[:-2] + b"X-Padding: " + b"x" * 2000 + b"\r\n\r\n")
    with pytest.raises(HandshakeError, match=r"431.*too large"):
        handshake(server, 5.0, max_size=1024)
    server.close()
    assert answer_of(client).startswith(b"HTTP/1.1 431 ")


def test_a_handshake_with_a_body(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    client.sendall(REQUEST[:-2] + b"Content-Length: 5\r\n\r\nhello")
    with pytest.raises(HandshakeError, match="413"):
        handshake(server, 5.0)


@pytest.mark.parametrize(
    ("request_bytes", "problem"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "missing 'Upgrade: websocket'"),
        (REQUEST.replace(b"Version: 13", b"Version: 8"), "Sec-WebSocket-Version"),
        (REQUEST.replace(b"GET", b"POST"), "must be a GET request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "malformed request line"),
    ],
)
def test_what_is_not_a_handshake_gets_its_http_error(
    pair: tuple[socket.socket, ...], request_bytes: bytes, problem: str
) -> None:
    server, client = pair
    client.sendall(request_bytes)
    with pytest.raises(HandshakeError, match=problem):
        handshake(server, 5.0)
    server.close()
    answer = answer_of(client)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert problem.encode() in answer


def test_a_peer_that_leaves_before_its_handshake(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    client.sendall(b"GET / HTTP/1.1\r\n")
    client.shutdown(socket.SHUT_WR)
    with pytest.raises(HandshakeError):
        handshake(server, 5.0)


def test_upgrade_answers_a_request_already_read(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    http = HttpConnection(server, max_body=0)
    client.sendall(REQUEST.replace(b"Connection: Upgrade", b"Connection: keep-alive"))
    request = http.next_request(10.0)
    assert isinstance(request, Request)
    assert upgrade(http, request) is None
    assert http.close_reason == "bad WebSocket handshake: missing 'Connection: Upgrade'"
    reply = client.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in reply


# --- the channel ----------------------------------------------------------------------------


def test_receive_waits_in_all_no_longer_than_asked(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    channel = WebSocketChannel(server)
    stop = threading.Event()

    def ping() -> None:
        while not stop.wait(0.05):
            client.sendall(masked(0x9, b""))

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    began = time.monotonic()
    try:
        assert channel.receive(wait=0.5) is None
        assert time.monotonic() - began < 5.0  # pings arrived all along, no message did
        assert not channel.closed  # a wait that runs out leaves the connection open
    finally:
        stop.set()
        pinger.join()
    client.sendall(masked(0x1, b"late"))
    assert channel.receive(wait=5.0) == "late"


def test_the_peers_close_is_recorded(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    channel = WebSocketChannel(server)
    client.sendall(masked(0x8, b"\x03\xe9going"))  # 1001
    assert channel.receive(wait=5.0) is None
    assert channel.closed
    assert channel.peer_close == (1001, "going")
    assert answer_of(client) == b"\x88\x07\x03\xe9going"  # the closing handshake answered


def test_a_failed_send_closes_the_socket(pair: tuple[socket.socket, ...]) -> None:
    server, client = pair
    channel = WebSocketChannel(server)
    client.close()  # the peer is gone: writing to it fails
    assert not channel.send_text("x" * 1000)
    assert channel.closed
    assert channel.close_reason.startswith("socket error:")
    assert server.fileno() == -1  # closed, not left for the garbage collector
