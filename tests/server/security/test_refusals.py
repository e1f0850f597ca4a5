"""Refused connections are logged at WARNING (the server's default level), one line per
address and front end per minute, however often a client retries."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import grpc
import httpx
import pytest
from dm_env_rpc.v1 import connection, dm_env_rpc_pb2

from envwire.testing import ServerProcess, wait_until
from tests.rawsock import exact
from tests.server.security.conftest import Secrets, secured, serve

RETRIES = 30


@pytest.fixture(scope="module")
def server(secrets: Secrets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("refusals")
    front_ends = ["gym-socket", "http", "grpc"]
    with serve(tmp, front_ends, envs=["CartPole-v1"], **secured(secrets)) as server:
        yield server


def refusal_lines(server: ServerProcess, front_end: str) -> list[str]:
    return [
        line.strip()
        for line in list(server.output)
        if f"{front_end}: refused a connection from 127.0.0.1" in line
    ]


def test_the_go_client_without_a_token_is_logged_once(server: ServerProcess) -> None:
    """The Go reference client's handshake (flags 0, no AUTH) against a server with tokens,
    over and over: each is refused, and the log says so in one line naming the address."""
    name = b"CartPole-v1"
    for _ in range(RETRIES):
        with socket.create_connection((server.host, server.ports["gym-socket"]), 30) as sock:
            sock.sendall(b"\x00" + struct.pack("<I", len(name)) + name)
            size = struct.unpack("<I", exact(sock, 4))[0]
            assert exact(sock, size) == b"this server requires a token"
    assert wait_until(lambda: refusal_lines(server, "gym-socket"), timeout=10)
    lines = refusal_lines(server, "gym-socket")
    assert len(lines) == 1, lines
    assert "no AUTH flag" in lines[0], lines


def test_http_and_grpc_refusals_are_logged_once_per_address(server: ServerProcess) -> None:
    base = f"http://{server.host}:{server.ports['http']}"
    for _ in range(RETRIES):
        assert httpx.post(f"{base}/reset", json={}, timeout=30).status_code == 401
    for _ in range(5):
        with (
            grpc.insecure_channel(f"{server.host}:{server.ports['grpc']}") as channel,
            pytest.raises(grpc.RpcError),
            connection.Connection(channel) as conn,
        ):
            conn.send(dm_env_rpc_pb2.ResetRequest())
    assert wait_until(
        lambda: refusal_lines(server, "http") and refusal_lines(server, "dm_env_rpc"), timeout=10
    )
    http_lines, grpc_lines = refusal_lines(server, "http"), refusal_lines(server, "dm_env_rpc")
    assert len(http_lines) == 1 and "no token (POST '/reset')" in http_lines[0], http_lines
    assert len(grpc_lines) == 1 and "no token" in grpc_lines[0], grpc_lines
