"""dm_env_rpc with tokens and TLS (the official Connection), and per-address stream bounds."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from dm_env_rpc.v1 import connection, dm_env_adaptor

import envwire
from envwire.errors import UnauthenticatedError
from envwire.testing import ServerProcess, wait_until
from tests.server.security.conftest import OTHER_TOKEN, TOKEN, Secrets, secured, serve

METADATA = [("authorization", f"Bearer {TOKEN}")]


def target(server: ServerProcess) -> str:
    return f"{server.host}:{server.ports['grpc']}"


@pytest.fixture(scope="module")
def token_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("grpc-token")
    settings = {**secured(secrets), "max_connections_per_token": 3}
    with serve(tmp, ["grpc"], **settings) as server:
        yield server


def play(conn: connection.Connection) -> None:
    env, world = dm_env_adaptor.create_and_join_world(conn, {"env": "CartPole-v1"}, {})
    try:
        env.reset()
        assert env.step({"action": 1}).reward == 1.0
    finally:
        env.close()
        conn.send(dm_env_adaptor.dm_env_rpc_pb2.DestroyWorldRequest(world_name=world))


def test_the_official_connection_with_metadata(token_server: ServerProcess) -> None:
    with (
        grpc.insecure_channel(target(token_server)) as channel,
        connection.Connection(channel, metadata=METADATA) as conn,
    ):
        play(conn)


@pytest.mark.parametrize("metadata", [None, [("authorization", f"Bearer {OTHER_TOKEN}")]])
def test_streams_without_the_token_end_unauthenticated(
    token_server: ServerProcess, metadata: list[tuple[str, str]] | None
) -> None:
    with (
        grpc.insecure_channel(target(token_server)) as channel,
        pytest.raises(grpc.RpcError) as info,
        connection.Connection(channel, metadata=metadata) as conn,
    ):
        play(conn)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
    assert OTHER_TOKEN not in str(info.value)


def test_envwire_clients_take_the_token(token_server: ServerProcess) -> None:
    url = f"grpc://{target(token_server)}/CartPole-v1"
    with pytest.raises(UnauthenticatedError):
        envwire.make(url)
    env = envwire.make(url, token=TOKEN)
    env.reset(seed=0)
    env.close()
    envs = envwire.make_vec(url, 4, token=TOKEN)
    envs.reset(seed=0)
    envs.close()
    from envwire.adapters.dmenv import make_dm_env

    dm = make_dm_env(url, token=TOKEN)
    dm.reset()
    dm.close()


def test_streams_per_token_are_capped(token_server: ServerProcess) -> None:
    """With tokens, a client's streams count by its token (a principal), not its address."""
    url = f"grpc://{target(token_server)}/CartPole-v1"
    held = [envwire.make(url, token=TOKEN) for _ in range(3)]
    try:
        with (
            grpc.insecure_channel(target(token_server)) as channel,
            pytest.raises(grpc.RpcError) as info,
            connection.Connection(channel, metadata=METADATA) as conn,
        ):
            play(conn)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        details = info.value.details()  # type: ignore[attr-defined]
        assert "client token " in details and "holds 3 streams" in details
    finally:
        for env in held:
            env.close()
    envwire.make(url, token=TOKEN).close()


def test_huge_ids_and_messages(token_server: ServerProcess) -> None:
    """A 50 MB id cost 2.1 GiB and came back whole; 16 MiB is the largest message now."""
    with grpc.insecure_channel(target(token_server)) as channel:
        with connection.Connection(channel, metadata=METADATA) as conn:
            with pytest.raises(Exception) as info:
                dm_env_adaptor.create_and_join_world(conn, {"env": "x" * 1_000_000}, {})
            assert "at most 256 characters" in str(info.value)
            assert len(str(info.value)) < 500
        with (
            pytest.raises(grpc.RpcError) as big,
            connection.Connection(channel, metadata=METADATA) as conn,
        ):
            dm_env_adaptor.create_and_join_world(conn, {"env": "x" * 20_000_000}, {})
    assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]


