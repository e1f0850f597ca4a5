"""The lean steps over a real server: the client's, the same episodes and errors as its
general path, for small observations and for frames that arrive in several reads; the
server's, the same bytes as its general path for every handshake's flags."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

import envwire
from envwire import messages as m
from envwire.client.gymsocket import GymSocketTransport, open_vector_url
from envwire.errors import EnvwireError, InvalidActionError
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, Flags
from envwire.protocols.gymsocket.lean import StepLayout
from envwire.testing import ServerProcess
from envwire.testing.envs import DictEnv, FramesEnv
from tests.spaces_catalog import assert_same

FRAMES = "bench/Frames-v0"
DICT = "test/Dict-v0"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    envs = [
        "CartPole-v1",
        f"{FRAMES}=envwire.testing.envs:FramesEnv@inline",
        f"{DICT}=envwire.testing.envs:DictEnv@inline",
    ]
    with ServerProcess(envs) as s:
        yield s


def _counted(monkeypatch: pytest.MonkeyPatch, read: str) -> list[bool]:
    """Whether each call of the codec's lean ``read`` read its reply (filled as they come)."""
    reads: list[bool] = []
    original = getattr(ClientConnection, read)

    def counted(self: ClientConnection, view: memoryview, size: int) -> Any:
        result = original(self, view, size)
        reads.append(result is not None)
        return result

    monkeypatch.setattr(ClientConnection, read, counted)
    return reads


def _general_step(transport: GymSocketTransport, action: Any) -> tuple[Any, ...]:
    reply = transport.request(m.Step(action))
    assert isinstance(reply, m.StepReply)
    return reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info


@pytest.mark.parametrize("env_id", ["CartPole-v1", FRAMES])
def test_lean_episodes_equal_general_ones(
    server: ServerProcess, env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a frame is read in place, into a buffer of its own: docs/protocols/gym-socket.md)
    lean_reads: list[bool] = []
    step_read = StepLayout.read

    def read(self: StepLayout, view: memoryview, size: int, copy: bool = True) -> Any:
        result = step_read(self, view, size, copy)
        assert copy is (env_id != FRAMES)
        lean_reads.append(result is not None)
        return result

    monkeypatch.setattr(StepLayout, "read", read)
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


@pytest.mark.parametrize("env_id", ["CartPole-v1", FRAMES])
def test_lean_resets_equal_general_ones(
    server: ServerProcess, env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean_reads = _counted(monkeypatch, "lean_reset_reply")
    port = server.ports["gym-socket"]
    general = GymSocketTransport("127.0.0.1", port, env_id)
    lean = envwire.make(server.url("gym-socket", env_id))
    try:
        reply = general.request(m.Reset(seed=0))
        assert isinstance(reply, m.ResetReply)
        assert_same(lean.reset(seed=0), (reply.observation, reply.info))
        for episode in range(4):  # the usual resets after the seeded one go on from its seed
            for t in range(200):
                expected = _general_step(general, np.int64(1))
                assert_same(tuple(lean.step(np.int64(1))), expected, f"{env_id}, step {t}")
                if expected[2] or expected[3] or t == 20:
                    break
            reply = general.request(m.Reset())
            assert isinstance(reply, m.ResetReply)
            assert_same(lean.reset(), (reply.observation, reply.info), f"reset {episode}")
    finally:
        general.close()
        lean.close()
    assert lean_reads == [True] * 4  # each usual reset was read lean


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


def test_lean_vector_steps_equal_gymnasiums_own(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean_reads = _counted(monkeypatch, "lean_vector_step")
    local = gymnasium.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), num_envs=4)
    try:
        assert_same(remote.reset(seed=3)[0], local.reset(seed=3)[0])
        for t in range(60):
            actions = np.array([(t + i) % 2 for i in range(4)])
            expected = local.step(actions)
            got = remote.step(actions)
            for i, (a, b) in enumerate(zip(got[:4], expected[:4], strict=True)):
                assert_same(a, b, f"step {t}, field {i}")
    finally:
        local.close()
        remote.close()
    assert sum(lean_reads) >= 50  # the usual replies were read lean


# -- the server's lean step ------------------------------------------------------------------

#: Step actions as their JSON, good ones and each kind of bad one (out of the space, JSON of
#: another type, no JSON).
_ACTIONS = {
    FRAMES: (FramesEnv, [b"1", b"2", b"9", b"[1]", b"x", b"3", b"0"]),
    DICT: (DictEnv, [b"[0.5,-0.5]", b"[2,2]", b"7", b"{", b"[0.25,0.75]"]),
    "CartPole-v1": (CartPoleEnv, [b"1", b"0", b"5", b"[1]", b"x", b"1", b"1"]),
}


