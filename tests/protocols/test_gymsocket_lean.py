"""The client codec's lean step reads exactly what its general path reads, for every space.

A lean client and a general one face the same server replies; whatever the lean path cannot
read (a reply in another layout, an info, an error, a reply in pieces) it leaves to the
general path untouched, so both always end with the same results and the same errors.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import EnvwireError, InvalidActionError, ProtocolError
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, Flags, ServerConnection
from envwire.protocols.gymsocket.lean import LeanStep
from envwire.protocols.gymsocket.packets import (
    ACT_TENSOR,
    CODE_BY_DTYPE,
    Packet,
    info_field,
    pack_field,
    pack_tensor,
)
from envwire.protocols.gymsocket.replies import _typed_dict
from envwire.runtime.syncvector import LeanSyncVectorEnv
from tests.protocols.gymsocketpair import (
    ACTIONS,
    EXTENDED,
    connected_client,
    connected_server,
    lean_request,
    same_reads,
)
from tests.spaces_catalog import IDS, SPACES, assert_same

_EXTENDED, _ACTIONS = EXTENDED, ACTIONS
_open, _server = connected_client, connected_server
_FIXED = (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)


def _general(client: ClientConnection, reply: bytes) -> Any:
    client.receive_data(reply)
    event = client.next_event()
    if isinstance(event, m.StepReply):
        return event.observation, event.reward, event.terminated, event.truncated, event.info
    return event


def _lean(
    client: ClientConnection, reply: bytes, pieces: int = 1, step: LeanStep | None = None
) -> tuple[Any, bool]:
    """What the lean path gives for ``reply`` (arriving in ``pieces``), falling back as the
    transport does (first the lean ``step``'s own read, when one is given: then into a
    buffer of its own size, when it has one); and whether the lean path read it."""
    inbox = memoryview(bytearray(max(len(reply) + 64, step.own if step else 0)))
    cut = len(reply) // pieces if pieces > 1 else len(reply)
    inbox[:cut] = reply[:cut]
    size = cut
    if step is not None:
        own = memoryview(bytearray(step.own)) if step.own else inbox
        got = min(cut, len(own))  # (what a receive into that buffer takes)
        own[:got] = reply[:got]
        result = step.read(own, got, not step.own)
        if result is not None:
            assert step.own or not np.shares_memory(np.asarray(result[0]), np.asarray(inbox))
            return result, True
        client.lean_sent()
    result = client.lean_step_reply(inbox, size)
    while result is None:
        wants = client.lean_wants(inbox, size)
        if not size < wants <= len(inbox):
            break
        inbox[size : len(reply)] = reply[size:]  # the rest arrives
        size = len(reply)
        result = client.lean_step_reply(inbox, size)
    if result is not None:
        return result, True
    client.receive_view(inbox[:size])
    event = client.next_event()
    if event is NEED_DATA:
        client.receive_data(reply[size:])
        event = client.next_event()
    if isinstance(event, m.StepReply):
        return (
            event.observation,
            event.reward,
            event.terminated,
            event.truncated,
            event.info,
        ), False
    return event, False


def _travels_as_array(sample: Any) -> bool:
    return (
        type(sample) is np.ndarray
        and (sample.dtype == np.uint8 or sample.dtype in CODE_BY_DTYPE)
        and sample.dtype.isnative
    )


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_steps_read_what_the_general_path_reads(name: str, space: Any) -> None:
    general, lean = _open(_EXTENDED, space), _open(_EXTENDED, space)
    server = _server(space)
    infos = [{}, {}, {"lives": 3}, {}, {}, {}]
    used = 0
    for t, info in enumerate(infos):
        action = np.int64(t % 3) if t % 2 else t % 3
        request = general.send_request(m.Step(action))
        step = lean.lean_step(action)
        assert step is not None and step.request == request
        server.receive_data(request)
        assert isinstance(server.next_event(), m.Step)
        obs = space.sample()
        reply = server.send_reply(m.StepReply(obs, 0.25 * t, t == 4, t == 5, info))
        expected = _general(general, reply)
        got, was_lean = _lean(lean, reply, pieces=2 if t == 3 else 1, step=step)
        assert_same(got, expected, f"{name}, step {t}")
        used += was_lean
        assert not lean.buffered
    # From the second usual reply on, an array of a fixed shape is read lean: steps 1, 3, 4
    # and 5 (step 2 carries an info, step 3 comes in two pieces). Others (JSON, arrays whose
    # shape varies) may be read lean only when a reply's head is the learned one's.
    if isinstance(space, _FIXED) and _travels_as_array(space.sample()):
        assert used == 4
    elif not _travels_as_array(space.sample()):
        assert used == 0


def test_a_lean_step_is_made_once_per_action_while_its_layout_stays() -> None:
    """The lean step of an integer action is kept (the same object again, for any integer
    type of the same value) until a reply teaches another layout; none while a request is in
    flight; other actions' are made each time or not at all."""
    space = spaces.Box(-1, 1, (4,), np.float32)
    client, server = _open(_EXTENDED, space), _server(space)

    def answer(step: LeanStep, obs: Any, info: dict[str, Any]) -> tuple[Any, bool]:
        server.receive_data(step.request)
        server.next_event()
        return _lean(client, server.send_reply(m.StepReply(obs, 1.0, False, False, info)), 1, step)

    first = client.lean_step(1)
    assert first is not None and first.read(memoryview(b"x"), 1, True) is None  # not taught
    assert client.lean_step(1) is not first  # (nothing to keep yet)
    assert answer(first, space.sample(), {})[1] is False  # the general path taught the layout
    kept = client.lean_step(1)
    assert kept is not None and client.lean_step(np.int64(1)) is kept is client.lean_step(1)
    assert client.lean_step(True) is not kept and client.lean_step(np.int64(2)) is not kept
    assert client.lean_step(1.0) is None and client.lean_step(np.float32(1)) is None
    server.receive_data(client.send_request(m.Reset()))  # in flight: no lean step till read
    assert client.lean_step(1) is None
    server.next_event()
    client.receive_data(server.send_reply(m.ResetReply(space.sample(), {})))
    assert isinstance(client.next_event(), m.ResetReply)
    assert client.lean_step(1) is kept
    client2, server2 = _open(_EXTENDED, space), _server(space)
    for obs in (space.sample(), np.zeros(6, np.float32), np.zeros(6, np.float32)):
        step = client2.lean_step(0)
        assert step is not None
        server2.receive_data(step.request)
        server2.next_event()
        reply = server2.send_reply(m.StepReply(obs, 0.0, False, False, {}))
        got, _ = _lean(client2, reply, 1, step)
        assert_same(got, (obs, 0.0, False, False, {}))
    # the layout of 6 floats replaced the first: a lean step of it reads 6 floats
    final = client2.lean_step(0)
    assert final is not None and final is client2.lean_step(0)
    server2.receive_data(final.request)
    server2.next_event()
    obs = np.arange(6, dtype=np.float32)
    got, was_lean = _lean(
        client2, server2.send_reply(m.StepReply(obs, 2.0, True, False, {})), 1, final
    )
    assert was_lean
    assert_same(got, (obs, 2.0, True, False, {}))


