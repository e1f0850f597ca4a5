"""The client codec's in-place read of a large observation (``own_size``,
``lean_owned_reply``): which layouts qualify, and that its steps are the general path's, each
observation a view of its own reply's buffer, with anything else left to the general path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire import messages as m
from envwire.errors import EnvError
from envwire.protocols.gymsocket import ClientConnection, Flags
from envwire.protocols.gymsocket.lean import OWN_MIN
from tests.protocols.gymsocketpair import lean_request
from tests.protocols.test_gymsocket_spaces import deliver, pair
from tests.spaces_catalog import assert_same

EXTENDED = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED


def _taught(space: spaces.Box, obs: np.ndarray[Any, Any]) -> tuple[ClientConnection, Any]:
    """A client that read one usual step reply of ``obs`` (which teaches it the layout), and
    the server beside it."""
    client, server = pair(EXTENDED, spaces.Discrete(2))
    client.set_spaces(spaces.Discrete(2), space)
    server.set_spaces(spaces.Discrete(2), space)
    server.receive_data(client.send_request(m.Step(np.int64(0))))
    server.next_event()
    deliver(client, server.send_reply(m.StepReply(obs, 1.0, False, False, {})), None)
    return client, server


def _step_reply(client: ClientConnection, server: Any, reply: m.StepReply) -> bytes:
    request = lean_request(client, np.int64(1))
    assert request is not None
    server.receive_data(request)
    server.next_event()
    return server.send_reply(reply)


@pytest.mark.parametrize(
    ("shape", "dtype", "own"),
    [
        ((84, 84, 4), np.uint8, True),  # a frame, as bytes: any offset will do for bytes
        ((64, 64, 4), np.bool_, True),  # a tensor of bytes
        ((64, 64, 3), np.float32, False),  # a tensor's data lies at an odd offset: copied
        ((4,), np.float32, False),  # small: a copy costs less than a buffer
        ((OWN_MIN - 1,), np.uint8, False),
        ((OWN_MIN,), np.uint8, True),
    ],
)
def test_large_aligned_observations_are_read_in_place(
    shape: tuple[int, ...], dtype: Any, own: bool
) -> None:
    space = spaces.Box(0, 1 if dtype is np.bool_ else 255, shape, dtype)
    obs = (np.arange(int(np.prod(shape))) % 2).astype(dtype).reshape(shape)
    client, server = _taught(space, obs)
    after = ~obs if dtype is np.bool_ else obs + 1
    data = _step_reply(client, server, m.StepReply(after, 0.5, False, True, {}))
    assert client.own_size == (len(data) if own else 0)
    if own:
        buffer = memoryview(np.frombuffer(data, np.uint8).copy())
        result = client.lean_owned_reply(buffer, len(data))
        assert result is not None
        assert_same(result, (after, 0.5, False, True, {}))
        assert result[0].flags.writeable and result[0].flags.c_contiguous
        assert np.shares_memory(result[0], np.frombuffer(buffer, np.uint8))


def test_other_replies_are_left_to_the_general_path() -> None:
    """An error, an info, another shape, a reply not yet whole: None, nothing consumed, and
    the general path reads the same bytes."""
    space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    frame = np.full((84, 84, 4), 3, np.uint8)
    client, server = _taught(space, frame)
    size = client.own_size
    assert size
    for reply, cut in [
        (m.StepReply(frame, 0.0, False, False, {"lives": 2}), None),  # an info
        (m.StepReply(frame[:42], 0.0, False, False, {}), None),  # another shape
        (m.StepReply(frame, 0.0, True, False, {}), size // 2),  # half of it so far
    ]:
        data = _step_reply(client, server, reply)
        buffer = memoryview(bytearray(data))
        got = len(data) if cut is None else cut
        assert client.lean_owned_reply(buffer, min(got, size)) is None
        got_reply = deliver(client, data, None)
        assert isinstance(got_reply, m.StepReply)
        assert_same(
            (got_reply.observation, got_reply.reward, got_reply.terminated, got_reply.info),
            (reply.observation, reply.reward, reply.terminated, reply.info),
        )
    request = lean_request(client, np.int64(1))
    assert request is not None
    server.receive_data(request)
    server.next_event()
    data = server.send_error(EnvError("the env raised"))
    assert data
    assert client.lean_owned_reply(memoryview(bytearray(data)), len(data)) is None
    client.receive_data(data)
    error = client.next_event()
    assert isinstance(error, EnvError) and str(error) == "the env raised"
