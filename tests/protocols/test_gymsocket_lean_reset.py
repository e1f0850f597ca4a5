"""The usual reset's lean paths give what the general paths give, for every space: the
client's read the same observations, infos and errors; the server's write the same bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire import messages as m
from envwire.errors import EnvError, EnvwireError
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, Flags, ServerConnection
from envwire.protocols.gymsocket.packets import CODE_BY_DTYPE
from tests.protocols.gymsocketpair import (
    ACTIONS,
    EXTENDED,
    connected_client,
    connected_server,
    same_reads,
)
from tests.spaces_catalog import IDS, SPACES, assert_same

_EXTENDED, _ACTIONS = EXTENDED, ACTIONS
_server = connected_server
_FIXED = (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)


def _open(observation_space: spaces.Space[Any], flags: Flags = _EXTENDED) -> ClientConnection:
    return connected_client(flags, observation_space)


def _joined(reply: bytes | list[Any]) -> bytes:
    return reply if isinstance(reply, bytes) else b"".join(bytes(b) for b in reply)


def _general(client: ClientConnection, reply: bytes) -> Any:
    client.receive_data(reply)
    event = client.next_event()
    if isinstance(event, m.ResetReply):
        return event.observation, event.info
    if isinstance(event, m.StepReply):
        return event.observation, event.reward, event.terminated, event.truncated, event.info
    return event


def _lean_reset(client: ClientConnection, reply: bytes) -> tuple[Any, bool]:
    """What the lean reset read gives for ``reply``, falling back as the transport does; and
    whether the lean read read it."""
    inbox = memoryview(bytearray(len(reply) + 64))
    inbox[: len(reply)] = reply
    result = client.lean_reset_reply(inbox, len(reply))
    if result is not None:
        return result, True
    client.receive_view(inbox[: len(reply)])
    event = client.next_event()
    assert event is not NEED_DATA
    return (event.observation, event.info) if isinstance(event, m.ResetReply) else event, False


def _travels_as_array(sample: Any) -> bool:
    return (
        type(sample) is np.ndarray
        and (sample.dtype == np.uint8 or sample.dtype in CODE_BY_DTYPE)
        and sample.dtype.isnative
    )


def _step(server: ServerConnection, clients: list[ClientConnection], obs: Any) -> None:
    """One usual step through ``server`` and each client (it teaches the step's layout)."""
    for client in clients:
        request = client.send_request(m.Step(1))
        server.receive_data(request)
        assert isinstance(server.next_event(), m.Step)
        _general(client, server.send_reply(m.StepReply(obs, 1.0, False, False, {})))


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_resets_read_what_the_general_path_reads(name: str, space: Any) -> None:
    general, lean = _open(space), _open(space)
    server = _server(space)
    used = 0
    for t, info in enumerate([{}, {}, {"lives": 3}, {}]):
        _step(server, [general, lean], space.sample())
        request = general.send_request(m.Reset())
        assert lean.lean_reset_request(None, None) == request
        server.receive_data(request)
        assert server.next_event() == m.Reset()
        reply = server.send_reply(m.ResetReply(space.sample(), info))
        expected = _general(general, reply)
        got, was_lean = _lean_reset(lean, reply)
        assert_same(got, expected, f"{name}, reset {t}")
        used += was_lean
        assert not lean.buffered
    # An array of a fixed shape is read lean once a usual step taught its layout, but for
    # the reset with an info.
    if isinstance(space, _FIXED) and _travels_as_array(space.sample()):
        assert used == 3
    elif not _travels_as_array(space.sample()):
        assert used == 0


def test_an_error_reset_reply_takes_the_general_path_with_its_error() -> None:
    space = spaces.Box(-1, 1, (4,), np.float32)
    lean, server = _open(space), _server(space)
    _step(server, [lean], space.sample())
    server.receive_data(lean.lean_reset_request(None, None) or b"")
    assert server.next_event() == m.Reset()
    reply = server.send_error(EnvError("CartPole-v1: reset raised RuntimeError: no"))
    assert reply is not None
    got, was_lean = _lean_reset(lean, reply)
    assert not was_lean
    assert isinstance(got, EnvError)
    assert str(got) == "CartPole-v1: reset raised RuntimeError: no"
    assert not lean.buffered


def test_a_reset_reply_of_another_layout_is_read_by_the_general_path() -> None:
    space = spaces.Box(-1, 1, (4,), np.float32)
    lean, server = _open(space), _server(space)
    _step(server, [lean], space.sample())
    other = np.zeros(5, np.float64)  # another dtype and shape than the step's
    server.receive_data(lean.lean_reset_request(None, None) or b"")
    server.next_event()
    got, was_lean = _lean_reset(lean, server.send_reply(m.ResetReply(other, {})))
    assert not was_lean
    assert_same(got, (other, {}))


@pytest.mark.parametrize(
    ("flags", "seed", "options"),
    [
        (_EXTENDED, 3, None),  # seeded: JSON the server parses
        (_EXTENDED, None, {"low": 0}),
        (Flags.EXTENDED, None, None),  # extended without error replies
        (Flags.VECTOR | _EXTENDED, None, None),
        (Flags(0), 3, None),  # the seed's reset has no seed: the general path says so
    ],
)
def test_the_lean_reset_is_only_the_usual_one_of_one_env_connections(
    flags: Flags, seed: Any, options: Any
) -> None:
    assert _open(spaces.Discrete(3), flags).lean_reset_request(seed, options) is None


@pytest.mark.parametrize("flags", [Flags(0), Flags.ERRORS], ids=["seed", "errors"])
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_seed_lean_resets_read_what_the_general_path_reads(
    name: str, space: Any, flags: Flags
) -> None:
    general, lean = _open(space, flags), _open(space, flags)
    server = ServerConnection()
    server.receive_data(ClientConnection(flags).send_handshake("x"))
    server.next_event()
    server.set_spaces(_ACTIONS, space)
    used = 0
    for t in range(3):
        request = general.send_request(m.Reset())
        assert lean.lean_reset_request(None, None) == request == b"\x00"
        assert server.lean_step(request) == m.Reset()
        try:
            reply = _joined(server.send_reply_buffers(m.ResetReply(space.sample(), {})))
        except EnvwireError:  # a space the seed's replies cannot carry
            return
        expected = _general(general, reply)
        got, was_lean = _lean_reset(lean, reply)
        assert_same(got, expected, f"{name}, reset {t}")
        used += was_lean
        assert not lean.buffered
    flat = type(space) is spaces.Box and len(space.shape) == 1 and space.shape[0] > 0
    assert used == (3 if flat and space.dtype in (np.float32, np.float64) else 0), name


@pytest.mark.parametrize(
    "reply",
    [
        b"\x00\x03\x00\x00\x00[1]",  # the wrong length
        b"\x00\x0b\x00\x00\x00[1.0,2.0,3.0]",  # the text's length too short
        b"\x00\x0d\x00\x00\x00[1.0,2.0,1e39]",  # out of float32's range
        b"\x01\x0d\x00\x00\x00[1.0,2.0,3.0]",  # another observation kind
    ],
)
def test_a_seed_reset_reply_the_lean_read_cannot_read_is_the_general_paths(reply: bytes) -> None:
    space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    general, lean = _open(space, Flags(0)), _open(space, Flags(0))
    general.send_request(m.Reset())
    assert lean.lean_reset_request(None, None) == b"\x00"
    assert not same_reads(lambda: _general(general, reply), lambda: _lean_reset(lean, reply))


def test_no_lean_reset_while_another_request_is_in_flight() -> None:
    client = _open(spaces.Box(-1, 1, (4,), np.float32))
    client.send_request(m.Step(0))
    assert client.lean_reset_request(None, None) is None


# -- the server's end ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_reset_replies_are_the_bytes_the_general_path_writes(
    name: str, space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    general, lean = _server(space), _server(space)
    usual = ClientConnection(_EXTENDED)
    usual.send_handshake("x")
    for t, info in enumerate([{}, {}, {"lives": 3}, {}]):
        step = b"\x08\x00\x01\x00\x00\x001"
        obs = space.sample()
        for server in (general, lean):  # a usual step teaches the lean reply's layout
            server.receive_data(step)
            assert isinstance(server.next_event(), m.Step)
        reply = m.StepReply(obs, 0.5, False, False, {})
        assert _joined(lean.send_reply_buffers(reply)) == general.send_reply(reply)
        reset = usual.send_request(m.Reset())
        for server in (general, lean):
            server.receive_data(reset)
            assert server.next_event() == m.Reset()
        sample: Any = space.sample()
        answer = m.ResetReply(sample, info)
        expected = general.send_reply(answer)
        lean_layout = not info and type(obs) is np.ndarray and obs.dtype is lean._lean_dtype
        if lean_layout and obs.shape == np.shape(sample):  # no general path, then
            monkeypatch.setattr(lean, "send_reply", None)
        assert _joined(lean.send_reply_buffers(answer)) == expected, f"{name}, reset {t}"
        monkeypatch.undo()
        assert not lean._pending and not general._pending


def test_the_servers_lean_step_actions_are_next_events_however_many_and_often() -> None:
    """Each integer action's step packet is kept with its request for the lean step (up to a
    bound): repeated and past the bound, every step is the event the general path reads."""
    lean, general = _server(spaces.Box(-1, 1, (4,), np.float32)), None
    for action in [*range(1100), 5, 1099, 0, 12345678901234567]:
        digits = str(action).encode()
        request = b"\x08\x00" + len(digits).to_bytes(4, "little") + digits
        general = _server(spaces.Box(-1, 1, (4,), np.float32))
        general.receive_data(request)
        expected = general.next_event()
        got = lean.lean_step(request)
        assert isinstance(got, m.Step) and isinstance(expected, m.Step)
        assert_same(got.action, expected.action, f"action {action}")
        lean.send_error(EnvError("answered"))  # each request waits for its reply
    assert len(lean._lean) == 1024