@pytest.mark.parametrize("flags", [_EXTENDED, Flags.ERRORS], ids=["extended", "seed+errors"])
def test_an_error_reply_takes_the_general_path_with_its_error(flags: Flags) -> None:
    space = spaces.Box(-1, 1, (4,), np.float32)
    lean, server = _open(flags, space), _server_with(flags, _ACTIONS, space)
    for _ in range(2):  # the first usual reply teaches the layout
        server.receive_data(lean_request(lean, 1) or b"")
        server.next_event()
        _lean(lean, server.send_reply(m.StepReply(space.sample(), 1.0, False, False, {})))
    server.receive_data(lean_request(lean, 7) or b"")
    server.next_event()
    reply = server.send_error(InvalidActionError("action 7 is not in Discrete(3)"))
    assert reply is not None
    got, was_lean = _lean(lean, reply)
    assert not was_lean
    assert isinstance(got, InvalidActionError)
    assert str(got) == "action 7 is not in Discrete(3)"


@pytest.mark.parametrize(
    ("flags", "action_space", "action"),
    [
        (Flags.EXTENDED, spaces.Discrete(3), 1),  # extended without error replies
        (Flags.VECTOR | _EXTENDED, spaces.Discrete(3), 1),  # a vector connection
        (_EXTENDED, spaces.Box(-1, 1, (2,), np.float32), np.zeros(2, np.float32)),
        (_EXTENDED, spaces.Discrete(3), 1.5),  # not an integer: the general path says why
        (Flags(0), spaces.Discrete(3), 1.5),
    ],
)
def test_the_lean_step_is_only_for_integer_actions_of_one_env_connections(
    flags: Flags, action_space: spaces.Space[Any], action: Any
) -> None:
    client = ClientConnection(flags)
    client.send_handshake("x")
    client.receive_data(ServerConnection().send_handshake_reply(""))
    client.next_event()
    client.set_spaces(action_space, spaces.Box(-1, 1, (4,), np.float32))
    assert lean_request(client, action) is None


_SEED_FLAGS = [Flags(0), Flags.ERRORS, Flags.ERRORS | Flags.MONITOR_REPLY]