def _replies(port: int, flags: Flags, env_id: str, *, general: bool) -> bytes:
    """Every byte the server answers a reset (seeded where the flags allow) and a step with
    each of ``_ACTIONS``, each step followed by a GetSpace: sent alone (the server's lean
    step) or with the GetSpace in the same packet (two requests at once: its general path);
    until the server closes (a connection without error replies is closed at its first
    error) or all are answered."""
    env_class, actions = _ACTIONS[env_id]
    env = env_class()
    codec = ClientConnection(flags)
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:

        def answered(request: bytes, then: bytes = b"") -> bool:
            """Send ``request`` (and ``then``); False when the server closed instead."""
            sock.sendall(request + then)
            while (event := codec.next_event()) is NEED_DATA:
                data = sock.recv(1 << 20)
                if not data:
                    return False
                received.extend(data)
                codec.receive_data(data)
            assert not isinstance(event, Exception) or flags & Flags.ERRORS, event
            return True

        assert answered(codec.send_handshake(env_id))
        codec.set_spaces(env.action_space, env.observation_space)
        seed = 7 if flags & Flags.EXTENDED else None
        assert answered(codec.send_request(m.Reset(seed=seed)))
        for action in actions:
            sample = env.action_space.sample()
            head = codec.send_request(m.Step(sample))  # the packet's expected reply, and head
            packet = head[:2] + len(action).to_bytes(4, "little") + action
            space = codec.send_request(m.GetSpace(m.SpaceKind.ACTION))
            if general:
                if not answered(packet, space) or not answered(b""):
                    break
            elif not answered(packet) or not answered(space):
                break
    return bytes(received)


_EXTENDED = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED


@pytest.mark.parametrize(
    ("flags", "env_id"),
    [
        # Frames repeat without a seed: every handshake's flags, a byte-list observation
        (Flags(0), FRAMES),
        (Flags.ERRORS, FRAMES),
        (_EXTENDED, FRAMES),
        # seeded: JSON actions of a Box, a Dict observation in JSON, a tensor observation
        (_EXTENDED, DICT),
        (_EXTENDED, "CartPole-v1"),
    ],
    ids=["seed-frames", "errors-frames", "extended-frames", "extended-dict", "extended-cartpole"],
)
def test_the_servers_lean_step_answers_the_bytes_of_its_general_path(
    server: ServerProcess, flags: Flags, env_id: str
) -> None:
    port = server.ports["gym-socket"]
    lean = _replies(port, flags, env_id, general=False)
    general = _replies(port, flags, env_id, general=True)
    assert lean == general
    assert len(lean) > 500  # observations came


def _outcome(step: Any) -> Any:
    """What a step gave: its batches, or its error's class and words (without the session)."""
    try:
        return step()[:4]
    except EnvwireError as exc:
        return type(exc).__name__, str(exc).split(" in session ")[0]


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_lean_vector_steps_and_errors_equal_general_ones(
    server: ServerProcess, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make_vec's lean step beside the general requests of the same session kind: the same
    batches in every autoreset mode, and the same errors for batches the server refuses."""
    lean_reads = _counted(monkeypatch, "lean_vector_step")
    url = server.url("gym-socket", "CartPole-v1")
    lean = envwire.make_vec(url, 4, autoreset_mode=mode)
    general = open_vector_url(url, num_envs=4, autoreset_mode=mode)

    def general_step(actions: Any) -> tuple[Any, ...]:
        reply = general.request(m.Step(actions))
        assert isinstance(reply, m.VectorStepReply)
        return reply.observations, reply.rewards, reply.terminations, reply.truncations

    bad = [np.array([0, 1, 2, 0]), np.zeros(5, np.int64), np.zeros((4, 1), np.int64)]
    try:
        lean.reset(seed=1)
        general.request(m.Reset(seed=1))
        for t in range(40):
            actions = np.array([(t + i) % 2 for i in range(4)])
            if mode == "Disabled" and t and t % 9 == 0:  # Disabled: the caller resets
                lean.reset(seed=t)
                general.request(m.Reset(seed=t))
            expected = _outcome(lambda a=actions: general_step(a))
            assert_same(_outcome(lambda a=actions: lean.step(a)), expected, f"{mode} {t}")
        for actions in bad:
            expected = _outcome(lambda a=actions: general_step(a))
            assert isinstance(expected[0], str), expected  # refused
            assert _outcome(lambda a=actions: lean.step(a)) == expected
    finally:
        lean.close()
        general.close()
    assert sum(lean_reads) >= 20


@pytest.mark.parametrize("env_id", ["CartPole-v1", FRAMES])
def test_sb3s_lean_steps_and_errors_equal_general_ones(
    server: ServerProcess, env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SB3's VecEnv with the final observations read apart (CartPole's episodes end often;
    frames come in several reads) beside the same VecEnv on the general path: the same
    batches, infos and reset infos, and the same errors for batches the server refuses."""
    pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    from envwire.adapters.training.sb3 import SB3VecEnv, make_vec_env

    splits = _counted(monkeypatch, "lean_vector_split")
    url = server.url("gym-socket", env_id)
    lean, general = (make_vec_env(url, 4, seed=2, monitor=False) for _ in range(2))
    assert isinstance(lean, SB3VecEnv) and isinstance(general, SB3VecEnv)
    general.vector._receive_split = None  # the transport's split read, unused
    bad = [np.array([0, 1, 5, 0]), np.zeros(5, np.int64)]
    try:
        assert_same(lean.reset(), general.reset())
        for t in range(30):
            actions = np.array([(t + i) % 2 for i in range(4)])
            assert_same(lean.step(actions), general.step(actions), f"step {t}")
            assert_same(lean.reset_infos, general.reset_infos, f"step {t}")
        for actions in bad:
            errors = []
            for env in (lean, general):
                with pytest.raises(EnvwireError) as raised:
                    env.step(actions)
                errors.append((type(raised.value), str(raised.value)))
            assert errors[0] == errors[1]
        actions = np.zeros(4, np.int64)
        assert_same(lean.step(actions), general.step(actions), "after the errors")
    finally:
        lean.close()
        general.close()
    assert sum(splits) >= 25  # the usual replies were read apart
