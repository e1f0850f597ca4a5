"""The game server on its own: one game, refusals, bounded waits, what Godot 3 sends.

The games here are ``websockets``' sync client (what the bridge and the fake game use) and raw
sockets speaking the bytes by hand (a Godot 3 ``WebSocketClient``'s handshake, a peer that never
finishes its handshake, a peer that drops without a closing handshake). GodotEnv over the same
server runs in test_gymenv_fake.py and, against the real engine, test_gymenv_real.py.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from envwire.kinds.godot.gameserver import MAX_HANDSHAKES, GameDisconnected, GameServer

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def never() -> None:
    """The accept check of a game that cannot die (it is this test's own client)."""


@pytest.fixture
def server() -> Iterator[GameServer]:
    server = GameServer("127.0.0.1", 0, handshake_timeout=0.5, max_message=1024)
    yield server
    server.close(5.0)


def url(server: GameServer) -> str:
    return f"ws://127.0.0.1:{server.port}/"


@pytest.fixture
def game(server: GameServer) -> Iterator[ClientConnection]:
    with connect(url(server), proxy=None, open_timeout=5) as ws:
        server.accept(5.0, never)
        yield ws


def answer(ws: ClientConnection, reply: str | bytes) -> threading.Thread:
    """Answer the next command with ``reply``, in a thread."""

    def run() -> None:
        ws.recv(timeout=5)
        ws.send(reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def raw_connect(server: GameServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def godot_handshake(sock: socket.socket, port: int) -> tuple[str, dict[str, str], bytes]:
    """Send the opening handshake of a Godot 3 ``WebSocketClient`` (its exact lines, in its
    order), read the answer up to the blank line the way Godot does, and check it as Godot 3's
    client does; returns the status line, the headers (names in lower case, as Godot keeps
    them) and the bytes after the answer."""
    key = base64.b64encode(os.urandom(16))
    sock.sendall(
        b"GET / HTTP/1.1\r\n"
        + f"Host: 127.0.0.1:{port}\r\n".encode()
        + b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
        + b"Sec-WebSocket-Key: "
        + key
        + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"the server closed the connection after {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        assert sep, f"Godot refuses a header line without a colon: {line!r}"
        headers[name.lower()] = value.strip()
    # Godot 3's checks: at least four lines, "HTTP/1.1 101", these three exact values (two of
    # them compared in lower case), and no subprotocol when it asked for none.
    assert len(lines) >= 4
    assert lines[0].split(" ")[:2] == ["HTTP/1.1", "101"]
    assert headers["connection"].lower() == "upgrade"
    assert headers["upgrade"].lower() == "websocket"
    expected = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
    assert headers["sec-websocket-accept"] == expected
    assert "sec-websocket-protocol" not in headers
    return lines[0], headers, rest


def masked_text(text: str) -> bytes:
    """A client's masked text frame (payload under 126 bytes)."""
    payload = text.encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes((0x81, 0x80 | len(payload))) + mask + masked


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One unmasked server frame: (opcode, payload)."""
    first, second = sock.recv(2, socket.MSG_WAITALL)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", sock.recv(2, socket.MSG_WAITALL))[0]
    payload = sock.recv(length, socket.MSG_WAITALL) if length else b""
    return first & 0x0F, payload


def wait_for_eof(sock: socket.socket, timeout: float) -> bytes:
    """Everything ``sock`` receives until the server closes it (fails after ``timeout``)."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


# --- one game -------------------------------------------------------------------------------


def test_a_round_trip(server: GameServer, game: ClientConnection) -> None:
    assert server.connected
    answer(game, '{"init_observation": [0]}')
    server.send('{"cmd": "reset"}')
    assert server.recv(5.0) == '{"init_observation": [0]}'


def test_a_binary_frame_comes_as_bytes(server: GameServer, game: ClientConnection) -> None:
    answer(game, b'{"init_observation": [0]}')
    server.send('{"cmd": "reset"}')
    assert server.recv(5.0) == b'{"init_observation": [0]}'


def test_the_handshake_godot_3_sends(server: GameServer) -> None:
    with raw_connect(server) as sock:
        _, _, rest = godot_handshake(sock, server.port)
        assert rest == b""
        server.accept(5.0, never)
        server.send('{"cmd": "reset"}')
        assert read_frame(sock) == (0x1, b'{"cmd": "reset"}')
        sock.sendall(masked_text('{"init_observation": [1]}'))
        assert server.recv(5.0) == '{"init_observation": [1]}'


def test_a_second_connection_is_refused_with_1013(
    server: GameServer, game: ClientConnection
) -> None:
    with (
        connect(url(server), proxy=None, open_timeout=5) as second,
        pytest.raises(ConnectionClosed) as caught,
    ):
        second.recv(timeout=5)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1013
    assert caught.value.rcvd.reason == "a game is already connected"
    answer(game, '{"init_observation": [0]}')  # the game's connection is untouched
    server.send('{"cmd": "reset"}')
    assert server.recv(5.0) == '{"init_observation": [0]}'


def test_the_slot_is_not_given_back_when_the_game_leaves(
    server: GameServer, game: ClientConnection
) -> None:
    game.close()
    with (
        connect(url(server), proxy=None, open_timeout=5) as second,
        pytest.raises(ConnectionClosed) as caught,
    ):
        second.recv(timeout=5)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1013


def test_a_reply_that_does_not_come_times_out(server: GameServer, game: ClientConnection) -> None:
    server.send('{"cmd": "step", "action": [0]}')
    with pytest.raises(TimeoutError):
        server.recv(0.3)
    assert game.recv(timeout=5) == '{"cmd": "step", "action": [0]}'
    game.send('{"observation": [1], "reward": 0, "done": false}')  # late, but the link holds
    assert server.recv(5.0) == '{"observation": [1], "reward": 0, "done": false}'


def test_the_wait_is_bounded_while_pings_trickle_in(server: GameServer) -> None:
    with raw_connect(server) as sock:
        godot_handshake(sock, server.port)
        server.accept(5.0, never)
        stop = threading.Event()

        def ping() -> None:
            while not stop.wait(0.05):  # something arrives, but never a message
                mask = os.urandom(4)
                sock.sendall(bytes((0x89, 0x80)) + mask)

        pinger = threading.Thread(target=ping, daemon=True)
        pinger.start()
        try:
            began = time.monotonic()
            with pytest.raises(TimeoutError):
                server.recv(0.5)
            assert time.monotonic() - began < 5.0  # not restarted by every ping
        finally:
            stop.set()
            pinger.join()


# --- a game that leaves, breaks the rules, or never arrives ---------------------------------


def test_a_game_that_closes_mid_wait(server: GameServer, game: ClientConnection) -> None:
    server.send('{"cmd": "step", "action": [0]}')
    closer = threading.Timer(0.2, lambda: game.close(1001, "quitting"))
    closer.start()
    with pytest.raises(GameDisconnected, match=r"closed the connection \(code 1001.*quitting"):
        server.recv(30.0)
    closer.join()
    with pytest.raises(GameDisconnected):
        server.send('{"cmd": "step", "action": [0]}')


def test_a_game_that_drops_mid_wait(server: GameServer) -> None:
    sock = raw_connect(server)
    godot_handshake(sock, server.port)
    server.accept(5.0, never)
    server.send('{"cmd": "step", "action": [0]}')
    assert read_frame(sock)[0] == 0x1
    threading.Timer(0.2, sock.close).start()  # no closing handshake: the process died
    began = time.monotonic()
    with pytest.raises(GameDisconnected, match="the peer went away"):
        server.recv(30.0)
    assert time.monotonic() - began < 20.0  # noticed at once, not at the timeout


def test_a_game_that_leaves_between_calls(server: GameServer, game: ClientConnection) -> None:
    game.close()  # the accepting thread answers the closing handshake meanwhile
    with pytest.raises(GameDisconnected, match=r"closed the connection \(code 1000"):
        server.send('{"cmd": "reset"}')


def test_an_oversized_message_closes_with_1009(server: GameServer, game: ClientConnection) -> None:
    answer(game, "x" * 2000)  # the server takes 1024 bytes
    server.send('{"cmd": "reset"}')
    with pytest.raises(GameDisconnected, match="message larger than 1024 bytes"):
        server.recv(5.0)
    with pytest.raises(ConnectionClosed) as caught:
        game.recv(timeout=5)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1009


def test_a_handshake_that_never_completes_is_dropped(server: GameServer) -> None:
    with raw_connect(server) as silent, raw_connect(server) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\n")  # and nothing more
        # Meanwhile a game connects: a silent peer holds no one up.
        with connect(url(server), proxy=None, open_timeout=5):
            server.accept(5.0, never)
        assert wait_for_eof(silent, 10.0) == b""  # dropped after the 0.5 s deadline
        assert wait_for_eof(slow, 10.0).startswith(b"HTTP/1.1 408 ")  # told, then closed


def test_handshakes_in_progress_are_bounded() -> None:
    server = GameServer("127.0.0.1", 0, handshake_timeout=60.0)
    silent = [raw_connect(server) for _ in range(MAX_HANDSHAKES)]
    try:
        with raw_connect(server) as extra:
            # Closed unread at once: a handshake slot would have waited for a minute.
            assert wait_for_eof(extra, 10.0) == b""
        for sock in silent:  # still waiting for their handshakes
            sock.settimeout(0.1)
            with pytest.raises(TimeoutError):
                sock.recv(1)
        server.close(5.0)  # which ends the handshakes in progress too
        for sock in silent:
            assert wait_for_eof(sock, 10.0) == b""
    finally:
        server.close(5.0)
        for sock in silent:
            sock.close()


def test_a_request_that_is_not_a_handshake_does_not_take_the_slot(server: GameServer) -> None:
    with raw_connect(server) as browser:
        browser.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer_ = wait_for_eof(browser, 10.0)
    assert answer_.startswith(b"HTTP/1.1 400 ")
    assert b"Upgrade: websocket" in answer_
    with connect(url(server), proxy=None, open_timeout=5):
        server.accept(5.0, never)


def test_nobody_connects(server: GameServer) -> None:
    checks: list[float] = []
    with pytest.raises(TimeoutError):
        server.accept(0.3, lambda: checks.append(time.monotonic()))
    assert len(checks) >= 2  # the check runs between short waits
    assert not server.connected


def test_the_check_abandons_the_wait(server: GameServer) -> None:
    def died() -> None:
        raise RuntimeError("the game exited")

    with pytest.raises(RuntimeError, match="the game exited"):
        server.accept(30.0, died)


def test_send_before_a_game(server: GameServer) -> None:
    with pytest.raises(GameDisconnected, match="no game is connected"):
        server.send('{"cmd": "reset"}')


# --- closing --------------------------------------------------------------------------------


def test_wait_closed_returns_when_the_game_hangs_up(
    server: GameServer, game: ClientConnection
) -> None:
    threading.Timer(0.2, game.close).start()
    began = time.monotonic()
    server.wait_closed(30.0)
    assert time.monotonic() - began < 20.0


def test_close_says_goodbye_and_stops_listening(server: GameServer, game: ClientConnection) -> None:
    server.close(5.0)
    with pytest.raises(ConnectionClosed) as caught:
        game.recv(timeout=5)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1000
    with pytest.raises(OSError):  # nothing listens there any more
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    server.close(5.0)  # idempotent