@pytest.mark.parametrize("flags", _SEED_FLAGS, ids=["seed", "errors", "errors+monitor"])
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_seed_lean_steps_read_what_the_general_path_reads(
    name: str, space: Any, flags: Flags
) -> None:
    general, lean = _open(flags, space), _open(flags, space)
    server = _server_with(flags, _ACTIONS, space)
    used = 0
    for t, info in enumerate([{}, {}, {"lives": 3}, {}, {}]):
        action = np.int64(t % 3) if t % 2 else t % 3
        request = general.send_request(m.Step(action))
        assert lean_request(lean, action) == request
        server.receive_data(request)
        assert isinstance(server.next_event(), m.Step)
        try:
            reply = server.send_reply(m.StepReply(space.sample(), 0.25 * t, t == 4, False, info))
        except EnvwireError:  # a space the seed's replies cannot carry
            general.send_request(m.Step(0))  # (the lean client's step stays in flight)
            continue
        expected = _general(general, reply)
        got, was_lean = _lean(lean, reply, pieces=2 if t == 3 else 1)
        assert_same(got, expected, f"{name}, step {t}")
        used += was_lean
        assert not lean.buffered
    # A flat float Box's replies without an info are read lean, also in two pieces
    flat = type(space) is spaces.Box and len(space.shape) == 1 and space.shape[0] > 0
    assert used == (4 if flat and space.dtype in (np.float32, np.float64) else 0), name


_ODD_TEXTS = [  # a seed reply's observation text, and whether it is read lean (float32, 64)
    (b"[0.5,-1.25,3.0]", True, True),
    (b"[1,2,3]", False, False),  # all integers: an int64 array, cast by the general path
    (b"[1,2.5,true]", True, True),  # numbers of mixed kinds: a float array, as the general's
    # float32's range is checked by min and max, which a NaN first makes NaN
    (b"[NaN,1.0,2.0]", False, True),
    (b"[1.0,NaN,2.0]", True, True),
    (b"[1.0,NaN,1e39]", False, True),  # over float32's range: the general path refuses it
    (b"[1.0,2.0,Infinity]", False, True),  # infinities: the general path keeps them
    (b"[-1e39,2.0,3.0]", False, True),
    (b"[1.0,1e400,3.0]", False, True),  # 1e400 reads as an infinity
    (b"[3.4028234663852886e38,0.0,0.0]", True, True),  # float32's largest
    (b"[1.0,2.0]", False, False),  # the wrong length
    (b"[[1.0,2.0,3.0]]", False, False),  # the wrong shape (nested)
    (b"[1.0,2.0,3.0] ", False, False),  # more than the value
    (b"[1.0,2.0,", False, False),  # malformed
    (b'[1.0,"2",3.0]', False, False),
    (b"[1.0,null,3.0]", False, False),
    (b"[1,2,100000000000000000000000000]", False, False),  # an integer past 64 bits
    (b'{"a":1}', False, False),
    (b"\xff", False, False),  # not UTF-8
    (b"[" * 5000 + b"]" * 5000, False, False),  # nested past the recursion limit
]


@pytest.mark.parametrize("flags", _SEED_FLAGS[:2], ids=["seed", "errors"])
@pytest.mark.parametrize(("text", "lean32", "lean64"), _ODD_TEXTS)
def test_seed_lean_steps_of_odd_texts_read_what_the_general_path_reads(
    text: bytes, lean32: bool, lean64: bool, flags: Flags
) -> None:
    for dtype, read_lean in ((np.float32, lean32), (np.float64, lean64)):
        space = spaces.Box(-np.inf, np.inf, (3,), dtype)
        general, lean = _open(flags, space), _open(flags, space)
        request = general.send_request(m.Step(1))
        assert lean_request(lean, 1) == request
        status = b"\x00" if flags & Flags.ERRORS else b""
        reply = status + b"\x00" + pack_field(text) + b"\x00" * 8 + b"\x01" + pack_field(b"{}")
        was_lean = same_reads(partial(_general, general, reply), partial(_lean, lean, reply))
        assert was_lean == read_lean, (text, dtype)


def test_no_lean_step_while_another_request_is_in_flight() -> None:
    client = _open(_EXTENDED, spaces.Box(-1, 1, (4,), np.float32))
    client.send_request(m.Step(0))
    assert lean_request(client, 1) is None


# -- the server's end ----------------------------------------------------------------------


def _joined(reply: bytes | list[Any]) -> bytes:
    return reply if isinstance(reply, bytes) else b"".join(bytes(b) for b in reply)


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_replies_are_the_bytes_the_general_path_writes(name: str, space: Any) -> None:
    general, lean = _server(space), _server(space)
    infos = [{}, {}, {"lives": 3}, {}, {}]
    for t, info in enumerate(infos):
        request = b"\x08\x00\x01\x00\x00\x00" + str(t % 3).encode()  # step, JSON action
        for server in (general, lean):
            server.receive_data(request)
            assert isinstance(server.next_event(), m.Step)
        obs = space.sample()
        reply = m.StepReply(obs, 0.5 * t, t == 3, t == 4, info)
        expected = general.send_reply(reply)
        assert _joined(lean.send_reply_buffers(reply)) == expected, f"{name}, step {t}"


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"\x08\x00\x01\x00\x00\x002",  # an integer action
        b"\x08\x00\x01\x00\x00\x009",  # out of the space: the session says so, not the codec
        b"\x08\x00\x03\x00\x00\x00[1]",  # JSON that is no integer
        b"\x08\x00\x02\x00\x00\x00{",  # not JSON
        b"\x08\x07\x01\x00\x00\x001",  # an unknown action type
        b"\x08\x00\x01\x00\x00\x001\x08",  # a step and the first byte of the next
        b"\x08\x00\x02\x00\x00\x001",  # a step not whole yet
        b"\x03",  # not a step
        b"\x07\x1c\x00\x00\x00" + b'{"seed":null,"options":null}',  # the usual reset
        b"\x07\x1c\x00\x00\x00" + b'{"seed":null,"options":null}\x08',  # and more
        b"\x07\x19\x00\x00\x00" + b'{"seed":1,"options":null}',  # a seeded reset
    ],
)
def test_a_lean_step_is_the_event_next_event_reads(request_bytes: bytes) -> None:
    space = spaces.Box(-1, 1, (4,), np.float32)
    general, lean = _server(space), _server(space)
    general.receive_data(request_bytes)
    expected = general.next_event()
    event = lean.lean_step(request_bytes)
    if event is None:  # the general path reads it, as it read it from the other server
        lean.receive_data(request_bytes)
        event = lean.next_event()
    assert type(event) is type(expected)
    assert repr(event) == repr(expected)
    assert lean.buffered == general.buffered


