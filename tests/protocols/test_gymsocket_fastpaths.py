"""The gym-socket codecs' hot paths write and read exactly what their general paths do."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import ProtocolError
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, Flags, ServerConnection
from envwire.protocols.gymsocket.packets import json_array, json_bytes

_EXTENDED = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED


def _pair(flags: Flags, observation_space: Any) -> tuple[ClientConnection, ServerConnection]:
    client, server = ClientConnection(flags), ServerConnection()
    server.receive_data(client.send_handshake("x"))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for end in (client, server):
        end.set_spaces(spaces.Discrete(2), observation_space)
    return client, server


def _step(client: ClientConnection, server: ServerConnection, obs: Any) -> tuple[bytes, Any]:
    server.receive_data(client.send_request(m.Step(1)))
    assert isinstance(server.next_event(), m.Step)
    reply = server.send_reply(m.StepReply(obs, 0.5, False, True, {}))
    client.receive_data(reply)
    return reply, client.next_event()


@pytest.mark.parametrize("flags", [Flags(0), _EXTENDED])
def test_frames_are_the_seed_byte_list(flags: Flags) -> None:
    """uint8 frames, sent from the array's own memory, are the seed's byte list to the byte."""
    space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    client, server = _pair(flags, space)
    frame = np.asfortranarray(np.arange(84 * 84 * 4, dtype=np.uint8).reshape(84, 84, 4))
    reply, event = _step(client, server, frame)
    body = struct.pack("<3I", 84, 84, 4) + np.ascontiguousarray(frame).tobytes()
    field = b"\x01" + struct.pack("<II", 4 + len(body), 3) + body
    assert reply[1 if flags else 0 :].startswith(field)
    assert isinstance(event, m.StepReply)
    np.testing.assert_array_equal(event.observation, frame)
    assert event.observation.flags.writeable
    event.observation[0, 0, 0] = 7  # the client's array is its own, not a view of a buffer
    assert event.truncated is bool(flags)


def test_json_box_observation_is_what_to_json_writes() -> None:
    space = spaces.Box(-2, 2, (4,), np.float32)
    client, server = _pair(Flags(0), space)
    obs = np.array([0.1, -1.5, 1e-8, 2.0], np.float32)
    reply, event = _step(client, server, obs)
    text = json.dumps(spacecodec.to_json(space, obs), separators=(",", ":")).encode()
    assert reply.startswith(b"\x00" + struct.pack("<I", len(text)) + text)
    np.testing.assert_array_equal(event.observation, obs)


def test_a_tensor_overrunning_its_field_is_a_protocol_error() -> None:
    space = spaces.Box(-2, 2, (4,), np.float32)
    client, server = _pair(_EXTENDED, space)
    server.receive_data(client.send_request(m.Step(1)))
    server.next_event()
    reply = bytearray(
        server.send_reply(m.StepReply(np.zeros(4, np.float32), 0.0, False, False, {}))
    )
    reply[2:6] = struct.pack("<I", struct.unpack_from("<I", reply, 2)[0] - 4)  # field too short
    client.receive_data(bytes(reply))
    with pytest.raises(ProtocolError):
        client.next_event()


FRAMES = spaces.Box(0, 255, (84, 84, 4), np.uint8)


def _frame_reply(server: ServerConnection, client: ClientConnection, value: int) -> bytes:
    server.receive_data(client.send_request(m.Step(1)))
    assert isinstance(server.next_event(), m.Step)
    frame = np.full((84, 84, 4), value, np.uint8)
    return server.send_reply(m.StepReply(frame, float(value), False, False, {"v": value}))


@pytest.mark.parametrize("flags", [Flags(0), _EXTENDED])
def test_a_whole_reply_in_a_borrowed_view_is_parsed_in_place(flags: Flags) -> None:
    """receive_view: a frame reply is parsed where it was received, with one copy of the frame
    (into its array); the receive buffer can be reused as soon as next_event returns."""
    import tracemalloc

    client, server = _pair(flags, FRAMES)
    inbox = bytearray(1 << 18)
    reply = _frame_reply(server, client, 9)
    inbox[: len(reply)] = reply
    tracemalloc.start()
    try:
        client.receive_view(memoryview(inbox)[: len(reply)])
        event = client.next_event()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    inbox[: len(reply)] = bytes(len(reply))  # the owner reuses its buffer
    assert isinstance(event, m.StepReply)
    assert (event.observation == 9).all() and event.info == {"v": 9}
    assert not np.shares_memory(event.observation, np.frombuffer(inbox, np.uint8))
    assert client.buffered == 0
    frame_bytes = 84 * 84 * 4
    assert frame_bytes <= peak < 1.5 * frame_bytes, peak  # the frame's array, and no buffer copy


@pytest.mark.parametrize("flags", [Flags(0), _EXTENDED])
def test_borrowed_views_split_and_joined_replies(flags: Flags) -> None:
    """A reply cut across two views, and two replies in one view, parse as if copied; what a
    view leaves unparsed survives the owner's reuse of its buffer."""
    client, server = _pair(flags, FRAMES)
    first, second = _frame_reply(server, client, 1), _frame_reply(server, client, 2)
    inbox = bytearray(len(first) + len(second))
    # the first reply and half of the second in one view; the rest later, in the same buffer
    cut = len(first) + len(second) // 2
    inbox[:cut] = (first + second)[:cut]
    client.receive_view(memoryview(inbox)[:cut])
    got = client.next_event()
    assert isinstance(got, m.StepReply) and (got.observation == 1).all()
    assert client.next_event() is NEED_DATA
    rest = second[len(second) // 2 :]
    inbox[: len(rest)] = rest
    inbox[len(rest) : cut] = bytes(cut - len(rest))  # overwrite what the first view held
    client.receive_view(memoryview(inbox)[: len(rest)])
    got = client.next_event()
    assert isinstance(got, m.StepReply) and (got.observation == 2).all() and got.reward == 2.0
    assert client.buffered == 0
    # a view fed twice without a parse between is kept whole
    third, fourth = _frame_reply(server, client, 3), _frame_reply(server, client, 4)
    a, b = bytearray(third), bytearray(fourth)
    client.receive_view(memoryview(a))
    client.receive_view(memoryview(b))
    a[:] = bytes(len(a))
    assert (client.next_event().observation == 3).all()  # type: ignore[union-attr]
    assert (client.next_event().observation == 4).all()  # type: ignore[union-attr]


@pytest.mark.parametrize("info", [{}, {"lives": 3}])
@pytest.mark.parametrize("order", ["C", "F"])
def test_large_frames_are_gathered_from_the_arrays_own_memory(info: Any, order: str) -> None:
    """send_reply_buffers writes what send_reply writes, with the frame's memory uncopied."""
    space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    frame = np.asarray(np.arange(84 * 84 * 4).reshape(84, 84, 4) % 251, np.uint8, order=order)
    step = m.StepReply(frame, 0.5, False, True, info)
    expected = []
    for gather in (False, True):
        client, server = _pair(_EXTENDED, space)
        server.receive_data(client.send_request(m.Step(1)))
        server.next_event()
        expected.append(server.send_reply_buffers(step) if gather else server.send_reply(step))
    plain, buffers = expected
    assert isinstance(buffers, list)
    assert b"".join(buffers) == plain
    views = [b for b in buffers if isinstance(b, memoryview)]
    assert len(views) == 1
    # A C-ordered frame is sent from where it lies; a Fortran-ordered one is made contiguous.
    assert np.shares_memory(np.asarray(views[0]), frame) is (order == "C")
    client.receive_data(plain)
    event = client.next_event()
    assert isinstance(event, m.StepReply)
    np.testing.assert_array_equal(event.observation, frame)
    assert event.info == info


def test_frames_after_the_first_are_gathered_as_it_was() -> None:
    """After the first gathered frame, frames of its shape come as its head, the array's own
    memory and the tail; any other (not C-contiguous, with an info, of another dtype or
    shape, a view into a larger array) still as send_reply's bytes, each step in turn."""
    space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (6, 84, 84, 4), dtype=np.uint8)
    wide = rng.integers(0, 256, (84, 84, 8), dtype=np.uint8)
    steps = [
        (frames[0], {}),
        (frames[1], {}),  # the lean gathered reply
        (np.asfortranarray(frames[2]), {}),  # not C-contiguous: copied
        (frames[3], {"lives": 2}),  # an info: the general path
        (wide[:, :, :4], {}),  # a strided view: copied
        (frames[4].astype(np.uint16), {}),  # a tensor
        (frames[5][:64], {}),  # another shape, C-contiguous: gathered, and learnt
        (frames[0][:64], {}),
        (frames[1], {}),  # the first shape again
    ]
    replies: dict[bool, list[bytes | list[bytes | memoryview]]] = {}
    for gather in (False, True):
        client, server = _pair(_EXTENDED, space)
        replies[gather] = []
        for i, (frame, info) in enumerate(steps):
            server.receive_data(client.send_request(m.Step(1)))
            server.next_event()
            step = m.StepReply(frame, float(i), i % 2 == 0, i == 3, info)
            send = server.send_reply_buffers if gather else server.send_reply
            replies[gather].append(send(step))
    client = _pair(_EXTENDED, space)[0]
    for i, ((frame, info), plain, sent) in enumerate(
        zip(steps, replies[False], replies[True], strict=True)
    ):
        assert isinstance(plain, bytes)
        whole = b"".join(sent) if isinstance(sent, list) else sent
        assert whole == plain, f"step {i}"
        shared = isinstance(sent, list) and any(
            isinstance(b, memoryview) and np.shares_memory(np.asarray(b), frame) for b in sent
        )
        assert shared is (frame.flags.c_contiguous and frame.dtype == np.uint8), f"step {i}"
        client.send_request(m.Step(1))
        client.receive_data(plain)
        event = client.next_event()
        assert isinstance(event, m.StepReply)
        np.testing.assert_array_equal(event.observation, frame)
        assert (event.reward, event.terminated, event.truncated) == (float(i), i % 2 == 0, i == 3)
        assert event.info == info
    assert len(replies[True][1]) == 3  # the head, the array, the tail with the empty info


