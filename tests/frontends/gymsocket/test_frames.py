"""Large frames over gym-socket: the server writes them from the env's own array."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from envwire import messages as m
from envwire.client.gymsocket import GymSocketTransport
from envwire.errors import InvalidActionError
from envwire.protocols.gymsocket import ClientConnection
from envwire.protocols.gymsocket.lean import StepLayout
from envwire.sockets import MAX_BUSY_POLL_US
from envwire.testing import ServerProcess

ENV = "inplace/Frames-v0"


@pytest.fixture(scope="module")
def frames_server() -> Iterator[ServerProcess]:
    with ServerProcess([f"{ENV}=envwire.testing.envs:InPlaceFramesEnv@inline"]) as server:
        yield server


def owned_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each in-place read of the client (a lean step's own read of its reply's
    buffer, and the codec's read of the rest of a frame that came in pieces) read a whole
    frame (filled as they come)."""
    reads: list[bool] = []
    step_read, owned_read = StepLayout.read, ClientConnection.lean_owned_reply

    def read(self: StepLayout, view: memoryview, size: int, copy: bool = True) -> Any:
        result = step_read(self, view, size, copy)
        if not copy:
            reads.append(result is not None)
        return result

    def owned(self: ClientConnection, view: memoryview, size: int) -> Any:
        result = owned_read(self, view, size)
        reads.append(result is not None)
        return result

    monkeypatch.setattr(StepLayout, "read", read)
    monkeypatch.setattr(ClientConnection, "lean_owned_reply", owned)
    return reads


def test_pipelined_frames_are_each_their_own_steps(frames_server: ServerProcess) -> None:
    """The env overwrites one array in place every step: each reply still carries the frame
    of its own step, though the server reads and handles the requests together."""
    transport = GymSocketTransport("127.0.0.1", frames_server.ports["gym-socket"], ENV)
    try:
        transport.send(m.Reset(seed=0))
        for _ in range(12):
            transport.send(m.Step(np.int64(0)))
        reset = transport.receive()
        assert isinstance(reset, m.ResetReply)
        assert not reset.observation.any()
        for t in range(1, 13):
            reply = transport.receive()
            assert isinstance(reply, m.StepReply)
            assert reply.observation.shape == (84, 84, 4)
            assert (reply.observation == t).all(), f"step {t} carried another step's frame"
    finally:
        transport.close()


@pytest.mark.parametrize("busy_poll_us", [0, MAX_BUSY_POLL_US], ids=["blocking", "polled"])
def test_frames_one_step_at_a_time_are_each_their_own(
    frames_server: ServerProcess, busy_poll_us: int
) -> None:
    """The usual step, request and reply one at a time (both ends' lean paths, the frame
    written from the env's array after the first, and read in place by a client that blocks
    or polls for it): every frame is its own step's, across resets."""
    transport = GymSocketTransport(
        "127.0.0.1", frames_server.ports["gym-socket"], ENV, busy_poll_us=busy_poll_us
    )
    try:
        for episode in range(3):
            obs, _ = transport.reset_env(seed=episode)
            assert not obs.any()
            for t in range(1, 41):
                obs, reward, terminated, truncated, info = transport.step(np.int64(0))
                assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
                assert (obs == t).all(), f"step {t} of episode {episode} carried another frame"
                assert (reward, terminated, truncated, info) == (0.0, False, False, {})
    finally:
        transport.close()


def test_every_frame_keeps_its_own_buffer_and_errors_between_are_errors(
    frames_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client reads each large frame into a buffer of its reply's own, which the frame
    keeps: frames kept from earlier steps still hold their own step's bytes after later
    steps. A refused step between them is its error, read by the general path; the frames
    after it are read in place again."""
    owned = owned_reads(monkeypatch)
    transport = GymSocketTransport("127.0.0.1", frames_server.ports["gym-socket"], ENV)
    try:
        transport.reset_env(seed=0)
        kept = []
        for t in range(1, 31):
            if t % 10 == 0:
                with pytest.raises(InvalidActionError):
                    transport.step(np.int64(7))  # Discrete(4): refused, nothing stepped
            kept.append(transport.step(np.int64(0))[0])
    finally:
        transport.close()
    for t, frame in enumerate(kept, 1):
        assert (frame == t).all(), f"the frame of step {t} changed after it was returned"
        assert frame.flags.writeable and frame.flags.c_contiguous
    assert owned.count(True) >= 28  # all but the first (which taught the layout)
    assert owned.count(False) == 3  # the refusals


@contextlib.contextmanager
def trickling_proxy(port: int, chunk: int) -> Iterator[int]:
    """A local port whose one connection goes to ``port``, the server's bytes passed on in
    ``chunk``-byte pieces a little apart (the client's bytes as they come): a frame then
    arrives in many reads."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def pump(source: socket.socket, sink: socket.socket, size: int, pause: float) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(size):
                sink.sendall(data)
                time.sleep(pause)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def run() -> None:
        with contextlib.suppress(OSError):
            client, _ = listener.accept()
            upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threads = [
                threading.Thread(target=pump, args=(client, upstream, 65536, 0.0), daemon=True),
                threading.Thread(target=pump, args=(upstream, client, chunk, 0.002), daemon=True),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            client.close()
            upstream.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(10)


def test_frames_that_arrive_in_pieces_are_read_in_place(
    frames_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each frame comes in 4 KiB pieces: the client reads the rest of it into the same
    buffer of its own, and every frame is its own step's."""
    owned = owned_reads(monkeypatch)
    with trickling_proxy(frames_server.ports["gym-socket"], 4096) as port:
        transport = GymSocketTransport("127.0.0.1", port, ENV)
        try:
            transport.reset_env(seed=0)
            kept = [transport.step(np.int64(0))[0] for _ in range(20)]
        finally:
            transport.close()
    for t, frame in enumerate(kept, 1):
        assert (frame == t).all(), f"step {t} carried another frame"
    assert owned.count(True) >= 19  # all but the first, which taught the layout
    assert owned.count(False) > 0  # reads that found a frame not yet whole, read on