def _server_with(flags: Flags, action_space: Any, observation_space: Any) -> ServerConnection:
    server = ServerConnection()
    server.receive_data(ClientConnection(flags).send_handshake("x"))
    server.next_event()
    server.set_spaces(action_space, observation_space)
    return server


_FLAGS = [Flags(0), Flags.ERRORS, _EXTENDED]
_FLAG_IDS = ["seed", "errors", "extended"]


@pytest.mark.parametrize("flags", _FLAGS, ids=_FLAG_IDS)
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_a_lean_step_of_every_action_space_is_the_event_next_event_reads(
    name: str, space: Any, flags: Flags
) -> None:
    observations = spaces.Box(-1, 1, (2,), np.float32)
    packet = b"\x08" if flags & Flags.EXTENDED else b"\x01"
    sample = json.dumps(spacecodec.to_json(space, space.sample())).encode()
    for action in (sample, b"5", b"[[]]", b"{"):  # a sample, then JSON that may be refused
        request = packet + b"\x00" + len(action).to_bytes(4, "little") + action
        general = _server_with(flags, space, observations)
        lean = _server_with(flags, space, observations)
        general.receive_data(request)
        expected = general.next_event()
        event = lean.lean_step(request)
        assert event is not None, name  # a whole step alone: always the lean path's
        assert type(event) is type(expected), name
        if isinstance(event, m.Step):
            assert isinstance(expected, m.Step)
            assert_same(event.action, expected.action, name)
        else:
            assert repr(event) == repr(expected), name
        # and the server answers it the same way (here: with an error)
        error = InvalidActionError("refused")
        assert lean.send_error(error) == general.send_error(error)


@pytest.mark.parametrize("flags", _FLAGS[:2], ids=_FLAG_IDS[:2])
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_seed_step_replies_are_the_bytes_the_general_path_writes(
    name: str, space: Any, flags: Flags
) -> None:
    general = _server_with(flags, _ACTIONS, space)
    lean = _server_with(flags, _ACTIONS, space)
    for t in range(3):
        request = b"\x01\x00\x01\x00\x00\x00" + str(t).encode()  # the seed's step
        general.receive_data(request)
        assert isinstance(general.next_event(), m.Step)
        assert isinstance(lean.lean_step(request), m.Step)
        reply = m.StepReply(space.sample(), 0.5 * t, t == 1, t == 2, {})
        answers = []
        for server, send in ((general, general.send_reply), (lean, lean.send_reply_buffers)):
            try:
                answers.append(_joined(send(reply)))
            except EnvwireError as exc:  # a space the seed's replies cannot carry
                answers.append(repr(exc).encode() + (server.send_error(exc) or b"<closed>"))
        assert answers[0] == answers[1], f"{name}, step {t}"


_F32 = spaces.Box(-np.inf, np.inf, (3,), np.float32)
_ODD_OBSERVATIONS = [  # (observation space, observation): what the seed's lean reply tests
    (_F32, np.array([0.1, -2.5, 3e-8], np.float32)),
    (_F32, np.array([np.nan, np.inf, -np.inf], np.float32)),  # JSON spells these otherwise
    (_F32, np.array([1.5, 2.0, 0.0], np.float64)),  # not the space's dtype
    (_F32, np.array([1.5, 2.0, 0.0], np.dtype(np.float32, metadata={"k": 1}))),  # equal dtype
    (_F32, np.zeros((3,), np.float32).astype(">f4")),  # another byte order
    (_F32, [0.5, 1.0, 2.0]),  # not an array
    (spaces.Box(0, 255, (3,), np.uint8), np.array([0, 7, 255], np.uint8)),
    (spaces.Box(-9, 9, (2, 2), np.int64), np.array([[-9, 0], [3, 9]], np.int64)),
]


