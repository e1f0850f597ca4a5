"""gym-socket with tokens, TLS and the bounds on what strangers can hold."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

import envwire
from envwire.errors import TransportError, UnauthenticatedError
from envwire.testing import ServerProcess
from tests.rawsock import closed_by_server, exact
from tests.server.security.conftest import (
    OTHER_TOKEN,
    TOKEN,
    Secrets,
    secured,
    serve,
    threads_of,
)

AUTH = 0x10


def field(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def handshake(sock: socket.socket, env_id: str, flags: int = 0, token: str | None = None) -> str:
    """Send a handshake by hand; the server's reply string ('' = open)."""
    message = bytes([flags]) + (field(token.encode()) if token is not None else b"")
    sock.sendall(message + field(env_id.encode()))
    return read_string(sock)


def read_string(sock: socket.socket) -> str:
    (size,) = struct.unpack("<I", exact(sock, 4))
    return exact(sock, size).decode()

    return True


def connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection((server.host, server.ports["gym-socket"]), timeout=10)


@pytest.fixture(scope="module")
def token_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("gym-token")
    with serve(tmp, ["gym-socket"], **secured(secrets)) as server:
        yield server


def test_a_flags_0_client_is_told_a_token_is_required(token_server: ServerProcess) -> None:
    with connect(token_server) as sock:
        assert handshake(sock, "CartPole-v1") == "this server requires a token"
        assert closed_by_server(sock, 5)


def test_a_wrong_token_is_refused(token_server: ServerProcess) -> None:
    with connect(token_server) as sock:
        reply = handshake(sock, "CartPole-v1", AUTH, OTHER_TOKEN)
        assert reply == "the token was not accepted"
        assert OTHER_TOKEN not in reply
        assert closed_by_server(sock, 5)


def test_the_right_token_opens_the_session(
    token_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    with connect(token_server) as sock:
        assert handshake(sock, "CartPole-v1", AUTH, TOKEN) == ""
    env = envwire.make(token_server.url("gym-socket", "CartPole-v1"), token=TOKEN)
    env.reset(seed=0)
    env.step(0)
    env.close()
    monkeypatch.setenv("ENVWIRE_TOKEN", TOKEN)
    env = envwire.make(token_server.url("gym-socket", "CartPole-v1"))
    env.reset(seed=0)
    env.close()
    monkeypatch.setenv("ENVWIRE_TOKEN", OTHER_TOKEN)
    with pytest.raises(UnauthenticatedError, match="the token was not accepted"):
        envwire.make(token_server.url("gym-socket", "CartPole-v1"))
    monkeypatch.delenv("ENVWIRE_TOKEN")
    with pytest.raises(UnauthenticatedError, match="this server requires a token"):
        envwire.make(token_server.url("gym-socket", "CartPole-v1"))


def test_the_token_is_checked_before_the_env_id(token_server: ServerProcess) -> None:
    """No did-you-mean (nor any lookup) for strangers."""
    with connect(token_server) as sock:
        assert handshake(sock, "CartPol-v1", 0) == "this server requires a token"


@pytest.fixture(scope="module")
def bounded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("gym-bounds")
    settings = {
        "handshake_timeout": 1.5,
        "packet_timeout": 1.5,
        "max_pending": 4,
        "max_pending_per_address": 2,
        "max_connections": 40,
        "max_connections_per_address": 30,
    }
    with serve(tmp, ["gym-socket"], **settings) as server:
        yield server


def test_the_handshake_deadline_holds_against_a_dribbler(bounded_server: ServerProcess) -> None:
    """One byte every 0.3 s used to keep a thread for ever: the deadline is for all of it."""
    with connect(bounded_server) as sock:
        message = b"\x00" + field(b"CartPole-v1")  # 16 bytes: 4.8 s, past the 1.5 s deadline
        for byte in message:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.3)
        # Had the server waited for all of it, it would now answer '' and keep the session.
        assert closed_by_server(sock, 1)


def test_strangers_hold_a_bounded_number_of_threads(bounded_server: ServerProcess) -> None:
    """Silent connections: at most max_pending_per_address of them get a thread; the rest wait
    without one, and all are closed at the deadline. Eight are four times the address's slots
    and twice the server's (max_pending): one thread each would show; the honest client waits
    behind them, two at a time, 1.5 s each."""
    assert bounded_server.process is not None
    pid = bounded_server.process.pid
    time.sleep(0.3)
    before = threads_of(pid)
    silent = [connect(bounded_server) for _ in range(8)]
    time.sleep(0.5)
    during = threads_of(pid)
    assert during - before <= 2 + 1  # two pending slots for this address, and the sweeper
    # An honest client waits its turn behind the strangers, and gets in once they time out.
    env = envwire.make(bounded_server.url("gym-socket", "CartPole-v1"), timeout=30)
    env.reset(seed=0)
    env.close()
    assert all(closed_by_server(sock, 3) for sock in silent)
    for sock in silent:
        sock.close()


def test_connections_per_address_are_capped(bounded_server: ServerProcess) -> None:
    envs = [envwire.make(bounded_server.url("gym-socket", "CartPole-v1")) for _ in range(30)]
    try:
        with pytest.raises(TransportError, match="holds 30 connections"):
            envwire.make(bounded_server.url("gym-socket", "CartPole-v1"))
    finally:
        for env in envs:
            env.close()
    envwire.make(bounded_server.url("gym-socket", "CartPole-v1")).close()


def test_a_packet_has_a_deadline_once_begun(bounded_server: ServerProcess) -> None:
    with connect(bounded_server) as sock:
        assert handshake(sock, "CartPole-v1", 0) == ""
        sock.sendall(b"\x01\x00")  # the start of a Step packet, never finished
        assert closed_by_server(sock, 5)


def test_a_huge_env_id_is_refused_before_it_arrives(bounded_server: ServerProcess) -> None:
    """A 20 MB id once cost 860 MiB: the length alone is refused now, and never echoed."""
    with connect(bounded_server) as sock:
        sock.sendall(b"\x00" + struct.pack("<I", 20_000_000) + b"CartPole-v1" * 100)
        reply = read_string(sock)
        assert "env name" in reply and len(reply) < 200
        assert closed_by_server(sock, 5)
