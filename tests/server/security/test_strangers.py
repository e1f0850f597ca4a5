"""What a client without a token can make the HTTP front end hold: nothing before the token is
read, short idle limits, first out when slots run short, one budget for bodies in flight."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envwire.server.listener import HOT_WINDOW
from envwire.testing import ServerProcess
from tests.rawsock import closed_by_server
from tests.server.security.conftest import TOKEN, Secrets, secured, serve

ENVS = ("envwire/Echo-v0",)
BEARER = f"Authorization: Bearer {TOKEN}\r\n"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc")


def open_conn(server: ServerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect((server.host, server.ports["http"]))
    return sock


def read_reply(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes or is quiet for the socket's timeout."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data

    return True


def get_health(sock: socket.socket, token: bool = False) -> bytes:
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n{BEARER if token else ''}\r\n"
    sock.sendall(head.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head_end = data.index(b"\r\n\r\n") + 4
    lower = data.lower()
    length = 0
    if b"content-length:" in lower:
        length = int(lower.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
    while len(data) < head_end + length:
        data += sock.recv(4096)
    return data


@pytest.fixture(scope="module")
def token_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("strangers")
    with serve(tmp, ["http"], envs=ENVS, **secured(secrets)) as server:
        yield server


def test_declared_bodies_are_refused_on_the_head(token_server: ServerProcess) -> None:
    before = rss_kib(token_server.process.pid)
    socks = []
    for _ in range(40):
        sock = open_conn(token_server)
        sock.sendall(
            b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 103809024\r\nExpect: 100-continue\r\n\r\n{"
        )
        socks.append(sock)
    for sock in socks:
        sock.settimeout(5)
        reply = read_reply(sock)  # the server closes: reading ends well before the timeout
        assert reply.startswith(b"HTTP/1.1 401"), reply[:80]
        assert b"100 Continue" not in reply
        sock.close()
    grown_kib = rss_kib(token_server.process.pid) - before
    assert grown_kib < 64 * 1024, f"the server grew by {grown_kib} KiB"


def test_a_stranger_keep_alive_connection_is_closed_soon(token_server: ServerProcess) -> None:
    stranger, friend = open_conn(token_server), open_conn(token_server)
    try:
        assert get_health(stranger).startswith(b"HTTP/1.1 200")
        assert get_health(friend, token=True).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert closed_by_server(stranger, within=12), "a token-less idle connection was kept"
        assert time.monotonic() - started < 10
        # the token holder's connection outlives the stranger's limit
        assert get_health(friend, token=True).startswith(b"HTTP/1.1 200")
    finally:
        stranger.close()
        friend.close()


def test_strangers_are_evicted_to_make_room(secrets: Secrets, tmp_path: Path) -> None:
    settings = secured(secrets) | {"max_connections": 24}
    with serve(tmp_path, ["http"], envs=ENVS, **settings) as server:
        strangers = []
        for n in range(24):
            sock = open_conn(server, source=f"127.0.0.{1 + n % 2}")
            assert get_health(sock).startswith(b"HTTP/1.1 200")
            strangers.append(sock)
        # idle, so evictable: past the moment an answered connection keeps its thread
        # before it parks (a loaded machine may take longer than that moment to park them)
        time.sleep(10 * HOT_WINDOW)
        try:
            response = httpx.get(
                f"http://{server.host}:{server.ports['http']}/schema",
                headers={"authorization": f"Bearer {TOKEN}"},
                timeout=10,
            )
            assert response.status_code == 200, response.text
            assert sum(closed_by_server(sock, within=0.5) for sock in strangers) >= 1
        finally:
            for sock in strangers:
                sock.close()


def test_bodies_in_flight_share_one_budget(secrets: Secrets, tmp_path: Path) -> None:
    mib = 1024 * 1024
    settings = secured(secrets) | {"max_buffered": 3 * mib}
    with serve(tmp_path, ["http"], envs=ENVS, **settings) as server:
        head = (
            "POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"{BEARER}Content-Length: {4 * mib}\r\n\r\n"
        ).encode()
        first, second = open_conn(server), open_conn(server)
        try:
            first.sendall(head + b" " * (3 * mib))  # 3 MiB held, 2.75 of them charged
            time.sleep(1.0)
            second.sendall(head + b" " * (640 * 1024))  # 128 KiB past the budget
            second.settimeout(10)
            reply = read_reply(second)
            assert reply.startswith(b"HTTP/1.1 503"), reply[:120]
            assert b"receive buffers are full" in reply
            # the budget is back once the first lets go
            first.close()
            time.sleep(0.5)
            response = httpx.post(
                f"http://{server.host}:{server.ports['http']}/reset",
                headers={"authorization": f"Bearer {TOKEN}"},
                content=b"{}" + b" " * (2 * mib),
                timeout=10,
            )
            assert response.status_code == 200, response.text
        finally:
            first.close()
            second.close()