@pytest.mark.parametrize("flags", _FLAGS[:2], ids=_FLAG_IDS[:2])
@pytest.mark.parametrize("info", [{}, {"k": 1}])
@pytest.mark.parametrize(("space", "obs"), _ODD_OBSERVATIONS)
def test_seed_step_replies_of_odd_observations_are_the_general_paths_bytes(
    space: Any, obs: Any, info: dict[str, Any], flags: Flags
) -> None:
    general = _server_with(flags, _ACTIONS, space)
    lean = _server_with(flags, _ACTIONS, space)
    request = b"\x01\x00\x01\x00\x00\x001"
    general.receive_data(request)
    assert isinstance(general.next_event(), m.Step)
    assert isinstance(lean.lean_step(request), m.Step)
    reply = m.StepReply(obs, 1.25, False, True, info)
    assert _joined(lean.send_reply_buffers(reply)) == general.send_reply(reply)


def test_a_lean_step_waits_for_bytes_already_buffered() -> None:
    server = _server(spaces.Box(-1, 1, (4,), np.float32))
    server.receive_data(b"\x08")  # half a packet came first
    assert server.lean_step(b"\x00\x01\x00\x00\x001") is None


# -- vector steps --------------------------------------------------------------------------

_VECTOR = _EXTENDED | Flags.VECTOR
_BATCHED = [
    ("box_f32", spaces.Box(-1, 1, (4,), np.float32, seed=1)),
    ("box_int64_2d", spaces.Box(-5, 5, (2, 3), np.int64, seed=1)),
    ("frames", spaces.Box(0, 255, (8, 8, 3), np.uint8, seed=1)),
    ("multi_binary", spaces.MultiBinary(5, seed=1)),
    ("multi_discrete", spaces.MultiDiscrete([3, 4], seed=1)),
    ("dict", spaces.Dict({"a": spaces.Discrete(3)}, seed=1)),  # JSON: never lean
]


def _vector_pair(space: spaces.Space[Any], n: int) -> tuple[ClientConnection, ServerConnection]:
    client, server = ClientConnection(_VECTOR), ServerConnection()
    server.receive_data(client.send_handshake("x", {"num_envs": n}))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    batched = batch_space(space, n)
    for end in (client, server):
        end.set_spaces(batch_space(_ACTIONS, n), batched)
    return client, server


@pytest.mark.parametrize(("name", "space"), _BATCHED, ids=[n for n, _ in _BATCHED])
def test_lean_vector_steps_read_what_the_general_path_reads(name: str, space: Any) -> None:
    n = 3
    general, server = _vector_pair(space, n)
    lean, _ = _vector_pair(space, n)
    batched = batch_space(space, n)
    used = 0
    for t, infos in enumerate([{}, {}, {"x": np.array([1, 2, 3])}, {}, {}]):
        actions = np.array([t % 3] * n)
        request = general.send_request(m.Step(actions))
        assert lean.send_request(m.Step(actions)) == request
        server.receive_data(request)
        assert isinstance(server.next_event(), m.Step)
        reply = server.send_reply(
            m.VectorStepReply(
                batched.sample(),
                np.arange(n, dtype=np.float64) * t,
                np.array([t == 3] * n),
                np.array([False, t == 4, False]),
                infos,
            )
        )
        general.receive_data(reply)
        expected = general.next_event()
        inbox = memoryview(bytearray(reply))
        got = lean.lean_vector_reply(inbox, len(reply))
        if got is None:
            lean.receive_view(inbox)
            got = lean.next_event()
        else:
            used += 1
        assert isinstance(expected, m.VectorStepReply)
        assert isinstance(got, m.VectorStepReply)
        for field in ("observations", "rewards", "terminations", "truncations", "infos"):
            assert_same(getattr(got, field), getattr(expected, field), f"{name} {t} {field}")
        assert not lean.buffered
    # Steps 1 to 4 (the first teaches the layout; step 2's info is read as the general path
    # reads it).
    assert used == (0 if name == "dict" else 4)


def _batch_pair(
    action_space: spaces.Space[Any], observation_space: spaces.Space[Any], n: int
) -> tuple[ClientConnection, ServerConnection]:
    client, server = ClientConnection(_VECTOR), ServerConnection()
    server.receive_data(client.send_handshake("x", {"num_envs": n}))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for end in (client, server):
        end.set_spaces(batch_space(action_space, n), batch_space(observation_space, n))
    return client, server


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_vector_requests_are_the_general_bytes(name: str, space: Any) -> None:
    """For every space's batch of actions: the lean request is the general one's bytes, and
    the server reads the same step (or the same error) from it; a batch the lean request
    cannot carry (not one array of a tensor dtype) is left to the general path."""
    n = 3
    general, server = _batch_pair(space, _ACTIONS, n)
    lean, _ = _batch_pair(space, _ACTIONS, n)
    batched = batch_space(space, n)
    batched.seed(2)
    batches = [batched.sample() for _ in range(3)]
    if isinstance(batches[0], np.ndarray):  # another dtype and shape: a new head
        batches += [batches[0][:2], batches[0].astype(np.float64), np.asfortranarray(batches[0])]
    for t, actions in enumerate(batches):
        expected = general.send_request(m.Step(actions))
        got = lean.lean_vector_request(actions)
        carried = isinstance(actions, np.ndarray) and actions.dtype in CODE_BY_DTYPE
        if not carried:
            assert got is None, f"{name} {t}"
            got = lean.send_request(m.Step(actions))
        assert got == expected, f"{name} {t}"
        assert list(lean._expect) == list(general._expect)
        server.receive_data(got)
        event = server.next_event()
        assert type(event).__name__ in ("Step", "Invalid"), f"{name} {t}"
        general._expect.clear()
        lean._expect.clear()
        server._pending.clear()


