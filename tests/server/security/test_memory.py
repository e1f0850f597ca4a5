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

from envwire.testing import ServerProcess, wait_until
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
    try:
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
    except BaseException:
        sock.close()
        raise
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


def send_message(sock: socket.socket, payload: bytes) -> None:
    """One masked text frame of any length."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        head = bytes((0x81, 0x80 | size))
    elif size < 65536:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
    key = int.from_bytes(mask * (size // 4 + 1), "little") & ((1 << (8 * size)) - 1)
    masked = (int.from_bytes(payload, "little") ^ key).to_bytes(size, "little")
    sock.sendall(head + mask + masked)


def read_message(sock: socket.socket) -> bytes:
    """The next data message; the server's pings (on a busy machine a client may be silent
    long enough to be pinged) are answered on the way."""
    while True:
        head = exact(sock, 2)
        size = head[1] & 0x7F
        if size == 126:
            size = struct.unpack("!H", exact(sock, 2))[0]
        elif size == 127:
            size = struct.unpack("!Q", exact(sock, 8))[0]
        payload = exact(sock, size)
        if head[0] & 0x0F == 0x9:
            sock.sendall(frame(0xA, payload, fin=True))
        elif head[0] & 0x0F < 0x8:
            return payload


def burst(server: ServerProcess, clients: int, size: int) -> None:
    """``clients`` WebSockets at once, each stepping the Echo env with a ``size``-byte message
    and reading its echo, then closing."""
    socks: list[socket.socket] = []
    try:
        for _ in range(clients):
            socks.append(open_websocket(server))
        text = b"x" * size
        for sock in socks:
            send_message(sock, b'{"type":"reset","data":{}}')
        for sock in socks:
            read_message(sock)
        for sock in socks:
            send_message(sock, b'{"type":"step","data":{"message":"' + text + b'"}}')
        for sock in socks:
            assert len(read_message(sock)) > size
    finally:
        for sock in socks:
            sock.close()


def test_bursts_of_large_messages_leave_the_server_near_its_size(server: ServerProcess) -> None:
    """Twelve clients at once each send a 16 MiB message and take its 16 MiB echo, twice
    over (about 768 MiB through the server), and then all that again. Once they are gone,
    the server gives the memory back: its resident size comes back near where it was. What
    a trim cannot return (a block freed at the top of a connection thread's own heap: see
    docs/guides/security.md) is used again by the next burst, not added to."""
    assert server.process is not None
    pid = server.process.pid
    burst(server, 2, 1024)  # warm up: every code path imported and run once
    before = rss(pid)
    growth = lambda: rss(pid) - before  # noqa: E731
    peak, kept = before, []
    for _ in range(2):
        for _ in range(2):
            burst(server, 12, 16 * MiB)
            peak = max(peak, rss(pid))
        # usually within 48 MiB in a few seconds; else what stays after the trims
        wait_until(lambda: growth() < 48 * MiB, timeout=20, every=0.5)
        kept.append(growth())
    print(f"RSS before {before / MiB:.0f} MiB, peak {peak / MiB:.0f}, kept "
          f"{', '.join(f'{k / MiB:.0f}' for k in kept)}")  # fmt: skip
    assert peak - before > 96 * MiB, "the bursts did not reach the server's memory"
    assert max(kept) < 96 * MiB, f"{max(kept) / MiB:.0f} MiB more than before the bursts"
    assert kept[1] < kept[0] + 48 * MiB, "the second bursts added to what the first kept"
