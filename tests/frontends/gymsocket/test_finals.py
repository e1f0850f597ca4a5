"""SameStep vector sessions with and without the FINAL_OBS flag, against a real server.

envwire's client asks for FINAL_OBS in SameStep mode; a client that does not (an older one, a
third-party one) gets the final observations inside the info JSON, and both read the same
steps. A server from before the flag refuses it as unknown: the client asks again without it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

import envwire
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import Flags
from envwire.protocols.gymsocket.packets import pack_field
from envwire.testing import ServerProcess

N = 4


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(["CartPole-v1"]) as running:
        yield running


def _flags(env: object) -> Flags:
    return env.transport.flags  # type: ignore[attr-defined,no-any-return]


def _steps(env: object, count: int = 80) -> list[object]:
    env.reset(seed=5)  # type: ignore[attr-defined]
    return [env.step(np.arange(N) % 2) for _ in range(count)]  # type: ignore[attr-defined]


def test_same_step_sessions_ask_for_final_obs_and_read_what_json_gives(
    server: ServerProcess,
) -> None:
    url = server.url("gym-socket", "CartPole-v1")
    binary = envwire.make_vec(url, N, autoreset_mode="SameStep")
    plain = envwire.make_vec(url, N, autoreset_mode="SameStep", flags=DEFAULT_FLAGS)
    other = envwire.make_vec(url, N, autoreset_mode="NextStep")
    try:
        assert _flags(binary) & Flags.FINAL_OBS
        assert not _flags(plain) & Flags.FINAL_OBS
        assert not _flags(other) & Flags.FINAL_OBS
        got, want = _steps(binary), _steps(plain)
        ended = [step for step in want if "final_obs" in step[4]]  # type: ignore[index]
        assert len(ended) > 10
        for t, (a, b) in enumerate(zip(got, want, strict=True)):
            assert data_equivalence(a, b, exact=True), t
            assert list(a[4]) == list(b[4]), t  # type: ignore[index]
    finally:
        for env in (binary, plain, other):
            env.close()


@contextlib.contextmanager
def _old_server(port: int) -> Iterator[int]:
    """A proxy to ``port`` that refuses FINAL_OBS as a server from before it did (the handshake
    error for an unknown flag bit), and passes any other connection through."""
    listener = socket.create_server(("127.0.0.1", 0))
    refused: list[int] = []

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            first = client.recv(1)
            if first and first[0] & 0x20:
                refused.append(first[0])
                error = b"unknown handshake flags 0x20 (known: 0x01 errors, 0x02 monitor reply, "
                client.sendall(pack_field(error + b"0x04 extended, 0x08 vector, 0x10 auth)"))
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", port))
            upstream.sendall(first)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        assert refused, "the client never asked for FINAL_OBS"


def test_a_server_without_final_obs_is_asked_again_without_it(server: ServerProcess) -> None:
    with _old_server(server.ports["gym-socket"]) as port:
        old = envwire.make_vec(
            f"gym-socket://127.0.0.1:{port}/CartPole-v1", N, autoreset_mode="SameStep"
        )
        plain = envwire.make_vec(
            server.url("gym-socket", "CartPole-v1"),
            N,
            autoreset_mode="SameStep",
            flags=DEFAULT_FLAGS,
        )
        try:
            assert not _flags(old) & Flags.FINAL_OBS
            for t, (a, b) in enumerate(zip(_steps(old, 30), _steps(plain, 30), strict=True)):
                assert data_equivalence(a, b, exact=True), t
        finally:
            old.close()
            plain.close()