def test_a_lean_vector_request_waits_for_what_is_in_flight() -> None:
    client, _ = _batch_pair(_ACTIONS, spaces.Box(-1, 1, (2,), np.float32), 2)
    client.send_request(m.Reset(seed=0))
    assert client.lean_vector_request(np.zeros(2, np.int64)) is None


def _reply(space: spaces.Space[Any], n: int, t: int, infos: dict[str, Any]) -> m.VectorStepReply:
    obs = batch_space(space, n).sample()
    rewards = np.arange(n, dtype=np.float32 if t == 4 else np.float64) * t
    return m.VectorStepReply(obs, rewards, np.array([t == 3] * n), np.array([t == 2] * n), infos)


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_lean_vector_replies_are_the_general_bytes(name: str, space: Any) -> None:
    """For every observation space: the server's lean vector reply is the general one's bytes
    (an info, float32 rewards, another batch shape: written by the general path, the same
    bytes), and the client's lean read of it gives what the general read gives."""
    n = 3
    reader, server = _batch_pair(_ACTIONS, space, n)
    lean_reader, _ = _batch_pair(_ACTIONS, space, n)
    leans = 0
    for t, infos in enumerate([{}, {}, {}, {"x": np.arange(n), "_x": np.ones(n, bool)}, {}, {}]):
        reply = _reply(space, n, t, infos)
        if t == 5 and isinstance(reply.observations, np.ndarray):  # another batch size
            reply = m.VectorStepReply(
                reply.observations[:2],
                reply.rewards[:2],
                *(a[:2] for a in (reply.terminations, reply.truncations)),
            )
        server._pending.append(Packet.VECTOR_STEP)
        expected = b"".join((b"\x00", *server._vector_step_parts(reply)))
        got = server.send_reply(reply)
        assert got == expected, f"{name} {t}"
        for client in (reader, lean_reader):
            client.send_request(m.Step(np.zeros(n, np.int64)))
        reader.receive_data(got)
        general = reader.next_event()
        inbox = memoryview(bytearray(got))
        arrays = lean_reader.lean_vector_step(inbox, len(got))
        if arrays is None:
            lean_reader.receive_view(inbox)
            event = lean_reader.next_event()
            assert isinstance(event, m.VectorStepReply)
            read = (
                event.observations,
                event.rewards,
                event.terminations,
                event.truncations,
                event.infos,
            )
        else:
            leans += 1
            read = arrays
        assert isinstance(general, m.VectorStepReply)
        fields = (
            general.observations,
            general.rewards,
            general.terminations,
            general.truncations,
            general.infos,
        )
        assert_same(read, fields, f"{name} {t}")
        if arrays is not None:  # writable, aligned, and over no part of the reused inbox
            inbox.obj[:] = bytes(len(got))
            assert_same(read, fields, f"{name} {t}, the inbox overwritten")
            assert all(a.flags.writeable and a.flags.aligned for a in arrays[:4])
    tensor = isinstance(batch_space(space, n).sample(), np.ndarray)
    # the first reply teaches the layout; 1 to 4 are read lean (3 with its info, 4's float32
    # rewards were written as float64, the usual bytes), not 5 (another batch size)
    assert leans == (4 if tensor else 0), name
    assert (server._vector_layout is not None) == tensor, name  # the server wrote lean too


def test_a_lean_vector_reply_of_arrays_that_are_not_contiguous_is_the_general_bytes() -> None:
    """Observations and rewards that are views with strides (a transposed batch, every other
    reward) are written in C order, as the general path writes them."""
    space = spaces.Box(0, 9, (2, 3), np.float32)
    _, server = _batch_pair(_ACTIONS, space, 4)
    whole = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    for obs, rewards in [
        (np.ascontiguousarray(whole.transpose(0, 2, 1)), np.arange(4.0)),  # teaches the layout
        (whole.transpose(0, 2, 1), np.arange(8.0)[::2]),
        (np.ascontiguousarray(whole.transpose(0, 2, 1)), np.arange(8.0)[1::2]),
    ]:
        reply = m.VectorStepReply(obs, rewards, np.zeros(4, bool), np.ones(4, bool), {})
        server._pending.append(Packet.VECTOR_STEP)
        expected = b"".join((b"\x00", *server._vector_step_parts(reply)))
        assert server.send_reply(reply) == expected
    assert server._vector_layout is not None  # the last two were written lean


