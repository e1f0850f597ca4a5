"""The gym-socket codec over the shared catalog of spaces: every space as action and as
observation space, under the seed's flags 0 (JSON), ERRORS and the extended flags (tensors),
fed whole and in small chunks: what one side sends, the other reads back bit for bit. Space
descriptions are exact with the extended flags, and exactly the seed's forms otherwise (which
lose what docs/protocols/spaces.md says)."""

from __future__ import annotations

from typing import Any

import pytest
from gymnasium import spaces

from envwire import messages as m
from envwire import spacecodec
from envwire.protocols.gymsocket import (
    NEED_DATA,
    ClientConnection,
    Flags,
    Handshake,
    HandshakeReply,
    ServerConnection,
)
from tests.spaces_catalog import IDS, SPACES, assert_same

FLAGS = {
    "flags0": Flags(0),
    "errors": Flags.ERRORS,
    "extended": Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED,
}


def pair(flags: Flags, space: spaces.Space[Any]) -> tuple[ClientConnection, ServerConnection]:
    """A client and a server after the handshake, both knowing ``space`` as both spaces."""
    client, server = ClientConnection(flags), ServerConnection()
    server.receive_data(client.send_handshake("catalog"))
    assert isinstance(server.next_event(), Handshake)
    client.receive_data(server.send_handshake_reply(""))
    assert client.next_event() == HandshakeReply("")
    for side in (client, server):
        side.set_spaces(space, space)
    return client, server


def deliver(conn: ClientConnection | ServerConnection, data: bytes, chunk: int | None) -> Any:
    """Feed ``data`` whole or in ``chunk``-byte pieces; the one event it completes."""
    pieces = [data] if chunk is None else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    event: Any = NEED_DATA
    for piece in pieces:
        assert event is NEED_DATA, "an event before its last byte arrived"
        conn.receive_data(piece)
        event = conn.next_event()
    assert event is not NEED_DATA and conn.buffered == 0
    return event


@pytest.mark.parametrize("chunk", [None, 7], ids=["whole", "chunks"])
@pytest.mark.parametrize("flags", list(FLAGS.values()), ids=list(FLAGS))
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_actions_and_observations_of_every_space_round_trip(
    name: str, space: spaces.Space[Any], flags: Flags, chunk: int | None
) -> None:
    client, server = pair(flags, space)
    space.seed(0)
    action, observation = space.sample(), space.sample()

    step = deliver(server, client.send_request(m.Step(action)), chunk)
    assert isinstance(step, m.Step)
    assert_same(action, step.action, f"{name}: action")

    reply = m.StepReply(observation, 0.5, False, True, {"n": 1})
    got = deliver(client, server.send_reply(reply), chunk)
    assert isinstance(got, m.StepReply)
    assert_same(observation, got.observation, f"{name}: observation")
    assert (got.reward, got.info) == (0.5, {"n": 1})
    if flags & Flags.EXTENDED:
        assert got.truncated and not got.terminated


@pytest.mark.parametrize("flags", list(FLAGS.values()), ids=list(FLAGS))
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_every_space_description_round_trips(
    name: str, space: spaces.Space[Any], flags: Flags
) -> None:
    client, server = pair(flags, space)
    request = deliver(server, client.send_request(m.GetSpace(m.SpaceKind.OBSERVATION)), None)
    assert request == m.GetSpace(m.SpaceKind.OBSERVATION)
    got = deliver(client, server.send_reply(m.SpaceReply(space)), None)
    assert isinstance(got, m.SpaceReply)
    if flags & Flags.EXTENDED:  # envwire's exact descriptions
        assert got.space == space, name
    else:  # the seed's forms, with what they lose (docs/protocols/spaces.md)
        legacy = spacecodec.from_description(spacecodec.describe(space, style="gym-socket"))
        assert got.space == legacy and type(got.space) is type(space), name
