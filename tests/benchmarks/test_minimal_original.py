"""The minimal server of the original protocol (``benchmarks/minimal_original.py``), the baseline
of ``bench_original.py``: it writes envwire's bytes, and envwire's own client steps through it."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import gymnasium
import numpy as np
import pytest

import envwire
from envwire.protocols.gymsocket import Flags
from envwire.testing import ServerProcess
from minimal_original import SEEDED_ENV, check_same_bytes, minimal_original_server
from tests.benchmarks.conftest import BENCHMARKS

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def minimal() -> Iterator[int]:
    with minimal_original_server() as (port, _):
        yield port


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(["CartPole-v1", SEEDED_ENV], cwd=BENCHMARKS) as running:
        yield running


def test_the_minimal_server_answers_with_envwire_servers_bytes(
    minimal: int, server: ServerProcess
) -> None:
    steps = 64
    compared = check_same_bytes(minimal, server.ports["gym-socket"], steps)
    # the handshake, two spaces, a reset, the steps, and a reset after each episode's end
    assert compared > 1 + 3 + steps


def test_the_check_sees_other_observations(minimal: int, server: ServerProcess) -> None:
    # envwire's plain CartPole starts from another state: the same layout, other values
    with pytest.raises(AssertionError, match="replies differ"):
        check_same_bytes(minimal, server.ports["gym-socket"], 8, env_id="CartPole-v1")


def test_envwire_client_steps_a_real_cartpole_through_it(minimal: int) -> None:
    local = gymnasium.make("CartPole-v1")
    expected, _ = local.reset(seed=0)  # the minimal server seeds a connection's first reset
    env = envwire.make(f"gym-socket://127.0.0.1:{minimal}/CartPole-v1", flags=Flags(0))
    try:
        obs, _ = env.reset()
        np.testing.assert_array_equal(obs, expected)
        ended = False
        while not ended:  # always pushing right ends the episode within a few dozen steps
            obs, reward, terminated, truncated, info = env.step(1)
            expected, want, done, _, _ = local.step(1)
            np.testing.assert_array_equal(obs, expected)
            assert (reward, terminated, info) == (want, done, {})
            ended = terminated or truncated
        obs, _ = env.reset()  # a second reset: unseeded, the episode restarts
        assert abs(float(obs[0])) < 0.05
    finally:
        env.close()


def test_a_request_in_pieces_is_answered_whole(minimal: int) -> None:
    with socket.create_connection(("127.0.0.1", minimal), 30) as sock:
        sock.settimeout(30)
        sock.sendall(b"\x00" + struct.pack("<I", 11) + b"CartPole-v1")
        assert sock.recv(4) == b"\x00\x00\x00\x00"
        sock.sendall(b"\x00")  # the reset
        head = sock.recv(5, socket.MSG_WAITALL)
        sock.recv(struct.unpack_from("<I", head, 1)[0], socket.MSG_WAITALL)
        step = b"\x01\x00" + struct.pack("<I", 1) + b"1"
        for byte in step:  # one byte at a time: the step is answered once it is whole
            sock.sendall(bytes([byte]))
        head = sock.recv(5, socket.MSG_WAITALL)
        assert head[0] == 0  # a JSON observation
        text = sock.recv(struct.unpack_from("<I", head, 1)[0], socket.MSG_WAITALL)
        assert len(_floats(text)) == 4
        reward, done = struct.unpack("<d?", sock.recv(9, socket.MSG_WAITALL))
        assert (reward, done) == (1.0, False)
        assert sock.recv(6, socket.MSG_WAITALL) == struct.pack("<I", 2) + b"{}"


def _floats(text: bytes) -> list[float]:
    return [float(word) for word in text.decode().strip("[]").split(",")]