def _same_step_infos(space: spaces.Space[Any]) -> list[dict[str, Any]]:
    """The vector infos of a SameStep vector env over ``space`` (observations of the space,
    episodes of 1-3 steps, an info of arrays and scalars on some steps)."""

    class Env(gymnasium.Env[Any, Any]):
        def __init__(self) -> None:
            self.observation_space, self.action_space = space, spaces.Discrete(2)
            self.t = 0

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
            super().reset(seed=seed)
            self.observation_space.seed(seed)
            self.t = 0
            return self.observation_space.sample(), {}

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            self.t += 1
            info = {"x": np.float32(self.t), "a": np.arange(self.t)} if self.t == 2 else {}
            return self.observation_space.sample(), 1.0, self.t >= 1 + action, False, info

    mode = gymnasium.vector.AutoresetMode.SAME_STEP
    env = LeanSyncVectorEnv([Env] * 3, autoreset_mode=mode)
    env.reset(seed=0)
    infos = [env.step(np.array([0, 1, 1]))[4] for _ in range(4)]
    env.close()
    return infos


_ODD_INFOS: list[dict[str, Any]] = [
    {"é": np.zeros(2)},
    {'q"': np.zeros(2)},
    {"b\\": np.zeros(2)},
    {"t\t": np.zeros(2)},
    {"big": np.zeros(2, ">f4")},
    {"o": np.array([[None]], dtype=object)},
    {"o": np.array([None, 1.5], dtype=object)},
    {"o": np.array([None, np.float32(1)], dtype=object)},
    {"c": np.zeros(2, np.complex64)},
    {"s": np.array(["a", "b"])},
    {"n": 3},
    {"d": {"e": {"f": np.ones((2, 0), np.int8)}}},
    {1: np.zeros(1)},
]


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_vector_infos_are_the_general_bytes(name: str, space: Any) -> None:
    """The server's direct writing of vector infos gives the typed JSON encoder's bytes, for
    SameStep infos over every space and infos it leaves to the encoder."""
    server = _batch_pair(_ACTIONS, space, 3)[1]
    same_step = _same_step_infos(space)
    for infos in same_step + _ODD_INFOS:
        assert server._vector_infos(infos) == info_field(infos, True), (name, infos)
    direct = [_typed_dict(infos, []) for infos in same_step]
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        assert any(direct), name  # the final observations of arrays are written directly
    assert not any(_typed_dict(infos, []) for infos in _ODD_INFOS[:10])


@pytest.mark.parametrize("info", [b'{"a":', b"[1]", b'{"x":{"__ndarray__":"!","dtype":"f4"}}'])
def test_a_vector_info_the_lean_read_cannot_read_is_the_general_paths_error(info: bytes) -> None:
    space = spaces.Box(-1, 1, (2,), np.float32, seed=1)
    general, server = _batch_pair(_ACTIONS, space, 2)
    lean, _ = _batch_pair(_ACTIONS, space, 2)
    server._pending.append(Packet.VECTOR_STEP)
    usual = server.send_reply(_reply(space, 2, 1, {}))
    odd = usual[: -len(pack_field(b"{}"))] + pack_field(info)
    outcomes = []
    for client in (general, lean):
        for reply in (usual, odd):
            client.send_request(m.Step(np.zeros(2, np.int64)))
            inbox = memoryview(bytearray(reply))
            try:
                got = client.lean_vector_step(inbox, len(reply)) if client is lean else None
                if got is None:
                    client.receive_view(inbox)
                    event = client.next_event()
                    got = event.infos if isinstance(event, m.VectorStepReply) else event
                else:
                    got = got[4]
                outcome: Any = repr(got)
            except ProtocolError as exc:
                outcome = str(exc)
        outcomes.append(outcome)
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    "options",
    [
        b'{"seed":null,"options":null}',  # the usual reset's, read without JSON
        b'{"seed": null, "options": null}',
        b'{"options":null,"seed":null}',
        b'{"seed":5,"options":null}',
        b'{"seed":null,"options":{"low":0}}',
        b"{}",
        b"",
        b'{"seed":null,"options":null',  # not JSON
        b"[null]",
    ],
)
def test_a_reset_is_the_event_its_json_reads(options: bytes) -> None:
    server = _server(spaces.Box(-1, 1, (4,), np.float32))
    server.receive_data(bytes([Packet.RESET_EX]) + pack_field(options))
    event = server.next_event()
    try:
        opts = json.loads(options) if options else {}
        expected: Any = m.Reset(seed=opts.get("seed"), options=opts.get("options"))
    except (ValueError, AttributeError):
        expected = ProtocolError
    if expected is ProtocolError:
        assert type(event).__name__ == "Invalid" and isinstance(event.error, ProtocolError)  # type: ignore[union-attr]
    else:
        assert event == expected
    assert not server.buffered


