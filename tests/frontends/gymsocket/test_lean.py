"""The client's lean step over a real server: the same episodes and errors as the general
path, for small observations and for frames that arrive in several reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import envwire
from envwire import messages as m
from envwire.client.gymsocket import GymSocketTransport
from envwire.errors import InvalidActionError
from envwire.protocols.gymsocket import ClientConnection
from envwire.testing import ServerProcess
from tests.spaces_catalog import assert_same

FRAMES = "bench/Frames-v0"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(["CartPole-v1", f"{FRAMES}=envwire.testing.envs:FramesEnv@inline"]) as s:
        yield s


def _general_step(transport: GymSocketTransport, action: Any) -> tuple[Any, ...]:
    reply = transport.request(m.Step(action))
    assert isinstance(reply, m.StepReply)
    return reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info


@pytest.mark.parametrize("env_id", ["CartPole-v1", FRAMES])
def test_lean_episodes_equal_general_ones(
    server: ServerProcess, env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean_reads = []
    original = ClientConnection.lean_step_reply

    def counted(self: ClientConnection, view: memoryview, size: int) -> Any:
        result = original(self, view, size)
        lean_reads.append(result is not None)
        return result

    monkeypatch.setattr(ClientConnection, "lean_step_reply", counted)
    port = server.ports["gym-socket"]
    general = GymSocketTransport("127.0.0.1", port, env_id)
    lean = envwire.make(server.url("gym-socket", env_id))
    try:
        for seed in (0, 1):
            general.request(m.Reset(seed=seed))
            lean.reset(seed=seed)
            for t in range(200):
                action = np.int64(t % 2)
                expected = _general_step(general, action)
                got = lean.step(action)
                assert_same(tuple(got), expected, f"{env_id}, seed {seed}, step {t}")
                if expected[2] or expected[3]:
                    break
    finally:
        general.close()
        lean.close()
    assert sum(lean_reads) >= len(lean_reads) // 2 > 0  # the lean path did the reading


def test_a_refused_action_is_the_same_error_on_both_paths(server: ServerProcess) -> None:
    port = server.ports["gym-socket"]
    general = GymSocketTransport("127.0.0.1", port, "CartPole-v1")
    lean = GymSocketTransport("127.0.0.1", port, "CartPole-v1")
    try:
        errors = []
        for transport, step in ((general, _general_step), (lean, GymSocketTransport.step)):
            transport.request(m.Reset(seed=0))
            for action in (1, 0, 1):  # the lean path learns the reply's layout
                step(transport, action)
            with pytest.raises(InvalidActionError) as caught:
                step(transport, 5)
            errors.append(str(caught.value).split(" in session ")[0])
            step(transport, 1)  # the session goes on
        assert errors[0] == errors[1]
        assert "5" in errors[0]
    finally:
        general.close()
        lean.close()
