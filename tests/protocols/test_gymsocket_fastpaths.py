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
from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection

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