def test_the_clients_usual_reset_is_the_general_bytes() -> None:
    client = _open(_EXTENDED, spaces.Discrete(3))
    usual = client.send_request(m.Reset())
    assert usual == bytes([Packet.RESET_EX]) + pack_field(
        json.dumps({"seed": None, "options": None}, separators=(",", ":")).encode()
    )
    seeded = client.send_request(m.Reset(seed=4, options={"a": 1}))
    assert seeded == bytes([Packet.RESET_EX]) + pack_field(b'{"seed":4,"options":{"a":1}}')
    server = _server(spaces.Discrete(3))
    server.receive_data(usual + seeded)
    assert server.next_event() == m.Reset()
    assert server.next_event() == m.Reset(seed=4, options={"a": 1})
    for obs in (1, 2):
        client.receive_data(server.send_reply(m.ResetReply(np.int64(obs), {})))
        reply = client.next_event()
        assert isinstance(reply, m.ResetReply) and reply.observation == obs


@pytest.mark.parametrize("flags", [Flags(0), Flags.ERRORS, Flags.VECTOR | _EXTENDED])
def test_the_usual_reset_is_lean_only_where_its_packet_is_allowed(flags: Flags) -> None:
    usual = bytes([Packet.RESET_EX]) + pack_field(b'{"seed":null,"options":null}')
    server = ServerConnection()
    server.receive_data(ClientConnection(flags).send_handshake("x", vector={"num_envs": 2}))
    server.next_event()
    assert server.lean_step(usual) is None  # the general path refuses it, in its own words
    server.receive_data(usual)
    event = server.next_event()
    assert type(event).__name__ == "Invalid"


@pytest.mark.parametrize("where", ["head", "info"])
def test_a_reply_of_the_usual_size_but_other_bytes_is_read_by_the_general_path(
    where: str,
) -> None:
    space = spaces.Box(-1, 1, (4,), np.float32)
    general, lean, server = _open(_EXTENDED, space), _open(_EXTENDED, space), _server(space)
    usual = b""
    for t in range(2):  # the first usual reply teaches the layout
        request = general.send_request(m.Step(1))
        assert lean_request(lean, 1) == request
        server.receive_data(request)
        server.next_event()
        usual = server.send_reply(m.StepReply(space.sample(), 1.0, False, t == 1, {}))
        _general(general, usual)
        assert _lean(lean, usual)[1] == (t == 1)
    if where == "head":  # float32's dtype code turned into int32's: the same size
        code = usual.index(bytes([CODE_BY_DTYPE[np.dtype(np.float32)]]), 2)
        other = usual[:code] + bytes([CODE_BY_DTYPE[np.dtype(np.int32)]]) + usual[code + 1 :]
    else:  # an info of the empty one's length that is not a JSON object
        other = usual[:-2] + b"[]"
    general.send_request(m.Step(1))
    lean_request(lean, 1)
    assert not same_reads(lambda: _general(general, other), lambda: _lean(lean, other))


def test_vector_steps_of_the_last_tensor_layout_are_the_events_next_event_reads() -> None:
    """A vector step packet of the last tensor action's layout (its length and its bytes up to
    the tensor's data) is read without parsing the tensor's header: the same event as a
    general server's, for changing values, then other dtypes, shapes, lengths and tensors
    that do not fill their packet, in any order; each action is an array of its own."""
    n = 3
    _, lean = _batch_pair(_ACTIONS, _ACTIONS, n)
    rng = np.random.default_rng(0)
    tensors = [pack_tensor(rng.integers(0, 3, n).astype(np.int64)) for _ in range(4)]
    tensors += [
        pack_tensor(np.array([1, 2, 0], np.int32)),  # another dtype, the same shape
        pack_tensor(np.array([[1], [2], [0]], np.int64)),  # another shape
        pack_tensor(np.array([1, 2], np.int64)),  # another length
        pack_tensor(np.array([1, 2, 0], np.int64)) + b"\x00",  # trailing bytes
        pack_tensor(np.array([2, 2, 1], np.int64)),  # the usual layout again
        pack_tensor(np.array([0, 0, 0], np.int64)),
    ]
    actions = []
    for tensor in tensors:
        request = bytes([Packet.VECTOR_STEP, ACT_TENSOR]) + pack_field(tensor)
        _, general = _batch_pair(_ACTIONS, _ACTIONS, n)
        general.receive_data(request)
        expected = general.next_event()
        event = lean.lean_step(request)
        assert event is not None
        assert type(event) is type(expected)
        if isinstance(event, m.Step):
            assert isinstance(expected, m.Step)
            assert_same(event.action, expected.action)
            assert event.action.flags.writeable
            actions.append(event.action)
        else:
            assert repr(event) == repr(expected)
        error = InvalidActionError("refused")
        assert lean.send_error(error) == general.send_error(error)
    assert len({id(a) for a in actions}) == len(actions) > 4
    assert len({a.ctypes.data for a in actions}) == len(actions)  # no shared memory
