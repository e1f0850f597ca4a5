"""TlsSocket: TLS through memory BIOs that behaves like the plain socket it wraps."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envwire.errors import ConfigError
from envwire.sockets import configure_stream
from envwire.sockets.tls import TlsSocket, client_context, server_context
from tests.tlsfiles import TlsFiles, make_tls_files


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def pair(tls_files: TlsFiles) -> Iterator[tuple[TlsSocket, ssl.SSLSocket]]:
    """A server-side TlsSocket and a standard-library client connected to it."""
    listener = socket.create_server(("127.0.0.1", 0))
    client_raw = socket.create_connection(listener.getsockname())
    server_raw, _ = listener.accept()
    listener.close()
    server = TlsSocket(server_raw, server_context(tls_files.cert, tls_files.key), server_side=True)
    done = threading.Thread(target=server.handshake, args=(5.0,))
    done.start()
    client = client_context(tls_files.ca).wrap_socket(client_raw, server_hostname="localhost")
    done.join()
    yield server, client
    client.close()
    server.close()


def test_round_trips_with_the_standard_library(pair: tuple[TlsSocket, ssl.SSLSocket]) -> None:
    server, client = pair
    assert server.version() in ("TLSv1.2", "TLSv1.3")
    client.sendall(b"ping")
    assert server.recv(100) == b"ping"
    big = bytes(range(256)) * 20_000  # many records
    done = threading.Thread(target=server.sendall, args=(big,))
    done.start()
    got = bytearray()
    while len(got) < len(big):
        got += client.recv(1 << 20)
    done.join()
    assert got == big


def test_kernel_timeouts_and_dontwait_behave_as_on_a_plain_socket(
    pair: tuple[TlsSocket, ssl.SSLSocket],
) -> None:
    server, client = pair
    with pytest.raises(BlockingIOError):
        server.recv(100, socket.MSG_DONTWAIT)
    configure_stream(server, 0.2)  # SO_RCVTIMEO: an SSLSocket would retry for ever
    with pytest.raises(BlockingIOError):
        server.recv(100)
    client.sendall(b"late")
    assert server.recv(100) == b"late"
    assert server.send(b"pong", socket.MSG_DONTWAIT) == 4
    assert client.recv(100) == b"pong"


def test_one_reader_many_writers(pair: tuple[TlsSocket, ssl.SSLSocket]) -> None:
    """The front ends write from other threads while one thread blocks in recv."""
    server, client = pair
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(server.recv(100)))
    reader.start()
    writers = [
        threading.Thread(target=server.sendall, args=(f"{n:03d}".encode() * 1000,))
        for n in range(8)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    got = bytearray()
    while len(got) < 8 * 3000:
        got += client.recv(1 << 16)
    chunks = {bytes(got[i : i + 3000]) for i in range(0, len(got), 3000)}
    assert chunks == {f"{n:03d}".encode() * 1000 for n in range(8)}
    client.sendall(b"done")
    reader.join(5)
    assert received == [b"done"]


def test_shutdown_sends_close_notify(pair: tuple[TlsSocket, ssl.SSLSocket]) -> None:
    server, client = pair
    server.shutdown(socket.SHUT_RDWR)
    assert client.recv(100) == b""  # a clean end of stream, not a ragged EOF


def test_peer_end_of_stream(pair: tuple[TlsSocket, ssl.SSLSocket]) -> None:
    server, client = pair
    closing = threading.Thread(target=lambda: _quietly(client.unwrap))  # sends close_notify
    closing.start()
    assert server.recv(100) == b""
    server.shutdown(socket.SHUT_RDWR)
    closing.join(5)
    assert not closing.is_alive()


def test_handshake_deadline_and_plaintext_peers(tls_files: TlsFiles) -> None:
    context = server_context(tls_files.cert, tls_files.key)
    listener = socket.create_server(("127.0.0.1", 0))
    silent = socket.create_connection(listener.getsockname())
    raw, _ = listener.accept()
    with pytest.raises(TimeoutError):
        TlsSocket(raw, context, server_side=True).handshake(0.2)
    raw.close()
    plain = socket.create_connection(listener.getsockname())
    raw, _ = listener.accept()
    plain.sendall(b"\x00\x00\x00\x0bCartPole-v1")  # a gym-socket handshake, not TLS
    with pytest.raises(ssl.SSLError):
        TlsSocket(raw, context, server_side=True).handshake(2.0)
    for sock in (raw, silent, plain, listener):
        sock.close()


def test_client_side_verifies_the_name(tls_files: TlsFiles) -> None:
    context = server_context(tls_files.cert, tls_files.key)
    listener = socket.create_server(("127.0.0.1", 0))
    client_raw = socket.create_connection(listener.getsockname())
    server_raw, _ = listener.accept()
    server = TlsSocket(server_raw, context, server_side=True)
    threading.Thread(target=lambda: _quietly(server.handshake, 5.0), daemon=True).start()
    client = TlsSocket(
        client_raw, client_context(tls_files.ca), server_side=False, server_hostname="wrong.name"
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        client.handshake(5.0)
    for sock in (client_raw, server_raw, listener):
        sock.close()


def _quietly(function: Callable[..., object], *args: object) -> None:
    with contextlib.suppress(OSError, ssl.SSLError):
        function(*args)


def test_bad_files(tls_files: TlsFiles, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load TLS certificate"):
        server_context(tls_files.ca, tls_files.key)  # the key is not the CA's
    with pytest.raises(ConfigError, match="cannot load TLS certificate"):
        server_context(str(tmp_path / "missing.pem"), tls_files.key)
    with pytest.raises(ConfigError, match="cannot load CA certificates"):
        client_context(str(tmp_path / "missing.pem"))