@pytest.mark.parametrize(
    ("flags", "obs"),
    [
        (_EXTENDED, np.zeros((8, 8), np.uint8)),  # under GATHER_MIN: one join is cheaper
        (_EXTENDED, np.zeros((128, 128), np.float32)),  # a tensor, not a byte list
        (Flags(0), np.zeros((84, 84, 4), np.uint8)),  # the seed's STEP packet
    ],
    ids=["small", "float32", "seed-step"],
)
def test_other_replies_come_as_the_bytes_send_reply_writes(flags: Flags, obs: Any) -> None:
    space = spaces.Box(0, 255, obs.shape, obs.dtype)
    replies = []
    for gather in (False, True):
        client, server = _pair(flags, space)
        server.receive_data(client.send_request(m.Step(1)))
        server.next_event()
        step = m.StepReply(obs, 0.0, False, False, {})
        replies.append(server.send_reply_buffers(step) if gather else server.send_reply(step))
    assert isinstance(replies[1], bytes)
    assert replies[1] == replies[0]


@pytest.mark.parametrize(
    "array",
    [
        np.array([0.1, -1.5, 1e-8, 2.0, -0.0, 1e300, 5e-324], np.float64),
        np.array([[0.1, 2.5], [3.0, -4.25]], np.float32),
        np.array([np.nan, 1.0, np.inf, -np.inf], np.float32),
        np.array([1, -2, 2**62], np.int64),
        np.array([0, 255, 65535], np.uint16),
        np.array(3.5, np.float16),
        np.zeros((0, 3), np.float32),
    ],
    ids=["f64", "f32-2d", "non-finite", "i64", "u16", "0-d", "empty"],
)
def test_json_array_writes_what_the_encoder_writes(array: Any) -> None:
    """The seed path's JSON observations skip the encoder, byte for byte the same."""
    assert json_array(array) == json_bytes(array.tolist())


def test_seed_step_reply_is_the_seed_layout() -> None:
    """The seed's step reply: the JSON observation, f64 reward, one done byte, the info."""
    space = spaces.Box(-2, 2, (2,), np.float32)
    client, server = _pair(Flags(0), space)
    obs = np.array([0.5, -1.0], np.float32)
    for terminated, truncated, done in ((False, False, 0), (True, False, 1), (False, True, 1)):
        server.receive_data(client.send_request(m.Step(1)))
        assert isinstance(server.next_event(), m.Step)
        reply = server.send_reply(m.StepReply(obs, 0.25, terminated, truncated, {"k": 1}))
        text = b"[0.5,-1.0]"
        info = b'{"k":1}'
        assert (
            reply
            == (b"\x00" + struct.pack("<I", len(text)) + text + struct.pack("<d?", 0.25, done))
            + struct.pack("<I", len(info))
            + info
        )
        client.receive_data(reply)
        event = client.next_event()
        assert isinstance(event, m.StepReply)
        assert (event.terminated or event.truncated) is bool(done)
