"""What an authenticated client can make the server's memory hold: a WebSocket message that
never ends, and what a burst leaves behind once its connections are gone."""

from __future__ import annotations

import base64
import os
import select
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from envwire.testing import ServerProcess
from tests.rawsock import exact
from tests.server.security.conftest import TOKEN, Secrets, secured, serve

MiB = 1024 * 1024


def rss(pid: int) -> int:
    """A process's resident memory, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc")


@pytest.fixture(scope="module")
def server(secrets: Secrets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("memory")
    with serve(tmp, ["http"], envs=["envwire/Echo-v0"], **secured(secrets)) as server:
        yield server


def frame(opcode: int, payload: bytes, fin: bool) -> bytes:
    """A masked client frame (payload under 126 bytes)."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes(((0x80 if fin else 0) | opcode, 0x80 | len(payload))) + mask + masked


def open_websocket(server: ServerProcess) -> socket.socket:
    """A WebSocket to the Echo env that showed the token."""
    sock = socket.create_connection((server.host, server.ports["http"]), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /envs/envwire/Echo-v0/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += exact(sock, 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


@pytest.mark.parametrize("payload", [b"", b"abc"], ids=["empty", "3-byte"])
def test_a_message_that_never_ends_is_closed_with_1009(
    server: ServerProcess, payload: bytes
) -> None:
    """The attack: one text frame without FIN, then continuation frames for 12 s. The server
    closes with 1009 long before, and its memory does not grow by 64 MiB."""
    assert server.process is not None
    before = rss(server.process.pid)
    sock = open_websocket(server)
    chunk = frame(0x0, payload, fin=False) * 20_000
    sock.sendall(frame(0x1, payload, fin=False))
    deadline = time.monotonic() + 12
    sent = 0
    try:
        # Stop writing once the server answers, so that its close frame is read, not reset.
        while time.monotonic() < deadline and not select.select([sock], [], [], 0)[0]:
            sock.sendall(chunk)
            sent += 20_000
    except OSError:
        pass  # the server closed the connection
    sock.settimeout(10)
    try:
        head = exact(sock, 2)
        reason = exact(sock, head[1] & 0x7F)
    except OSError as exc:  # reset while the attacker was still writing: also closed
        pytest.fail(f"no close frame after {sent} fragments: {exc}")
    finally:
        sock.close()
    assert head[0] & 0x0F == 0x8
    assert struct.unpack("!H", reason[:2])[0] == 1009, reason
    assert b"fragments" in reason
    growth = rss(server.process.pid) - before
    assert growth < 64 * MiB, f"{growth / MiB:.1f} MiB"
