"""The gym-socket front end against hostile bytes: every bound hit, every close explained.

An in-process server, so that the tests can look at what it holds (its connections, the shared
buffer budget) and at what it logs.
"""

from __future__ import annotations

import gc
import logging
import socket
import struct
import weakref
from collections.abc import Iterator

import pytest

from envwire.app import Server
from envwire.frontends.gymsocket import GymSocketFrontEnd
from envwire.registry import Catalog, EnvSpec
from envwire.settings import Settings
from envwire.testing import wait_until
from tests.rawsock import exact

#: A budget small enough to hit with three connections: 256 KiB each are free, the rest shared.
MAX_BUFFERED = 1024 * 1024
MAX_ACTION = 4 * 1024 * 1024


def field(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


@pytest.fixture
def front() -> Iterator[GymSocketFrontEnd]:
    catalog = Catalog([EnvSpec("CartPole-v1", "gym:CartPole-v1")])
    config = Settings.of(
        gym_socket=0,
        http=None,
        grpc=None,
        monitor_root=None,
        max_buffered=MAX_BUFFERED,
        max_action_size=MAX_ACTION,
    )
    with Server(catalog, config) as server:
        [gym] = server.front_ends
        assert isinstance(gym, GymSocketFrontEnd)
        yield gym


def connect(front: GymSocketFrontEnd, flags: int = 0x01) -> socket.socket:
    """A client past the handshake (CartPole-v1), reset once."""
    sock = socket.create_connection((front.host, front.port), timeout=10)
    sock.sendall(bytes([flags]) + field(b"CartPole-v1") + b"\x00")
    assert exact(sock, 4) == b"\x00" * 4  # the handshake: no error
    status = 1 if flags & 0x01 else 0  # the ERRORS flag puts a status byte first
    head = exact(sock, status + 5)  # the reset's observation: kind, length, bytes
    exact(sock, struct.unpack_from("<I", head, status + 1)[0])
    return sock


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def error_reply(sock: socket.socket) -> tuple[str, str]:
    """An ERRORS-flag error reply: (message, code)."""
    assert exact(sock, 1) == b"\x01"
    message = exact(sock, struct.unpack("<I", exact(sock, 4))[0]).decode()
    code = exact(sock, struct.unpack("<I", exact(sock, 4))[0]).decode()
    return message, code


def still_serves(front: GymSocketFrontEnd) -> None:
    sock = connect(front)
    sock.sendall(b"\x01\x00" + field(b"1"))
    assert exact(sock, 1) == b"\x00"  # a JSON observation follows: the step succeeded
    sock.close()


@pytest.mark.parametrize("declared", [MAX_ACTION + 1, 2**31, 2**32 - 1])
def test_an_oversized_action_is_answered_then_closed(
    front: GymSocketFrontEnd, declared: int, caplog: pytest.LogCaptureFixture
) -> None:
    sock = connect(front)
    with caplog.at_level(logging.INFO, logger="envwire.gym-socket"):
        sock.sendall(b"\x01\x00" + struct.pack("<I", declared))
        message, code = error_reply(sock)
        assert closed(sock)
    assert code == "too_large"
    assert message == f"an action of {declared} bytes is over the {MAX_ACTION}-byte limit"
    peer = sock.getsockname()
    assert wait_until(lambda: any(str(peer) in r.getMessage() for r in caplog.records))
    [line] = [r for r in caplog.records if message in r.getMessage()]
    assert line.levelno == logging.INFO and "closing the connection" in line.getMessage()
    sock.close()
    still_serves(front)


def test_without_an_error_channel_the_connection_just_closes(
    front: GymSocketFrontEnd, caplog: pytest.LogCaptureFixture
) -> None:
    sock = connect(front, flags=0)
    with caplog.at_level(logging.INFO, logger="envwire.gym-socket"):
        sock.sendall(b"\x01\x00" + struct.pack("<I", 2**31))
        assert closed(sock)  # the original protocol has nowhere to say why
        assert wait_until(lambda: any("2147483648 bytes" in r.getMessage() for r in caplog.records))
    sock.close()


def test_an_oversized_env_name_is_the_handshakes_answer(front: GymSocketFrontEnd) -> None:
    sock = socket.create_connection((front.host, front.port), timeout=10)
    sock.sendall(b"\x01" + struct.pack("<I", 2**31))
    answer = exact(sock, struct.unpack("<I", exact(sock, 4))[0]).decode()
    assert answer == "the env name of 2147483648 bytes is over the 4096-byte limit"
    assert closed(sock)
    sock.close()


def test_refused_handshakes_are_logged_at_info(
    front: GymSocketFrontEnd, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="envwire.gym-socket"):
        sock = socket.create_connection((front.host, front.port), timeout=10)
        sock.sendall(b"\x00" + field(b"NoSuchEnv-v0"))
        answer = exact(sock, struct.unpack("<I", exact(sock, 4))[0]).decode()
        assert "unknown env 'NoSuchEnv-v0'" in answer
        assert closed(sock)
    [line] = [r for r in caplog.records if "handshake refused" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert str(sock.getsockname()) in line.getMessage() and "NoSuchEnv-v0" in line.getMessage()
    sock.close()


def test_the_buffers_of_all_connections_share_one_budget(front: GymSocketFrontEnd) -> None:
    # Each client declares a 3 MiB action (under the 4 MiB limit) and sends part of it: the
    # first two fit in the budget, the third does not and is told so.
    chunk = b"1" * (700 * 1024)
    socks = [connect(front) for _ in range(3)]
    for sock in socks[:2]:
        sock.sendall(b"\x01\x00" + struct.pack("<I", 3 * 1024 * 1024) + chunk)
    assert wait_until(lambda: front.budget.used == 2 * (len(chunk) + 6 - 256 * 1024))
    socks[2].sendall(b"\x01\x00" + struct.pack("<I", 3 * 1024 * 1024) + chunk)
    message, code = error_reply(socks[2])
    assert code == "too_large" and "receive buffers are full (1048576 bytes" in message
    assert front.budget.used <= MAX_BUFFERED
    for sock in socks:
        sock.close()
    # Closed connections give back what they held: the next client may buffer again.
    assert wait_until(lambda: front.budget.used == 0)
    sock = connect(front)
    sock.sendall(b"\x01\x00" + struct.pack("<I", 3 * 1024 * 1024) + chunk)
    assert wait_until(lambda: front.budget.used > 0)
    sock.close()
    still_serves(front)


def test_a_closed_connection_is_freed_without_the_cyclic_collector(
    front: GymSocketFrontEnd,
) -> None:
    sock = connect(front)
    assert wait_until(lambda: len(front._connections) == 1)
    [conn] = front._connections
    ref = weakref.ref(conn)
    buffer = weakref.ref(conn.codec)
    del conn
    sock.sendall(b"\x01\x00" + struct.pack("<I", 3 * 1024 * 1024) + b"1" * 1024 * 1024)
    gc.disable()  # reference counting alone must free it: no cycle may hold it
    try:
        sock.close()
        assert wait_until(lambda: ref() is None and buffer() is None)
    finally:
        gc.enable()