def test_the_official_connection_over_tls(secrets: Secrets, tmp_path: Path) -> None:
    with serve(tmp_path, ["grpc"], **secured(secrets, tls=True)) as server:
        ca = Path(secrets.tls.ca).read_bytes()
        credentials = grpc.composite_channel_credentials(
            grpc.ssl_channel_credentials(root_certificates=ca),
            grpc.access_token_call_credentials(TOKEN),
        )
        with (
            grpc.secure_channel(target(server), credentials) as channel,
            connection.Connection(channel) as conn,
        ):
            play(conn)
        with (
            grpc.insecure_channel(target(server)) as channel,  # plaintext to a TLS port
            pytest.raises(grpc.FutureTimeoutError),
        ):
            grpc.channel_ready_future(channel).result(timeout=3)


# --- connections that never open a stream

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame


def still_open(socks: list[socket.socket]) -> list[socket.socket]:
    """The sockets the server has not closed (what it sent, its SETTINGS, is read away)."""
    alive = []
    for sock in socks:
        try:
            while sock.recv(65536, socket.MSG_DONTWAIT):
                pass
        except BlockingIOError:
            alive.append(sock)
        except OSError:
            pass
    return alive


def fds_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture(scope="module")
def deadline_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("grpc-deadline")
    settings = {**secured(secrets), "handshake_timeout": DEADLINE, "max_connections": 500}
    with serve(tmp, ["grpc"], envs=["CartPole-v1"], **settings) as server:
        yield server


DEADLINE = 3.0


def test_idle_connections_without_a_token_are_closed_at_the_deadline(
    deadline_server: ServerProcess,
) -> None:
    """The attack: 400 connections that send the HTTP/2 preface (half of them a SETTINGS frame
    too) and nothing more, no token, no stream. Every one is closed within the handshake
    deadline (plus slack for a busy machine), and the server's descriptors go back."""
    assert deadline_server.process is not None
    pid = deadline_server.process.pid
    before = fds_of(pid)
    socks = []
    try:
        for i in range(400):
            sock = socket.create_connection((deadline_server.host, deadline_server.ports["grpc"]))
            sock.sendall(PREFACE + (SETTINGS if i % 2 else b""))
            socks.append(sock)
        began = time.monotonic()
        assert wait_until(lambda: not still_open(socks), timeout=DEADLINE + 15, every=0.2)
        assert time.monotonic() - began < DEADLINE + 15
        assert wait_until(lambda: fds_of(pid) <= before + 5, timeout=10)
    finally:
        for sock in socks:
            sock.close()


def test_a_stream_that_waits_longer_than_the_deadline_is_kept(
    deadline_server: ServerProcess,
) -> None:
    """Only connections without a stream are closed: a client that thinks between steps for
    longer than the deadline goes on, and a channel closed between two streams reconnects
    (the two clients wait out the deadline at once)."""
    with (
        grpc.insecure_channel(target(deadline_server)) as channel,
        connection.Connection(channel, metadata=METADATA) as conn,
        grpc.insecure_channel(target(deadline_server)) as between,
    ):
        env, world = dm_env_adaptor.create_and_join_world(conn, {"env": "CartPole-v1"}, {})
        env.reset()
        with connection.Connection(between, metadata=METADATA) as other:
            play(other)
        # the thinking client's stream stays open; the other channel's connection is closed
        time.sleep(DEADLINE + 1)
        assert env.step({"action": 1}).reward == 1.0
        env.close()
        conn.send(dm_env_adaptor.dm_env_rpc_pb2.DestroyWorldRequest(world_name=world))
        with connection.Connection(between, metadata=METADATA) as other:
            play(other)


def test_connections_past_max_connections_are_refused_at_once(
    secrets: Secrets, tmp_path: Path
) -> None:
    """With a deadline of a minute, whatever closes within 20 s is the cap's doing."""
    settings = {**secured(secrets), "handshake_timeout": 60, "max_connections": 50}
    socks = []
    with serve(tmp_path, ["grpc"], envs=["CartPole-v1"], **settings) as server:
        try:
            for _ in range(60):
                sock = socket.create_connection((server.host, server.ports["grpc"]))
                sock.sendall(PREFACE)
                socks.append(sock)
            assert wait_until(lambda: len(still_open(socks)) == 50, timeout=20, every=0.2)
            time.sleep(1)
            assert len(still_open(socks)) == 50
        finally:
            for sock in socks:
                sock.close()
