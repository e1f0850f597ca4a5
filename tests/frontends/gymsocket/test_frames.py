"""Large frames over gym-socket: the server writes them from the env's own array."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from envwire import messages as m
from envwire.client.gymsocket import GymSocketTransport
from envwire.testing import ServerProcess

ENV = "inplace/Frames-v0"


@pytest.fixture(scope="module")
def frames_server() -> Iterator[ServerProcess]:
    with ServerProcess([f"{ENV}=envwire.testing.envs:InPlaceFramesEnv@inline"]) as server:
        yield server


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


def test_frames_one_step_at_a_time_are_each_their_own(frames_server: ServerProcess) -> None:
    """The usual step, request and reply one at a time (both ends' lean paths, the frame
    written from the env's array after the first): every frame is its own step's, across
    resets."""
    transport = GymSocketTransport("127.0.0.1", frames_server.ports["gym-socket"], ENV)
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
